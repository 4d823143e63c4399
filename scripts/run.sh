#!/usr/bin/env bash
# Sets up ./.venv and runs the main job: an ADL benchmark query (default Q6, the
# trijet query) on a real CMS NanoAOD file through GPUExecutor on an embedded local
# Dask cluster. Extra arguments go to examples/run_adl.py (--help lists them).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
export NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-$PWD/.cache/numba}
exec .venv/bin/python examples/run_adl.py "$@"

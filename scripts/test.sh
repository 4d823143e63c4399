#!/usr/bin/env bash
# Sets up ./.venv and runs the test suite. GPU tests (tests/gpu, marker "gpu") skip
# themselves where no GPU is present. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
export NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-$PWD/.cache/numba}
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
rc=$?
set -e
# pytest's 5 means "no tests ran": that is a failure of the suite, not a pass.
[ "$rc" -eq 5 ] && echo "no tests were collected" >&2
exit "$rc"

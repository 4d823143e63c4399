#!/usr/bin/env bash
# Sets up ./.venv and runs the test suite. GPU tests (tests/gpu, marker "gpu") skip
# themselves where no GPU is present. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup-venv.sh
export NUMBA_CACHE_DIR=${NUMBA_CACHE_DIR:-$PWD/.cache/numba}
# The tests run in pytest-xdist workers, one per core up to 4 (PYTEST_XDIST_AUTO_NUM_WORKERS
# sets another count; "-n 0" runs them in this process). The suite is CPU-bound (its
# executor tests start Dask clusters); on a 2-core x86 machine with the compile gates'
# cache warm as in CI: 8.2 min with 2 workers, about 14.4 in one process.
cores=$(nproc 2>/dev/null || echo 1)
export PYTEST_XDIST_AUTO_NUM_WORKERS=${PYTEST_XDIST_AUTO_NUM_WORKERS:-$(( cores < 4 ? cores : 4 ))}
set +e
.venv/bin/python -m pytest -q -p no:cacheprovider -n auto "$@"
rc=$?
set -e
# pytest's 5 means "no tests ran": that is a failure of the suite, not a pass.
[ "$rc" -eq 5 ] && echo "no tests were collected" >&2
exit "$rc"

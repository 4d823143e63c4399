#!/usr/bin/env bash
# Runs the GPU test suite on the device machine (Python 3.12 image, no network) and keeps
# full logs. Here, first: ../shared/tools/device-wheels executor  (awkward, coffea, dask...)
# and add cuda-cccl (awkward's own "cuda" reducers, for comparisons):
#   python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_26_x86_64 -d .whl cuda-cccl==1.2.1
# Then: run(command="bash tests/gpu/run_on_device.sh [pytest args]", carry=[".whl"]).
# Logs land in $OUT (junit XML + the full pytest output of each file).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$PWD/.site" .whl/*.whl || exit 1
export PYTHONPATH="$PWD/.site:$PWD" PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=/tmp/numba-cache
out=${OUT:-/tmp/gpu-logs}
mkdir -p "$out"
nvidia-smi -L
python3 -m gpuexec.kernels.gpu.warm || true   # fill the kernel cache in parallel first
rc=0
for f in tests/gpu/test_gpu_*.py; do
  name=$(basename "$f" .py)
  python3 -m pytest -q -p no:cacheprovider --tb=short --junitxml="$out/$name.xml" "$f" "$@" \
    > "$out/$name.log" 2>&1
  r=$?
  echo "$name: exit $r; $(tail -n 1 "$out/$name.log")"
  [ "$r" -eq 0 ] || rc=$r
done
exit "$rc"

#!/usr/bin/env bash
# Runs the GPU test suite on the GPU host (Python 3.12 image, no network) and keeps full
# logs. On the machine that starts the run, first: ../shared/tools/device-wheels executor
# (awkward, coffea, dask...)
# and add cuda-cccl (awkward's own "cuda" reducers, for comparisons) and, to spread the
# kernel tests over cores, pytest-xdist + execnet (same download line):
#   python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
#     --implementation cp --platform manylinux_2_26_x86_64 -d .whl cuda-cccl==1.2.1
# and isal (python-isal, a dependency; --platform manylinux_2_28_x86_64): without it
# benchmarks/executor.py's workers inflate with zlib, slower than a real install (it says so);
# and cryptography (same platform) with cffi, whose _cffi_backend it needs (cffi's cp312
# wheel is tagged manylinux2014_x86_64): GPUCluster's default TLS needs both, and without
# them every embedded cluster fails to start.
# With the tree (10 MB, benchmarks/results under 5 MB of it) these wheels exceed the 64 MiB
# a run carries; the four that nothing here imports go (30 MB of wheels left):
#   rm .whl/mplhep_data-* .whl/widgetsnbextension-* .whl/jupyterlab_widgets-* .whl/jedi-*
# Then: run(command="bash tests/gpu/run_on_device.sh [pytest args]", carry=[".whl"]).
# Logs land in $OUT (the full pytest output of each file).
set -uo pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target "$PWD/.site" .whl/*.whl || exit 1
# nvCOMP (gpuexec.io.device_read inflates on the device with it): its two wheels are 34 MB,
# too much beside the rest, so a run carries .cache/devcarry/nvcomp.tar.xz instead (22 MB:
# the nvidia/nvcomp package with only its cp312 module, and lib64/libnvcomp.so.6), made here:
#   python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
#     --platform manylinux_2_28_x86_64 -d /tmp/nvw nvidia-nvcomp-cu13 nvidia-libnvcomp-cu13
#   unzip each into /tmp/nvx; keep nvidia/nvcomp/{__init__,external_memory}.py, its
#   cpython-312 module and nvidia/libnvcomp/{__init__,load}.py, lib64/libnvcomp*.so.6,
#   and both .dist-info folders (benchmarks/executor.py records nvCOMP's version);
#   tar cJf .cache/devcarry/nvcomp.tar.xz -C /tmp/nvx nvidia nvidia_nvcomp_cu13-*.dist-info \
#     nvidia_libnvcomp_cu13-*.dist-info
# and carry [".whl", ".cache/devcarry"]. Without it the device-reading tests run the host
# inflater only.
if [ -f .cache/devcarry/nvcomp.tar.xz ]; then tar xJf .cache/devcarry/nvcomp.tar.xz -C .site; fi
export PYTHONPATH="$PWD/.site:$PWD" PYTHONUNBUFFERED=1 NUMBA_CACHE_DIR=/tmp/numba-cache
out=${OUT:-/tmp/gpu-logs}
mkdir -p "$out"
nvidia-smi -L
python3 -m gpuexec.kernels.gpu.warm || true   # fill the kernel cache in parallel first
# Every tests/gpu file runs side by side (16 host cores, one GPU): the kernel tests spread
# over pytest-xdist workers when its wheel is carried; the executor tests start their own
# clusters. One log per file comes back (a device run returns at most 8 files).
workers() { python3 -c "import xdist" 2>/dev/null && echo "-n $1" || echo ""; }
declare -A procs=()
for path in tests/gpu/test_*.py; do
  name=$(basename "$path" .py)
  case "$name" in
    test_gpu_reductions) procs[$name]="$(workers 6)" ;;
    test_gpu_families|test_gpu_awkward_provider) procs[$name]="$(workers 4)" ;;
    *) procs[$name]="" ;;
  esac
done
pids=()
for name in "${!procs[@]}"; do
  python3 -m pytest -q -p no:cacheprovider --tb=short ${procs[$name]} \
    "tests/gpu/$name.py" "$@" > "$out/$name.log" 2>&1 &
  pids+=("$!:$name")
done
rc=0
for entry in "${pids[@]}"; do
  wait "${entry%%:*}"; r=$?
  name=${entry#*:}
  echo "$name: exit $r; $(tail -n 1 "$out/$name.log")"
  [ "$r" -eq 0 ] || rc=$r
done
exit "$rc"

#!/usr/bin/env bash
# Installs what .ci/compile_gates.py needs on Debian 12 (no GPU involved), and is quick
# when it is all there already:
#  - hipcc: Debian's ROCm 5.2 HIP (clang-15, rocm-device-libs), for gfx90a;
#  - clang-19, lld-19, llvm-19: ROCm 5.2's clang predates gfx942, LLVM 19 knows it;
#  - libhiprtc.so: Debian keeps hiprtc inside libamdhip64.so.5, hip-python dlopens
#    "libhiprtc.so", so $ROCM_PATH/lib/libhiprtc.so points at libamdhip64.so.5;
#  - .venv (scripts/setup-venv.sh) plus hip-python, the `gpuexec[hip]` binding, so the
#    gates can drive hiprtc in-process. It is an extra, not a core dependency.
#  - cuobjdump and the nvdisasm it runs (the sm_90 gate reads the per-wave kernels' SASS):
#    where PATH has none, PyPI's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm wheels of
#    nvcc's major version, into .venv.
# nvcc is expected on PATH already. The gates set HIP_PLATFORM=amd themselves (with nvcc
# on PATH hipcc would otherwise pick the NVIDIA platform).
set -euo pipefail
cd "$(dirname "$0")/.."
ROCM_PATH=${ROCM_PATH:-/usr}
as_root=()
[ "$(id -u)" -eq 0 ] || as_root=(sudo)

source .ci/apt_missing.sh
apt_install_missing install_hip hipcc rocm-device-libs llvm-15 clang-19 lld-19 llvm-19

if ! python3 -c 'import ctypes; ctypes.CDLL("libhiprtc.so")' 2>/dev/null; then
  hip_lib=$(ldconfig -p | awk '$1 == "libamdhip64.so.5" {print $NF; exit}')
  [ -n "$hip_lib" ] || { echo "install_hip: libamdhip64.so.5 not found" >&2; exit 1; }
  "${as_root[@]}" mkdir -p "$ROCM_PATH/lib"
  "${as_root[@]}" ln -sfn "$hip_lib" "$ROCM_PATH/lib/libhiprtc.so"
  echo "install_hip: $ROCM_PATH/lib/libhiprtc.so -> $hip_lib"
fi

bash scripts/setup-venv.sh
if ! .venv/bin/python -c 'from hip import hiprtc' 2>/dev/null; then
  # the version pyproject's `hip` extra asks for, so the gate checks what users get
  spec=$(.venv/bin/python - <<'EOF'
import re, tomllib
with open("pyproject.toml", "rb") as f:
    extra = tomllib.load(f)["project"]["optional-dependencies"]["hip"]
print(next(d for d in extra if re.match(r"hip[-_]python\b", d, re.I)))
EOF
)
  echo "install_hip: pip install $spec"
  .venv/bin/python -m pip install -q "$spec"
fi

if ! .venv/bin/python -c 'import sys; sys.path.insert(0, ".ci"); from gates import sass; sys.exit(sass.cuobjdump() is None)'; then
  major=$(nvcc --version | sed -n 's/.*release \([0-9]*\)\..*/\1/p')
  echo "install_hip: pip install nvidia-cuda-cuobjdump==${major}.* nvidia-cuda-nvdisasm==${major}.*"
  .venv/bin/python -m pip install -q "nvidia-cuda-cuobjdump==${major}.*" "nvidia-cuda-nvdisasm==${major}.*"
fi

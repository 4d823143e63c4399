"""Compile gates for the portable GPU kernel sources (no GPU needed).

Every compile unit that ``gpuexec.kernels.gpu.units.compile_units(arch)`` lists is
compiled for gfx90a (Debian's hipcc), gfx942 (Debian's clang-19) and sm_90 (nvcc), and
through hip-python's hiprtc; the resulting code objects are checked for what the
strategy table promises and a per-kernel ISA table is written. Entry point:
``.ci/compile_gates.py``.
"""

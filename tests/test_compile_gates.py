"""The GPU compile gates (.ci/compile_gates.py): their parsers and occupancy arithmetic
everywhere, and, where hipcc/clang-19/nvcc are installed (CI: .ci/install_hip.sh), the
project's kernels passing the gates and deliberately bad kernels failing them."""

import os
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GATE = os.path.join(REPO, ".ci", "compile_gates.py")
sys.path.insert(0, os.path.join(REPO, ".ci"))

from gates import amdgpu, nvidia, occupancy  # noqa: E402

needs_hipcc = pytest.mark.skipif(
    amdgpu.TOOLCHAINS["gfx90a"].missing() is not None, reason="hipcc not installed "
    "(.ci/install_hip.sh installs it)")
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH")

NOTES = """\
Displaying notes found in: .note
  Owner                Data size 	Description
  AMDGPU               0x000006c5	NT_AMDGPU_METADATA (AMDGPU Metadata)
    AMDGPU Metadata:
        ---
amdhsa.kernels:
  - .agpr_count:     0
    .args:
      - .address_space:  global
        .offset:         0
        .size:           8
        .value_kind:     global_buffer
    .group_segment_fixed_size: 2048
    .max_flat_workgroup_size: 256
    .name:           k_one
    .private_segment_fixed_size: 0
    .sgpr_count:     10
    .sgpr_spill_count: 0
    .uses_dynamic_stack: false
    .vgpr_count:     12
    .vgpr_spill_count: 0
    .wavefront_size: 64
  - .agpr_count:     4
    .name:           k_two
    .private_segment_fixed_size: 16
    .vgpr_count:     130
    .vgpr_spill_count: 3
    .wavefront_size: 32
amdhsa.target:   amdgcn-amd-amdhsa--gfx90a
"""

PTXAS = """\
ptxas info    : Compiling entry function 'k_one' for 'sm_90'
ptxas info    : Function properties for k_one
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 30 registers, used 1 barriers, 2048 bytes smem
ptxas info    : Compiling entry function 'k_two' for 'sm_90'
ptxas info    : Function properties for k_two
    64 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers
"""


def test_metadata_parser_reads_kernel_scalars_not_args():
    meta = amdgpu.parse_metadata(NOTES)
    assert set(meta) == {"k_one", "k_two"}
    assert meta["k_one"]["vgpr_count"] == 12 and meta["k_one"]["sgpr_count"] == 10
    assert meta["k_one"]["group_segment_fixed_size"] == 2048
    assert meta["k_one"]["uses_dynamic_stack"] is False
    assert "offset" not in meta["k_one"]          # .args entries are not kernel fields
    assert meta["k_two"]["agpr_count"] == 4


def test_amd_checks_flag_each_violation():
    meta = amdgpu.parse_metadata(NOTES)
    assert amdgpu.check_kernel("k_one", meta["k_one"], "\tglobal_load_dwordx4 v[0:3], v[0:1], off",
                               frozenset({"vector_load_128"})) == []
    asm = "\tbuffer_store_dword v1, off, s[0:3], 0 offset:4\n\ts_swappc_b64 s[30:31], s[0:1]"
    bad = " ".join(amdgpu.check_kernel("k_two", meta["k_two"], asm,
                                       frozenset({"vector_load_128"})))
    for what in ("wavefront size 32", "scratch 16 bytes", "3 VGPR spills",
                 "scratch access in ISA: buffer_store_dword", "no global_load_dwordx4",
                 "out-of-line device function"):
        assert what in bad


def test_ptxas_parser_and_checks():
    res = nvidia.parse_ptxas(PTXAS)
    assert res["k_one"] == {"registers": 30, "smem": 2048, "stack_frame": 0,
                            "spill_stores": 0, "spill_loads": 0}
    assert nvidia.check_kernel("k_one", res["k_one"], "ld.global.nc.v2.f64 {%fd1, %fd2}, [%rd4];",
                               frozenset({"vector_load_128"})) == []
    bad = " ".join(nvidia.check_kernel("k_two", res["k_two"], "ld.global.f64 %fd1, [%rd4];",
                                       frozenset({"vector_load_128"})))
    assert "64 bytes stack frame" in bad and "8 bytes spill stores" in bad
    assert "no 128-bit" in bad


def test_occupancy_arithmetic():
    assert occupancy.cdna_waves_per_simd(12, 10) == (8, "max")
    assert occupancy.cdna_waves_per_simd(128, 20) == (4, "VGPR")
    assert occupancy.cdna_waves_per_simd(65, 20) == (7, "VGPR")        # 65 -> 72 VGPRs
    assert occupancy.cdna_waves_per_simd(512, 20) == (1, "VGPR")
    assert occupancy.cdna_waves_per_simd(24, 102) == (7, "SGPR")       # 102 -> 112 SGPRs
    assert occupancy.sm90_warps_per_sm(32) == (64, "max")
    assert occupancy.sm90_warps_per_sm(64) == (32, "registers")
    assert occupancy.sm90_warps_per_sm(72) == (28, "registers")       # 2304 regs/warp
    assert occupancy.sm90_warps_per_sm(255) == (8, "registers")


def run_gate(*args):
    p = subprocess.run([sys.executable, GATE, "--no-table", *args], capture_output=True,
                       text=True, cwd=REPO, timeout=600)
    return p.returncode, p.stdout + p.stderr


@needs_hipcc
@needs_nvcc
def test_project_kernels_pass_the_gates():
    rc, out = run_gate()
    assert rc == 0, "\n".join(ln for ln in out.splitlines() if not ln.startswith("ok "))[-6000:]
    assert "compile gates OK" in out


BAD_SOURCE = r"""
#include <hip/hip_runtime.h>
// dynamically indexed private array: lives in scratch (AMD) / the stack frame (NVIDIA)
extern "C" __global__ void __launch_bounds__(256) gk_bad_scratch(
    const int* __restrict__ idx, double* __restrict__ out, int n) {
  double tmp[96];
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  for (int i = 0; i < 96; ++i) tmp[i] = out[(t + i) % n];
  out[t % n] = tmp[idx[t] % 96] + tmp[idx[t + 1] % 96];
}
// promises 128-bit loads but reads one double at a time
extern "C" __global__ void __launch_bounds__(256) gk_bad_scalar_loads(
    const double* __restrict__ x, double* __restrict__ y, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) y[t] = 2.0 * x[t];
}
"""

# the head of a strategies file (--strategies): the compile unit fields that load_units reads
UNIT_CLASS = """\
from dataclasses import dataclass, field

@dataclass
class CompileUnit:
    source: str
    defines: dict = field(default_factory=dict)
    kernels: list = field(default_factory=list)
    promises: dict = field(default_factory=dict)
"""

BAD_STRATEGIES = UNIT_CLASS + """

def compile_units(arch):
    return [CompileUnit("bad.cu", {}, ["gk_bad_scratch", "gk_bad_scalar_loads", "gk_absent"],
                        {"gk_bad_scalar_loads": {"vector_load_128"}})]
"""


@needs_hipcc
@needs_nvcc
def test_gates_fail_on_scratch_missing_vector_loads_and_missing_kernels(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "bad.cu").write_text(
        BAD_SOURCE.replace("#include <hip/hip_runtime.h>",
                           "#if defined(__HIPCC__)\n#include <hip/hip_runtime.h>\n#endif"))
    (tmp_path / "strategies.py").write_text(textwrap.dedent(BAD_STRATEGIES))
    rc, out = run_gate("--strategies", str(tmp_path / "strategies.py"),
                       "--stages", "gfx90a,sm_90")
    assert rc == 1, out
    assert "compile gates FAILED" in out
    for arch in ("gfx90a", "sm_90"):
        fails = [ln for ln in out.split("FAIL ")[1:] if ln.startswith(arch)]
        assert fails, out
        text = "".join(fails)
        assert "kernel gk_absent listed but not in the code object" in text
        assert "gk_bad_scalar_loads: promises vector_load_128" in text
    amd, nv = out.split("---- gfx90a")
    assert re.search(r"gk_bad_scratch: scratch \d+ bytes != 0", amd), out
    assert re.search(r"gk_bad_scratch: \d+ bytes stack frame", nv), out


ORDERED_SOURCE = r"""
extern "C" __global__ void __launch_bounds__(128) gk_copy_pairs(
    const double2* __restrict__ x, double2* __restrict__ y, int n) {
  int t = blockIdx.x * blockDim.x + threadIdx.x;
  if (t < n) y[t] = x[t];
}
"""

# two units of one kernel (UNIT only tells them apart), each promising a load order
ORDERED_STRATEGIES = UNIT_CLASS + """

def compile_units(arch):
    return [CompileUnit("ordered.cu", {"UNIT": u}, ["gk_copy_pairs"],
                        {"gk_copy_pairs": {"tile_loads_first"}}) for u in (1, 2)]
"""


@needs_nvcc
def test_sm90_gate_without_cuobjdump_says_so_once_and_checks_the_rest(tmp_path, monkeypatch,
                                                                       capsys):
    """Two units promise a load order and no cuobjdump is found: the SASS check is named
    not run (once), the rest of the sm_90 gate still runs (this crashed on the second
    unit on a machine without the cuobjdump wheel)."""
    import compile_gates
    from gates import sass

    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "ordered.cu").write_text(ORDERED_SOURCE)
    (tmp_path / "strategies.py").write_text(ORDERED_STRATEGIES)
    monkeypatch.setattr(sass, "cuobjdump", lambda: None)
    rep = compile_gates.Report()
    compile_gates.gate_nvidia(rep, str(tmp_path), str(tmp_path / "strategies.py"))
    assert not rep.failures and rep.checked == 2
    assert list(rep.not_run) == ["sm_90 SASS"] and "cuobjdump" in rep.not_run["sm_90 SASS"]
    assert capsys.readouterr().out.count("sm_90 SASS: not compiled") == 1

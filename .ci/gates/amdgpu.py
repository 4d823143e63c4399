"""AMD gates: compile each unit to a gfx9 code object and check its metadata and ISA.

gfx90a goes through Debian's hipcc (ROCm 5.2, clang-15). ROCm 5.2's clang predates
gfx942, so gfx942 goes through Debian's clang-19 with the same ROCm 5.2 HIP headers and
device-library bitcode, linked explicitly (-nogpulib): every file clang would link
except oclc_isa_version_942.bc, which ROCm 5.2 does not ship. Code that needed it
(ISA-dependent ocml paths) fails to link with an undefined __oclc_ISA_version, so the
gate can never pass on a made-up library.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass

from . import cache
from .units import Unit

ROCM_PATH = os.environ.get("ROCM_PATH", "/usr")
HIPCC_LLVM = "/usr/lib/llvm-15/bin"     # the LLVM Debian's hipcc 5.2 is built on
CLANG19_LLVM = "/usr/lib/llvm-19/bin"
BITCODE_DIRS = (os.path.join(ROCM_PATH, "amdgcn", "bitcode"),
                "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode")
# What clang links for HIP on ROCm 5.2 (hip.bc still holds __atomic_work_item_fence
# there), with the default math flags of -O3 and code object v5 (clang-19's default).
GFX942_BITCODE = ("hip", "ocml", "ockl", "oclc_abi_version_500", "oclc_daz_opt_off",
                  "oclc_unsafe_math_off", "oclc_finite_only_off",
                  "oclc_correctly_rounded_sqrt_on", "oclc_wavefrontsize64_on")

# Instructions that only appear when a kernel touches its private (scratch) segment.
SCRATCH_INSN = re.compile(r"^\s*(scratch_\w+|buffer_(store|load)_\w+)\b", re.M)
VECTOR_LOAD_128 = re.compile(r"^\s*global_load_dwordx4\b", re.M)
# An out-of-line call: its callee-saved VGPRs and frame live in scratch.
CALL_INSN = re.compile(r"^\s*s_swappc_b64\b", re.M)


@dataclass(frozen=True)
class AmdToolchain:
    arch: str
    compiler: str       # path or name
    llvm_bin: str       # llvm-readelf / llvm-objdump that know this arch

    def missing(self) -> str | None:
        """Why this toolchain cannot run here, or None."""
        if shutil.which(self.compiler) is None:
            return f"{self.compiler} not found (run .ci/install_hip.sh)"
        for tool in ("llvm-readelf", "llvm-objdump"):
            if not os.access(os.path.join(self.llvm_bin, tool), os.X_OK):
                return f"{self.llvm_bin}/{tool} not found (run .ci/install_hip.sh)"
        if self.arch == "gfx942":
            bc = bitcode_dir()
            if bc is None:
                return "ROCm device-library bitcode not found (rocm-device-libs)"
            absent = [f for f in GFX942_BITCODE if not os.path.exists(f"{bc}/{f}.bc")]
            if absent:
                return f"device libraries {absent} not in {bc}"
        return None

    @functools.lru_cache(maxsize=None)
    def version(self) -> str:
        out = subprocess.run([self.compiler, "--version"], capture_output=True, text=True,
                             env=compile_env()).stdout.splitlines()
        # hipcc prints "HIP version: ..." before its clang's own banner
        return ", ".join(out[:2] if out and out[0].startswith("HIP") else out[:1])

    def command(self, unit: Unit, out: str) -> list[str]:
        # -std: hipcc would add c++11; every compiler here gets nvcc 13's default, C++17
        common = ["-x", "hip", "-std=c++17", f"--offload-arch={self.arch}",
                  "--cuda-device-only", "--no-gpu-bundle-output", "-O3", "-Wall",
                  "-I", unit.src_dir, *unit.define_flags(), "-c", unit.path, "-o", out]
        if self.arch == "gfx90a":
            return [self.compiler, *common]
        bc = bitcode_dir()
        links = [a for f in GFX942_BITCODE
                 for a in ("-Xclang", "-mlink-builtin-bitcode", "-Xclang", f"{bc}/{f}.bc")]
        return [self.compiler, f"--rocm-path={ROCM_PATH}", "-nogpulib", *links, *common]


TOOLCHAINS = {
    "gfx90a": AmdToolchain("gfx90a", "hipcc", HIPCC_LLVM),
    "gfx942": AmdToolchain("gfx942", f"{CLANG19_LLVM}/clang", CLANG19_LLVM),
}


def bitcode_dir() -> str | None:
    return next((d for d in BITCODE_DIRS if os.path.exists(f"{d}/ockl.bc")), None)


def compile_env() -> dict:
    # nvcc is on PATH, so hipcc would otherwise pick the NVIDIA platform.
    return {**os.environ, "HIP_PLATFORM": "amd", "ROCM_PATH": ROCM_PATH}


def compile_unit(tc: AmdToolchain, unit: Unit, out: str) -> tuple[bool, str]:
    """Compile one unit; (ok, compiler output). Warnings in our own sources fail."""
    cmd = tc.command(unit, out)
    k = cache.key(tc.version(), [a for a in cmd if a != out], unit)
    log = cache.get(k, {"code.o": out})
    if log is not None:
        return True, log
    p = subprocess.run(cmd, capture_output=True, text=True, env=compile_env())
    log = (p.stdout + p.stderr).strip()
    ok = p.returncode == 0 and not own_warnings(log, unit.src_dir)
    if ok:
        cache.put(k, {"code.o": out}, log)
    return ok, log


def hint(log: str) -> str:
    if "__oclc_ISA_version" not in log:
        return ""
    return ("\n    hint: ROCm 5.2 ships no oclc_isa_version_942.bc; this unit calls an "
            "ISA-dependent device-library function (e.g. __syncthreads_count -> "
            "__ockl_wgred_add_i32). Give portability.cuh its own version of it "
            "(ballot + popcount per wave, LDS sum) rather than a made-up library.")


def own_warnings(log: str, src_dir: str) -> list[str]:
    return [ln for ln in log.splitlines()
            if "warning:" in ln and os.path.abspath(ln.split(":", 1)[0]).startswith(src_dir)]


def kernel_metadata(llvm_bin: str, code_object: str) -> dict[str, dict]:
    """Kernel name -> scalar fields of its entry in the AMDGPU metadata note."""
    notes = subprocess.run([f"{llvm_bin}/llvm-readelf", "--notes", code_object],
                           capture_output=True, text=True, check=True).stdout
    return parse_metadata(notes)


def parse_metadata(notes: str) -> dict[str, dict]:
    """Read the kernel-level scalars (".vgpr_count: 12") of amdhsa.kernels.

    LLVM prints the msgpack note as block YAML: each kernel starts with "  - .key:" and
    its own scalars sit at four spaces; deeper lines (.args) are skipped."""
    kernels, cur, inside = [], None, False
    for line in notes.splitlines():
        if line.startswith("amdhsa.kernels:"):
            inside = True
            continue
        if inside and line and not line.startswith(" "):
            inside = False          # next top-level key (amdhsa.target, ...)
        if not inside:
            continue
        m = re.match(r"^  (- |  )\.([\w.]+):\s*(\S.*)?$", line)
        if not m:
            continue
        if m.group(1) == "- ":
            cur = {}
            kernels.append(cur)
        if cur is not None and m.group(3) is not None:
            cur[m.group(2)] = _scalar(m.group(3).strip())
    return {k["name"]: k for k in kernels if "name" in k}


def _scalar(text: str):
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return {"true": True, "false": False}.get(text, text)


def kernel_disassembly(llvm_bin: str, code_object: str) -> dict[str, str]:
    """Kernel name -> its disassembled text (llvm-objdump -d, one block per symbol)."""
    text = subprocess.run([f"{llvm_bin}/llvm-objdump", "-d", code_object],
                          capture_output=True, text=True, check=True).stdout
    blocks, name = {}, None
    for line in text.splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:$", line)
        if m:
            name = m.group(1)
            blocks[name] = []
        elif name is not None:
            blocks[name].append(line)
    return {k: "\n".join(v) for k, v in blocks.items()}


def check_kernel(name: str, meta: dict, asm: str, promises: frozenset) -> list[str]:
    """What is wrong with one compiled kernel (empty list = passes)."""
    bad = []
    if meta.get("wavefront_size") != 64:
        bad.append(f"wavefront size {meta.get('wavefront_size')} != 64")
    if meta.get("private_segment_fixed_size", 0) != 0:
        bad.append(f"scratch {meta['private_segment_fixed_size']} bytes != 0")
    if meta.get("uses_dynamic_stack"):
        bad.append("uses a dynamic stack")
    for kind in ("vgpr", "sgpr"):
        if meta.get(f"{kind}_spill_count", 0) != 0:
            bad.append(f"{meta[f'{kind}_spill_count']} {kind.upper()} spills")
    m = SCRATCH_INSN.search(asm)
    if m:
        bad.append(f"scratch access in ISA: {m.group(1)}")
    if CALL_INSN.search(asm):
        bad.append("calls an out-of-line device function (s_swappc_b64): force-inline it")
    if "vector_load_128" in promises and not VECTOR_LOAD_128.search(asm):
        bad.append("promises vector_load_128 but has no global_load_dwordx4")
    return bad


CHECKED_PROMISES = {"vector_load_128", "wave64"}   # wave64: every AMD kernel is checked

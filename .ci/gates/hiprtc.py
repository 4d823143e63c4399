"""hiprtc gate: compile each unit in-process through hip-python, as the HIP runtime will.

hip-python dlopens "libhiprtc.so"; Debian's ROCm 5.2 keeps hiprtc inside
libamdhip64.so.5, so .ci/install_hip.sh links $ROCM_PATH/lib/libhiprtc.so to it. The
program's includes resolve through -I like the offline compile, and the code object it
returns must hold every listed kernel, built for 64-lane wavefronts.
"""

from __future__ import annotations

from . import cache
from .units import Unit


def load():
    """(hiprtc module, None) or (None, why it cannot run here)."""
    try:
        from hip import hiprtc
    except ImportError as e:
        return None, f"hip-python is not installed in this interpreter ({e})"
    try:
        err, major, minor = hiprtc.hiprtcVersion()
    except Exception as e:  # hip-python raises RuntimeError when the dlopen fails
        return None, f"hip-python cannot load libhiprtc.so: {e}"
    if int(err) != 0:
        return None, f"hiprtcVersion failed: {err}"
    return hiprtc, None


def version(hiprtc) -> str:
    from importlib.metadata import version as dist_version
    _, major, minor = hiprtc.hiprtcVersion()
    return f"hip-python {dist_version('hip-python')}, hiprtc {major}.{minor} (ROCm's libamdhip64)"


def compile_unit(hiprtc, unit: Unit, arch: str, out: str) -> tuple[bool, str]:
    """(ok, log); the code object hiprtc built for arch goes to out."""
    opts = [f"--offload-arch={arch}", "-O3", "-std=c++17", f"-I{unit.src_dir}",
            *unit.define_flags()]
    k = cache.key(version(hiprtc), ["hiprtc", unit.source, *opts], unit)
    log = cache.get(k, {"code.o": out})
    if log is not None:
        return True, log
    ok, log, code = _compile(hiprtc, unit, [o.encode() for o in opts])
    if ok:
        with open(out, "wb") as f:
            f.write(code)
        cache.put(k, {"code.o": out}, log)
    return ok, log


_worker_hiprtc = None


def compile_in_worker(unit: Unit, arch: str, out: str) -> tuple[bool, str]:
    """compile_unit in a pool worker process (loads hip-python once per process)."""
    global _worker_hiprtc
    if _worker_hiprtc is None:
        _worker_hiprtc, why = load()
        if why:
            return False, why
    return compile_unit(_worker_hiprtc, unit, arch, out)


def _compile(hiprtc, unit: Unit, opts: list[bytes]) -> tuple[bool, str, bytes]:
    with open(unit.path, "rb") as f:
        source = f.read()
    err, prog = hiprtc.hiprtcCreateProgram(source, unit.source.encode(), 0, [], [])
    if int(err) != 0:
        return False, f"hiprtcCreateProgram: {err}", b""
    try:
        (err,) = hiprtc.hiprtcCompileProgram(prog, len(opts), opts)
        log = _log(hiprtc, prog)
        if int(err) != 0:
            return False, f"hiprtcCompileProgram: {err}\n{log}", b""
        err, size = hiprtc.hiprtcGetCodeSize(prog)
        code = bytearray(size)
        (err,) = hiprtc.hiprtcGetCode(prog, code)
        if int(err) != 0 or size == 0:
            return False, f"hiprtcGetCode: {err}, {size} bytes", b""
        return True, log, bytes(code)
    finally:
        hiprtc.hiprtcDestroyProgram(prog.createRef())  # takes hiprtcProgram*


def _log(hiprtc, prog) -> str:
    err, n = hiprtc.hiprtcGetProgramLogSize(prog)
    if int(err) != 0 or n <= 1:
        return ""
    buf = bytearray(n)
    hiprtc.hiprtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\0").decode(errors="replace").strip()


def check_kernel(name: str, meta: dict | None) -> list[str]:
    if meta is None:
        return ["not in the hiprtc code object"]
    if meta.get("wavefront_size") != 64:
        return [f"hiprtc built it for wavefront size {meta.get('wavefront_size')}"]
    return []

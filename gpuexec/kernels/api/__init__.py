"""The awkward-shaped public functions of the kernel engine. Each takes the same
arguments and defaults as its awkward namesake plus ``backend=None`` and ``to=None``,
and returns what awkward returns for the same call."""

from gpuexec.kernels.api.reductions import sum  # noqa: F401

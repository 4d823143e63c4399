"""The awkward-shaped public functions of the kernel engine. Each takes the same
arguments and defaults as its awkward namesake plus ``backend=None`` and ``to=None``,
and returns what awkward returns for the same call."""

from gpuexec.kernels.api.reductions import all, any, argmax, argmin, count, count_nonzero, max, min, prod, sum  # noqa: F401,A004,E501
from gpuexec.kernels.api.indexing import filter, take, to_packed  # noqa: F401
from gpuexec.kernels.api.options import fill_none  # noqa: F401
from gpuexec.kernels.api.choice import where  # noqa: F401
from gpuexec.kernels.api.elementwise import elementwise  # noqa: F401
from gpuexec.kernels.api.structure import argcartesian, argcombinations, argsort, cartesian, combinations, flatten, local_index, num, sort  # noqa: F401,E501

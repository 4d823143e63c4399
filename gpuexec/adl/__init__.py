"""The IRIS-HEP ADL benchmark queries (Q1-Q8) as coffea processors on gpuexec's kernel
engine, the column map that lets them read CMS open-data-style and real NanoAOD files,
and plain-Python references to check them against (``gpuexec.adl.reference``). They ship
in the package, so that ``gpuexec run --query N`` works from an installed wheel."""

from gpuexec.adl.queries import QUERIES, ADLQuery, make  # noqa: F401

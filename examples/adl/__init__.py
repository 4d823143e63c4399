"""The IRIS-HEP ADL benchmark queries, which ship in the package as ``gpuexec.adl``; this
name re-exports them (``examples.adl.queries`` is ``gpuexec.adl.queries``, and so on)."""

import sys

from gpuexec.adl import QUERIES, ADLQuery, columns, kinematics, make, queries, reference  # noqa: F401

for _name in ("columns", "kinematics", "queries", "reference"):
    sys.modules[f"{__name__}.{_name}"] = sys.modules[f"gpuexec.adl.{_name}"]

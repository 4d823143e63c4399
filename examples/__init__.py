"""Example analyses that run on gpuexec (importable as ``examples.adl``)."""

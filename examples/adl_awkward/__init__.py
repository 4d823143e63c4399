"""The IRIS-HEP ADL benchmark queries (Q1-Q8) in plain awkward and coffea's vector
behaviours, unchanged processors that reach gpuexec's kernel engine only through the
awkward kernel provider (``gpuexec.awkward``)."""

from examples.adl_awkward.queries import QUERIES, PlainQuery, make  # noqa: F401

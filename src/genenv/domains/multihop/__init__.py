"""Multi-hop question answering in Bamboogle's format, one folder: the co-evolution domain (``domain``), Bamboogle's
reader and scorers (``bamboogle``), BM25 retrieval (``retrieval``) and ``genenv eval --benchmark bamboogle``
(``benchmark``)."""

from genenv.domains.multihop.domain import MultiHopDomain

BENCHMARKS = {"bamboogle": "genenv.domains.multihop.benchmark_eval"}   # genenv eval --benchmark NAME: its module

__all__ = ["BENCHMARKS", "MultiHopDomain"]

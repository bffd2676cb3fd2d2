"""TravelPlanner (Xie et al., 2024), one folder: the co-evolution domain (``domain``), the sandbox tables
(``sandbox``), the constraint evaluator with its pass rates (``constraints``), the grounding solver (``solver``), the
query readers (``queries``) and ``genenv eval --benchmark travelplanner`` (``benchmark``), written from our SPEC.md of
the benchmark. The data stays where the user keeps it (``--data``: the folder holding ``database/``)."""

from genenv.domains.travel.domain import TravelDomain

BENCHMARKS = {"travelplanner": "genenv.domains.travel.benchmark_eval"}   # genenv eval --benchmark NAME: its module

__all__ = ["BENCHMARKS", "TravelDomain"]

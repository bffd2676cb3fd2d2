"""The ALFWorld-style household, one folder: the co-evolution domain (``domain``), its text engine and planner
(``engine``), the export to and play in ALFWorld's own engine (``alfworld``) and ``genenv eval --benchmark alfworld``
(``benchmark``)."""

from genenv.domains.household.domain import HouseholdDomain

BENCHMARKS = {"alfworld": "genenv.domains.household.benchmark_eval"}   # genenv eval --benchmark NAME: its module

__all__ = ["BENCHMARKS", "HouseholdDomain"]

"""API-Bank (Li et al., 2023), one folder: the co-evolution domain (``domain``), the benchmark's call syntax
(``calls``), its simulated APIs (``tools``), the scoring of API items (``scoring``), the data reader and level 1-2
evaluation (``evaluator``), level 3 (``level3``) and ``genenv eval --benchmark api-bank`` (``benchmark``), written
from our SPEC.md of the benchmark. The data stays where the user keeps it (``--data``: a folder with
``init_database/``, ``lv1-lv2-samples/`` and ``test-data/``)."""

from genenv.domains.apibank.domain import ApiBankDomain

BENCHMARKS = {"api-bank": "genenv.domains.apibank.benchmark_eval"}   # genenv eval --benchmark NAME: its module

__all__ = ["BENCHMARKS", "ApiBankDomain"]

"""BFCL-format tool calling, one folder: the co-evolution domain (``domain``), BFCL's data, prompts and AST checker
through its own code (``bfcl``), the multi-turn categories (``bfcl_multiturn``) and ``genenv eval --benchmark bfcl``
(``benchmark``)."""

from genenv.domains.toolcall.domain import ToolCallDomain

BENCHMARKS = {"bfcl": "genenv.domains.toolcall.benchmark_eval"}   # genenv eval --benchmark NAME: its module

__all__ = ["BENCHMARKS", "ToolCallDomain"]

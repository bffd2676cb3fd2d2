"""BFCL (Berkeley Function-Calling Leaderboard) through its own code: data, prompt, decoder and AST checker.

Everything that decides a score comes from the ``bfcl-eval==2026.3.23`` package (Apache-2.0), installed with
``--no-deps`` (its dependency list pins numpy 1.26 and about 80 API clients): the question and possible-answer
files, the system prompt built by BFCL's prompt functions, BFCL's decoder for prompting models and BFCL's AST
checker. The checker imports a model registry that pulls every API client; a small stub module registered
before import stands in for it (the checker only asks it whether a model renames dotted function names,
which ours do not). Scoring mirrors BFCL's ``_evaluate_single_ast_entry``: decode, check the format, check
the AST; any failure scores 0. Responses are saved in BFCL's result-file format so BFCL can rescore them.
"""

from __future__ import annotations

import ast
import copy
import importlib.util
import json
import sys
import types
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from genenv.io import atomic_write_jsonl

VERSION_PREFIX = "BFCL_v4"
MODEL_NAME = "genenv"          # the name our results carry in BFCL's files
AST_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple", "live_simple", "live_multiple",
                  "live_parallel", "live_parallel_multiple")
TRAIN_CATEGORIES = ("live_simple", "live_multiple")          # seed tasks for the toolcall domain
EVAL_CATEGORIES = ("simple_python", "multiple", "parallel", "parallel_multiple")  # disjoint from training


class BFCLNotInstalled(RuntimeError):
    pass


def available() -> bool:
    return importlib.util.find_spec("bfcl_eval") is not None


def _stub_model_registry() -> None:
    """BFCL's checker imports MODEL_CONFIG_MAPPING, whose module imports every API client. Stand in for it."""
    name = "bfcl_eval.constants.model_config"
    if name in sys.modules:
        return

    @dataclass
    class _Config:
        underscore_to_dot: bool = False

    class _Mapping(dict):
        def __missing__(self, key):  # any model name we score under: function names kept as they are
            return _Config()

    stub = types.ModuleType(name)
    stub.MODEL_CONFIG_MAPPING = _Mapping()
    stub.ModelConfig = _Config
    sys.modules[name] = stub


@lru_cache(maxsize=1)
def bfcl():
    """BFCL's modules (imported once, with the registry stub)."""
    if not available():
        raise BFCLNotInstalled("BFCL is not installed: `pip install --no-deps bfcl-eval==2026.3.23` "
                               "(`make install` does this)")
    _stub_model_registry()
    from bfcl_eval import utils as bfcl_utils  # noqa: PLC0415 (optional dependency, imported when used)
    from bfcl_eval.constants.enums import Language, ReturnFormat  # noqa: PLC0415 (optional dependency, imported when used)
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # noqa: PLC0415 (optional dependency, imported when used)
    from bfcl_eval.model_handler import utils as handler_utils  # noqa: PLC0415 (optional dependency, imported when used)
    return types.SimpleNamespace(Language=Language, ReturnFormat=ReturnFormat, ast_checker=ast_checker,
                                 system_prompt=handler_utils.system_prompt_pre_processing_chat_model,
                                 decode=handler_utils.default_decode_ast_prompting,
                                 is_call_format=bfcl_utils.is_function_calling_format_output)


def data_dir() -> Path:
    spec = importlib.util.find_spec("bfcl_eval")
    if spec is None or not spec.submodule_search_locations:
        raise BFCLNotInstalled("BFCL is not installed")
    return Path(list(spec.submodule_search_locations)[0]) / "data"


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def load_category(category: str, limit: int | None = None) -> list[dict]:
    """Entries of one AST category, each with its ``ground_truth`` from BFCL's possible-answer file."""
    if category not in AST_CATEGORIES:
        raise ValueError(f"--categories: {category!r} is not a BFCL AST category; choose from "
                         f"{', '.join(AST_CATEGORIES)}")
    questions = _read_jsonl(data_dir() / f"{VERSION_PREFIX}_{category}.json")
    answers = {a["id"]: a["ground_truth"] for a in
               _read_jsonl(data_dir() / "possible_answer" / f"{VERSION_PREFIX}_{category}.json")}
    entries = [{**q, "ground_truth": answers[q["id"]], "category": category} for q in questions]
    return entries[:limit] if limit else entries


def chat_messages(entry: dict) -> list[dict]:
    """The first turn's messages with BFCL's system prompt, exactly as BFCL prompts a chat model."""
    first_turn = copy.deepcopy(entry["question"][0])
    return bfcl().system_prompt(first_turn, entry["function"], entry["id"])


# arithmetic BFCL's decoder may evaluate: numbers joined by these operators only (no powers, no shifts)
_SAFE_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)


def _pure_arithmetic(node) -> bool:
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float)
    if isinstance(node, ast.UnaryOp):
        return isinstance(node.op, (ast.USub, ast.UAdd)) and _pure_arithmetic(node.operand)
    if isinstance(node, ast.BinOp):
        return isinstance(node.op, _SAFE_BINOPS) and _pure_arithmetic(node.left) and _pure_arithmetic(node.right)
    return False


def unsafe_for_bfcl_decoder(response: str) -> str | None:
    """Why BFCL's decoder must not see ``response``, or None when it may.

    BFCL's decoder hands two kinds of argument to Python's ``eval``: arithmetic (``BinOp``) and lambdas.
    Model output is untrusted text, so a response reaches the decoder only when every such node is plain
    arithmetic on number literals without powers or shifts (``x=2*3`` decodes to 6 as in BFCL;
    ``x=__import__('os').system(...) + 1`` or ``x=9**9**9`` fail to decode instead of running). The text is
    cleaned as BFCL cleans it and parsed with ``ast`` (parsing runs nothing).
    """
    body = response.strip("`\n ")
    body = ("" if body.startswith("[") else "[") + body + ("" if body.endswith("]") else "]")
    try:
        tree = ast.parse(body.strip().strip("'"), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # BFCL's own parse fails the same way: nothing is evaluated
    try:
        for node in ast.walk(tree):
            if isinstance(node, ast.Lambda):
                return "lambda in an argument"
            if isinstance(node, ast.BinOp) and not _pure_arithmetic(node):
                return f"expression {ast.unparse(node)[:60]!r} is not plain arithmetic on numbers"
    except RecursionError:
        return "expression nested too deeply"
    return None


def decode(response: str):
    """BFCL's decoder for prompting models: a list of {function: {arg: value}} or None when it fails.

    Responses whose arguments BFCL would ``eval`` beyond plain arithmetic fail to decode
    (:func:`unsafe_for_bfcl_decoder`).
    """
    lib = bfcl()
    if unsafe_for_bfcl_decoder(response):
        return None
    try:
        decoded = lib.decode(response, lib.ReturnFormat.PYTHON, False)
    except Exception:  # BFCL's decoder raises on anything that is not a Python list of calls
        return None
    return decoded if lib.is_call_format(decoded) else None


def check(entry: dict, response: str) -> dict:
    """Score one response as BFCL does: {"valid": bool, "error_type": ...}."""
    decoded = decode(response)
    if decoded is None:
        return {"valid": False, "error_type": "ast_decoder:decoder_failed_or_wrong_format"}
    lib = bfcl()
    try:
        result = lib.ast_checker(entry["function"], decoded, entry["ground_truth"], lib.Language.PYTHON,
                                 entry["category"], MODEL_NAME)
    except Exception as err:  # a malformed call the checker cannot even inspect
        return {"valid": False, "error_type": f"ast_checker:exception:{type(err).__name__}"}
    return {"valid": bool(result["valid"]), "error_type": result.get("error_type")}


def write_result_file(out_dir: Path, category: str, rows: list[dict]) -> Path:
    """BFCL's result format: one JSON object per line with ``id`` and the raw ``result`` text."""
    path = Path(out_dir) / MODEL_NAME / f"{VERSION_PREFIX}_{category}_result.json"
    atomic_write_jsonl(path, [{"id": r["id"], "result": r["result"]} for r in rows])
    return path

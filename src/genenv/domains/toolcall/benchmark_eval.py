"""``genenv eval --benchmark bfcl --categories simple_python,parallel,parallel_multiple --model smollm2 --limit 50``:
the model prompted as BFCL prompts a chat model (BFCL's system prompt, greedy decoding), every response scored with
BFCL's decoder and AST checker, accuracy per category and overall, the raw responses in BFCL's result-file format
(``OUT/genenv/BFCL_v4_<category>_result.json``) plus ``OUT/scores.json``. ``--categories multi_turn_long_context``
(or ``multi_turn_base``) follows the paper's protocol: every turn scored on its own against the ground truth, with
BFCL's executable back-ends and checkers (:mod:`genenv.domains.toolcall.bfcl_multiturn`); accuracy there is per turn.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from genenv.domains.toolcall import bfcl, bfcl_multiturn
from genenv.eval_driver import greedy_responses, greedy_with_progress, load_eval_policy
from genenv.io import atomic_write_json
from genenv.progress import progress_bar


def _ast_category(policy, category: str, entries: list[dict], out: Path, max_new_tokens: int,
                  batch_size: int) -> dict:

    responses = greedy_with_progress(policy, [bfcl.chat_messages(e) for e in entries], max_new_tokens, batch_size,
                                      f"bfcl {category}")
    rows = []
    for entry, response in zip(entries, responses):
        response = "" if response is None else response
        verdict = bfcl.check(entry, response)
        rows.append({"id": entry["id"], "result": response, "valid": verdict["valid"],
                     "error_type": verdict["error_type"]})
    return {"rows": rows, "result_file": bfcl.write_result_file(out, category, rows),
            "per_entry": [{k: r[k] for k in ("id", "valid", "error_type")} for r in rows]}


def _multi_turn_category(policy, category: str, entries: list[dict], out: Path, max_new_tokens: int,
                         batch_size: int, max_steps: int) -> dict:

    with progress_bar(bfcl_multiturn.count_turns(entries), f"bfcl {category} (turns)", leave=False) as bar:
        rows = bfcl_multiturn.run_turns(
            entries, lambda chats: greedy_responses(policy, chats, max_new_tokens, batch_size),
            max_steps=max_steps, progress=bar.update)
    result_file = bfcl.write_result_file(out, category, bfcl_multiturn.result_file_rows(entries, rows))
    return {"rows": rows, "result_file": result_file,
            "per_entry": [{k: r[k] for k in ("id", "turn", "valid", "error_type")} for r in rows],
            "turns_exceeding_context": sum(r["error_type"] == "prompt_exceeds_context" for r in rows)}


def eval_bfcl(model: str, categories: list[str], out: str | Path, limit: int | None = None,
              max_new_tokens: int = 128, batch_size: int = 8, device: str = "cpu", threads: int = 2,
              sampler: str = "transformers", sampler_dtype: str = "f16",
              max_steps: int = 5, log=print, policy=None) -> dict:
    """Accuracy per category and overall. AST categories score one response per entry; multi-turn
    categories score every turn on its own (``genenv.domains.toolcall.bfcl_multiturn``), so their unit is a turn."""


    torch.set_num_threads(threads)
    entries_by_category = {}  # bad names fail before the model loads
    for category in categories:
        if category in bfcl_multiturn.MULTI_TURN_CATEGORIES:
            entries_by_category[category] = bfcl_multiturn.load_entries(category, limit)
        elif category in bfcl.AST_CATEGORIES:
            entries_by_category[category] = bfcl.load_category(category, limit)
        else:
            raise ValueError(f"--categories: {category!r} is not a BFCL category we score; choose from "
                             f"{', '.join(bfcl.AST_CATEGORIES + bfcl_multiturn.MULTI_TURN_CATEGORIES)}")
    if policy is None:
        policy = load_eval_policy(model, log, device, threads, sampler, use_chat_template=True,
                                  sampler_dtype=sampler_dtype)
    out = Path(out)
    scores = {"model": model, "limit": limit, "max_new_tokens": max_new_tokens, "max_steps": max_steps,
              "categories": {}}
    for category, entries in entries_by_category.items():
        start = time.perf_counter()
        if category in bfcl_multiturn.MULTI_TURN_CATEGORIES:
            result = _multi_turn_category(policy, category, entries, out, max_new_tokens, batch_size, max_steps)
        else:
            result = _ast_category(policy, category, entries, out, max_new_tokens, batch_size)
        rows = result.pop("rows")
        correct = sum(r["valid"] for r in rows)
        accuracy = correct / len(rows) if rows else None
        scores["categories"][category] = {"accuracy": accuracy, "correct": correct, "total": len(rows),
                                          "unit": "turn" if "turns_exceeding_context" in result else "entry",
                                          "seconds": round(time.perf_counter() - start, 1),
                                          **{k: (str(v) if k == "result_file" else v) for k, v in result.items()}}
        extra = (f", {result['turns_exceeding_context']} turns longer than the context window"
                 if result.get("turns_exceeding_context") else "")
        log(f"{category:24s} {accuracy if accuracy is not None else float('nan'):.3f} ({correct}/{len(rows)}){extra}")
    correct = sum(c["correct"] for c in scores["categories"].values())
    total = sum(c["total"] for c in scores["categories"].values())
    scores["overall"] = {"accuracy": correct / total if total else None, "correct": correct, "total": total}
    atomic_write_json(out / "scores.json", scores)
    log(f"{'overall':24s} {scores['overall']['accuracy'] if total else float('nan'):.3f} ({correct}/{total})")
    return scores


def add_arguments(parser) -> None:
    """``genenv eval --benchmark bfcl``'s own options."""
    parser.add_argument("--categories", default="simple_python,parallel,parallel_multiple",
                        help="comma-separated BFCL categories")
    parser.add_argument("--max-steps", type=int, default=5,
                        help="multi-turn: model steps per turn before it ends (BFCL allows 20)")


def from_command_line(args, common: dict) -> dict:
    """``genenv eval --benchmark bfcl``: the options it reads (``common``: limit, device, threads, sampler)."""
    return eval_bfcl(args.model, [c.strip() for c in args.categories.split(",") if c.strip()], args.out,
                     max_new_tokens=args.max_new_tokens, batch_size=args.batch_size, max_steps=args.max_steps,
                     **common)

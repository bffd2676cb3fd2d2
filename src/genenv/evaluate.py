"""``genenv eval``: a model on a real benchmark, scored by the benchmark's own checker.

``genenv eval --benchmark bfcl --categories simple_python,parallel,parallel_multiple --model smollm2 --limit 50``
prompts the model as BFCL prompts a chat model (BFCL's system prompt, greedy decoding), scores every response
with BFCL's decoder and AST checker, prints accuracy per category and overall, and writes the raw responses
in BFCL's result-file format (``OUT/genenv/BFCL_v4_<category>_result.json``) plus ``OUT/scores.json``.
"""

from __future__ import annotations

import time
from pathlib import Path

from tqdm.auto import tqdm

from genenv.io import atomic_write_json


def eval_bfcl(model: str, categories: list[str], out: str | Path, limit: int | None = None,
              max_new_tokens: int = 128, batch_size: int = 8, device: str = "cpu", threads: int = 2,
              log=print) -> dict:
    import torch

    from genenv.benchmarks import bfcl
    from genenv.models.policy import Policy
    from genenv.models.registry import resolve_model

    torch.set_num_threads(threads)
    entries_by_category = {c: bfcl.load_category(c, limit) for c in categories}  # bad names fail before loading
    policy = Policy.load(resolve_model(model, log), device=device, use_chat_template=True)
    out = Path(out)
    scores = {"model": model, "limit": limit, "max_new_tokens": max_new_tokens, "categories": {}}
    for category, entries in entries_by_category.items():
        start = time.perf_counter()
        prompts = [bfcl.chat_messages(e) for e in entries]
        # longest prompts first, in batches: less padding; greedy decoding makes the order irrelevant
        lengths = [len(ids) for ids in policy.encode_prompts(prompts)]  # one batched encode, then cached
        order = sorted(range(len(entries)), key=lambda i: -lengths[i])
        responses: dict[int, str] = {}
        with tqdm(total=len(entries), desc=f"bfcl {category}", dynamic_ncols=True, leave=False) as bar:
            for first in range(0, len(order), batch_size):
                chunk = order[first:first + batch_size]
                gens = policy.generate([prompts[i] for i in chunk], greedy=True, max_new_tokens=max_new_tokens,
                                       batch_size=batch_size)
                for i, group in zip(chunk, gens):
                    responses[i] = group[0].text
                bar.update(len(chunk))
        rows = []
        for i, entry in enumerate(entries):
            verdict = bfcl.check(entry, responses[i])
            rows.append({"id": entry["id"], "result": responses[i], "valid": verdict["valid"],
                         "error_type": verdict["error_type"]})
        result_file = bfcl.write_result_file(out, category, rows)
        accuracy = sum(r["valid"] for r in rows) / len(rows) if rows else None
        scores["categories"][category] = {"accuracy": accuracy, "correct": sum(r["valid"] for r in rows),
                                          "total": len(rows), "seconds": round(time.perf_counter() - start, 1),
                                          "result_file": str(result_file),
                                          "per_entry": [{k: r[k] for k in ("id", "valid", "error_type")}
                                                        for r in rows]}
        log(f"{category:20s} {accuracy:.3f} ({sum(r['valid'] for r in rows)}/{len(rows)})")
    correct = sum(c["correct"] for c in scores["categories"].values())
    total = sum(c["total"] for c in scores["categories"].values())
    scores["overall"] = {"accuracy": correct / total if total else None, "correct": correct, "total": total}
    atomic_write_json(out / "scores.json", scores)
    log(f"{'overall':20s} {scores['overall']['accuracy']:.3f} ({correct}/{total})")
    return scores

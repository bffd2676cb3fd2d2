"""An official benchmark's evaluation on transformers (today's greedy path) against llama.cpp (``--sampler
llama.cpp``: f16 or, ``llama.cpp:bf16``, bf16 weights; prompts in token order, 16 answers decoded side by side, each
prompt prefilling only what it does not share with the one before), side by side in one run (issue 40's
evaluation target).

    .venv/bin/python benchmarks/eval_speed.py --limit 40 --threads 2
    .venv/bin/python benchmarks/eval_speed.py --engines llama.cpp:bf16 --limit 0 --threads 2   # all items
    .venv/bin/python benchmarks/eval_speed.py --benchmark bfcl --engines transformers,llama.cpp --limit 40
    .venv/bin/python benchmarks/eval_speed.py --engines llama.cpp/whole,llama.cpp --model MODEL_FOLDER --limit 40

An engine ending in ``/whole`` decodes every API-Bank answer to its end (``--whole-answers``); without it an API
item's answer stops after the first line holding a call (the default), and the comparison says on how many items
both parse to the same call.

``--benchmark``: api-bank (level 1's API items, the default), bfcl (its simple_python category: items the model before
training gets right, so agreeing verdicts say something) or bamboogle (closed-book questions, exact match).

Each engine runs ``genenv eval --benchmark B`` as a process of its own (model loading included
in its seconds). Prints the seconds of each, their ratio, and how many API-call verdicts and predictions agree,
with every item whose verdict differs (its id, both predictions). Target: all items on level 1 in at most 8
minutes on two cores, with the same verdicts as transformers on the first 40 items (or each difference explained).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_eval(engine: str, args, out: Path) -> tuple[float, list[dict]]:
    """Seconds of one ``genenv eval`` and its items: ``{"key", "correct", "prediction"}`` each, in item order."""
    engine, whole = engine.removesuffix("/whole"), engine.endswith("/whole")   # llama.cpp/whole: --whole-answers
    command = [sys.executable, "-m", "genenv.cli", "eval", "--benchmark", args.benchmark, "--model", args.model,
               "--threads", str(args.threads), "--out", str(out), "--sampler", engine.split(":")[0]]
    if whole:
        command.append("--whole-answers")
    command += {"api-bank": ["--levels", "1", "--data", args.data or os.environ.get(
                    "GENENV_APIBANK_DATA", "../shared/data/api-bank")],
                "bfcl": ["--categories", "simple_python"],
                "bamboogle": ["--data", args.data or os.environ.get(
                    "GENENV_BAMBOOGLE_DATA", "../shared/data/bamboogle")]}[args.benchmark]
    if ":" in engine:   # llama.cpp:bf16 -> --sampler-dtype bf16
        command += ["--sampler-dtype", engine.split(":")[1]]
    if args.limit:
        command += ["--limit", str(args.limit)]
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    return seconds, benchmark_items(args.benchmark, out)


def benchmark_items(benchmark: str, out: Path) -> list[dict]:
    """One evaluation's items from its folder: a key, the verdict and the prediction text of each."""
    if benchmark == "bfcl":   # verdicts in scores.json, the texts in BFCL's result file
        scores = json.loads((out / "scores.json").read_text())
        verdicts = {row["id"]: row["valid"] for row in scores["categories"]["simple_python"]["per_entry"]}
        texts = [json.loads(line) for path in out.rglob("*_simple_python_result.json")
                 for line in path.read_text().splitlines()]
        return [{"key": row["id"], "correct": verdicts[row["id"]], "prediction": row["result"]} for row in texts]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    if benchmark == "bamboogle":
        return [{"key": row["id"], "correct": row["em"], "prediction": row["answer"]} for row in rows]
    return [{"key": f"{row['file']} {row['id']}", "correct": row["correct"], "prediction": row["prediction"]}
            for row in rows if row["kind"] == "api"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--benchmark", default="api-bank", choices=("api-bank", "bfcl", "bamboogle"))
    parser.add_argument("--limit", type=int, default=40, help="items (api-bank: of level 1; 0: all)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--engines", default="transformers,llama.cpp,llama.cpp:bf16",
                        help="comma-separated; llama.cpp:DTYPE decodes with --sampler-dtype DTYPE; each is compared "
                             "with the first")
    parser.add_argument("--data", help="api-bank, bamboogle: the data folder (default: $GENENV_APIBANK_DATA or "
                                       "$GENENV_BAMBOOGLE_DATA, else ../shared/data/...)")
    parser.add_argument("--out", help="keep each engine's evaluation folder here (OUT/ENGINE, its seconds in "
                                      "OUT/ENGINE/seconds); an engine whose folder is there already is read, not rerun "
                                      "(same benchmark, model and limit: yours to keep)")
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as scratch:
        for engine in args.engines.split(","):
            folder = Path(args.out or scratch) / engine.replace(".", "").replace(":", "-").replace("/", "-")
            if (folder / "seconds").exists():
                seconds, rows = float((folder / "seconds").read_text()), benchmark_items(args.benchmark, folder)
            else:
                seconds, rows = run_eval(engine, args, folder)
                (folder / "seconds").write_text(f"{seconds:.1f}\n")
            results[engine] = (seconds, rows)
            correct = sum(row["correct"] for row in rows)
            print(f"{engine:12s} {len(rows)} items in {seconds:7.1f} s ({seconds / len(rows):.2f} s an item), "
                  f"{correct} correct", flush=True)
    engines = list(results)
    base_s, base = results[engines[0]]
    for engine in engines[1:]:   # each against the first (today's path)
        fast_s, fast = results[engine]
        if [a["key"] for a in base] != [b["key"] for b in fast]:
            raise SystemExit(f"{engine}: its items are not {engines[0]}'s (in the same order)")
        same_verdict = sum(a["correct"] == b["correct"] for a, b in zip(base, fast))
        same_text = sum(a["prediction"] == b["prediction"] for a, b in zip(base, fast))
        same_call = ""
        if args.benchmark == "api-bank":   # the call each prediction parses to: all its verdict reads
            from genenv.domains.apibank.calls import extract_call  # noqa: PLC0415
            calls = sum(extract_call(a["prediction"] or "") == extract_call(b["prediction"] or "")
                        for a, b in zip(base, fast))
            written = sum(extract_call(a["prediction"] or "") is not None for a in base)
            same_call = f", the same call parsed on {calls} ({written} of {engines[0]}'s hold one)"
        characters = sum(len(a["prediction"] or "") for a in base), sum(len(b["prediction"] or "") for b in fast)
        print(f"{engine}: ratio {base_s / fast_s:.2f}x; verdicts the same on {same_verdict} of {len(base)}, "
              f"predictions identical on {same_text}{same_call}; {characters[1]:,} characters predicted against "
              f"{characters[0]:,}")
        for a, b in zip(base, fast):
            if a["correct"] != b["correct"]:
                print(f"  {a['key']}: {engines[0]} {a['correct']} {a['prediction']!r}\n"
                      f"  {' ' * len(str(a['key']))}  {engine} {b['correct']} {b['prediction']!r}")


if __name__ == "__main__":
    main()

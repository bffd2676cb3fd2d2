"""What a run did, window by window: the simulator's valid generations, its update steps (and the steps the max-KL
cap undid), in-band tasks, the agent's GRPO steps per 1,000 rollouts and where the valid tasks' p_hat fell.

    .venv/bin/python benchmarks/run_windows.py RUN_DIR [RUN_DIR ...] [--window 10]

Reads each run folder's ``metrics.jsonl`` (a run still going counts the epochs it has finished) and prints one
line per ``window`` epochs, then the evaluations (epoch, dev, held-out). The settings pilot of issue 41
(docs/results-log/apibank-comparison.md) states its decision rules on these sums.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from genenv.io import read_jsonl


def window_sums(rows: list[dict]) -> dict:
    """Sums over the metrics rows of one window (epochs in it, generations, valid ones, simulator steps, steps
    undone by the KL cap, in-band tasks, agent rollouts and GRPO steps, p_hat histogram of the valid tasks)."""
    histogram: list[int] = []
    for row in rows:
        counts = row.get("p_hat_histogram") or []
        histogram = [a + b for a, b in zip(histogram, counts)] if histogram else list(counts)
    total = {key: sum(row.get(key) or 0 for row in rows)
             for key in ("generated", "valid", "env_steps", "env_kl_capped", "in_band_tasks", "rollouts_this_epoch",
                         "agent_updates")}
    return {"first": rows[0]["epoch"], "last": rows[-1]["epoch"], **total, "p_hat_histogram": histogram}


def windows(rows: list[dict], size: int) -> list[dict]:
    return [window_sums(rows[start:start + size]) for start in range(0, len(rows), size)]


def line(w: dict) -> str:
    valid = f"{w['valid']}/{w['generated']} ({w['valid'] / w['generated']:.0%})" if w["generated"] else "-"
    per_1000 = 1000 * w["agent_updates"] / w["rollouts_this_epoch"] if w["rollouts_this_epoch"] else 0.0
    return (f"epochs {w['first']}-{w['last']}: valid {valid}, simulator steps {w['env_steps']} "
            f"(+{w['env_kl_capped']} undone by the KL cap), in-band {w['in_band_tasks']}, GRPO steps "
            f"{w['agent_updates']} ({per_1000:.1f} per 1000 rollouts), p_hat of valid tasks {w['p_hat_histogram']}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--window", type=int, default=10)
    args = parser.parse_args()
    for run in args.runs:
        rows = read_jsonl(run / "metrics.jsonl")   # (a run still going: a torn last line ends the rows)
        print(f"{run}: {len(rows)} epochs")
        for w in windows(rows, args.window):
            print("  " + line(w))
        evaluations = [f"{r['epoch']}: dev {r['dev_success']:.3f} held-out {r['heldout_success']:.3f}"
                       for r in rows if r.get("heldout_success") is not None and r.get("dev_success") is not None]
        if evaluations:
            print("  evaluations " + "; ".join(evaluations))


if __name__ == "__main__":
    main()

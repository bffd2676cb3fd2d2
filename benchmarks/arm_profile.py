"""What each arm's simulator did over a run: the share of its tasks in the band, the share of mixed rollout groups,
where its tasks' p_hat fell window by window, the teacher's extra model calls, the share of its generations the
domain accepted and why it rejected the rest, and ten tasks it wrote in its first
and last epoch (issue 55, item 4).

    .venv/bin/python benchmarks/arm_profile.py LABEL=ARM_DIR [LABEL=ARM_DIR ...] [--windows 4] [--seed 0]
        [--tasks 10]

``ARM_DIR`` holds ``seed<k>/`` run folders (a comparison's ``runs/<arm>``). Means are over every epoch of every
seed's ``metrics.jsonl``: ``band_hit_rate`` (tasks with |p_hat - alpha| <= k_min), ``effective_fraction`` (rollout
groups with mixed rewards, the only ones GRPO learns from). The p_hat histogram (five bins, [0, 0.2) ... [0.8, 1])
is summed over seeds in ``--windows`` equal spans of epochs, as shares. The tasks are the first ``--tasks`` valid
ones of seed ``--seed``'s first and last samples file, with their level and p_hat.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from genenv.io import read_jsonl


def profile(arm_dir: Path, windows: int = 4) -> dict:
    """Means and windowed p_hat histograms over every seed of one arm."""
    band, mixed, calls, histograms, seeds = [], [], [], None, 0
    generated = valid = 0
    reasons: dict[str, int] = {}
    for seed_dir in sorted(arm_dir.glob("seed*/")):
        rows = read_jsonl(seed_dir / "metrics.jsonl") if (seed_dir / "metrics.jsonl").exists() else []
        if not rows:
            continue
        seeds += 1
        band += [r["band_hit_rate"] for r in rows if r.get("band_hit_rate") is not None]
        mixed += [r["effective_fraction"] for r in rows if r.get("effective_fraction") is not None]
        calls += [(r.get("teacher_backward_passes") or 0, r.get("teacher_forward_sequences") or 0) for r in rows]
        for r in rows:
            generated, valid = generated + (r.get("generated") or 0), valid + (r.get("valid") or 0)
            for reason, count in (r.get("invalid_reasons") or {}).items():
                reasons[reason] = reasons.get(reason, 0) + count
        if histograms is None:
            histograms = [np.zeros(5) for _ in range(windows)]
        for index, chunk in enumerate(np.array_split(np.arange(len(rows)), windows)):
            for i in chunk:
                histograms[index] += np.asarray(rows[i].get("p_hat_histogram") or [0] * 5, dtype=float)
    shares = [(h / h.sum()).round(3).tolist() if h.sum() else None for h in (histograms or [])]
    per_epoch = np.mean(calls, axis=0).tolist() if calls else [0.0, 0.0]
    return {"seeds": seeds, "band_hit_rate": float(np.mean(band)) if band else None,
            "mixed_groups": float(np.mean(mixed)) if mixed else None, "p_hat_shares_by_window": shares,
            "teacher_backward_passes_per_epoch": per_epoch[0], "teacher_forward_sequences_per_epoch": per_epoch[1],
            "generated": generated, "valid_share": valid / generated if generated else None,
            "rejections": dict(sorted(reasons.items(), key=lambda item: (-item[1], item[0])))}


def first_and_last_tasks(run_dir: Path, n: int = 10) -> dict[str, list[dict]]:
    """The first ``n`` valid tasks of a run's first and last samples file (level, p_hat and the task)."""
    files = sorted((run_dir / "samples").glob("epoch_*.jsonl"),
                   key=lambda p: int(re.fullmatch(r"epoch_(\d+)\.jsonl", p.name).group(1)))
    out = {}
    for name, path in (("first", files[0]), ("last", files[-1])) if files else ():
        rows = [r for r in read_jsonl(path) if r.get("valid")][:n]
        out[f"{name} ({path.stem})"] = [{"task": r["task"], "level": r["level"], "p_hat": r["p_hat_task"]}
                                        for r in rows]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("arms", nargs="+", metavar="LABEL=ARM_DIR")
    parser.add_argument("--windows", type=int, default=4)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of the table")
    args = parser.parse_args()
    result = {}
    for item in args.arms:
        label, _, path = item.partition("=")
        result[label] = {**profile(Path(path), args.windows),
                         "tasks": first_and_last_tasks(Path(path) / f"seed{args.seed}", args.tasks)}
    if args.json:
        print(json.dumps(result, indent=1))
        return
    print("| arm | seeds | band hit | mixed groups | p_hat shares [0,.2) .. [.8,1] by window | teacher calls/epoch "
          "| valid (pooled) | rejections, the five most |")
    print("|---|---|---|---|---|---|---|---|")
    for label, r in result.items():
        windows = " / ".join(" ".join(f"{x:.2f}" for x in w) if w else "-" for w in r["p_hat_shares_by_window"])
        calls = (f"{r['teacher_backward_passes_per_epoch']:.1f} backward, "
                 f"{r['teacher_forward_sequences_per_epoch']:.0f} sequences")
        band = "-" if r["band_hit_rate"] is None else f"{r['band_hit_rate']:.3f}"
        mixed = "-" if r["mixed_groups"] is None else f"{r['mixed_groups']:.3f}"
        valid = "-" if r["valid_share"] is None else f"{r['valid_share']:.3f} of {r['generated']}"
        rejected = ", ".join(f"{reason} {count}" for reason, count in list(r["rejections"].items())[:5]) or "-"
        print(f"| {label} | {r['seeds']} | {band} | {mixed} | {windows} | {calls} | {valid} | {rejected} |")
    for label, r in result.items():
        for name, tasks in r["tasks"].items():
            print(f"\n{label}, seed {args.seed}, {name}: " + "; ".join(
                f"{t['task']} (L{t['level']}, p {t['p_hat']:.2f})" for t in tasks))


if __name__ == "__main__":
    main()

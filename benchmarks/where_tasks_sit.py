"""Where each arm's training tasks sit: their level, and which of them taught the agent anything.

    .venv/bin/python benchmarks/where_tasks_sit.py COMPARE_DIR [--arms genenv,random,oracle-frontier]
        [--from-epoch 20]

Reads the tasks each run wrote (``runs/<arm>/seed<k>/samples/epoch_*.jsonl``, every seed found) and prints, per
arm, the share of valid tasks at each level and the share of the *informative* ones (the agent's rollouts
mixed: 0 < p_hat < 1, the only groups GRPO learns from) at each level, with how many of those the agent mostly
failed (p_hat < 0.5) or mostly solved (p_hat > 0.5). A curriculum whose informative tasks sit on a level the
agent has mastered greedily spends its updates sharpening samples, not learning the next level.
"""

from __future__ import annotations

import argparse
import json
import re
from collections import Counter
from pathlib import Path


def where_tasks_sit(arm_dir: Path, from_epoch: int = 0) -> dict:
    """Counts over every seed folder of one arm: valid tasks by level, informative tasks by level, and the
    informative ones with p_hat below and above 0.5."""
    by_level, informative, below, above, seeds = Counter(), Counter(), 0, 0, 0
    for seed_dir in sorted(arm_dir.glob("seed*/")):
        seeds += 1
        for path in (seed_dir / "samples").glob("epoch_*.jsonl"):
            if int(re.fullmatch(r"epoch_(\d+)\.jsonl", path.name).group(1)) < from_epoch:
                continue
            for line in path.read_text().splitlines():
                row = json.loads(line)
                if not row.get("valid") or row.get("p_hat_task") is None:
                    continue
                p_hat, level = row["p_hat_task"], str(row["level"])
                by_level[level] += 1
                if 0.0 < p_hat < 1.0:
                    informative[level] += 1
                    below += p_hat < 0.5
                    above += p_hat > 0.5
    return {"seeds": seeds, "tasks": sum(by_level.values()), "by_level": dict(by_level),
            "informative": sum(informative.values()), "informative_by_level": dict(informative),
            "informative_below_half": below, "informative_above_half": above}


def shares(counts: dict) -> str:
    total = sum(counts.values()) or 1
    return " ".join(f"{level}:{counts[level] / total:.2f}" for level in sorted(counts, key=int))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("compare_dir", type=Path)
    parser.add_argument("--arms", default="", help="comma-separated arm labels (default: every arm folder)")
    parser.add_argument("--from-epoch", type=int, default=20)
    args = parser.parse_args()
    runs = args.compare_dir / "runs"
    arms = args.arms.split(",") if args.arms else sorted(p.name for p in runs.iterdir() if p.is_dir())
    for arm in arms:
        counts = where_tasks_sit(runs / arm, args.from_epoch)
        n = counts["informative"] or 1
        print(f"{arm}: {counts['seeds']} seeds, {counts['tasks']} valid tasks from epoch {args.from_epoch}, "
              f"{counts['informative'] / max(counts['tasks'], 1):.2f} informative "
              f"(p_hat < 0.5: {counts['informative_below_half'] / n:.2f}, > 0.5: "
              f"{counts['informative_above_half'] / n:.2f})")
        print(f"  tasks by level:             {shares(counts['by_level'])}")
        print(f"  informative tasks by level: {shares(counts['informative_by_level'])}")


if __name__ == "__main__":
    main()

"""What each domain's training reward pays for ignoring the task (issue 93, item 4): on each domain's dev set (its
held-out set where it has none), the mean reward of the task's own reference actions, of *another* task's reference
actions (task i answered with task i+1's), and of a hedge (the final answer written as another task's answer and this
one's together: on one line for an answer-phrase domain, as two lines or two plans elsewhere). A reward others train
on must pay the other task's answer and the hedge no more than a single wrong answer.

    .venv/bin/python benchmarks/reward_hacks.py [--per-level 20] [--data ../shared/data]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from genenv.config import RunConfig
from genenv.domains import make_domain
from genenv.rollout import replay
from genenv.splits import data_split

ROOT = Path(__file__).resolve().parents[1]


def reference(domain, task) -> list[str]:
    return [target for _, _, target in domain.warmstart_examples(task)]


def hedge(mine: str, other: str) -> str:
    """The other task's final answer and this one's together: ``answer: W G`` for an answer phrase, the two texts on
    two lines elsewhere."""
    if mine.startswith("answer:") and other.startswith("answer:"):
        return f"answer: {other.removeprefix('answer:').strip()} {mine.removeprefix('answer:').strip()}"
    return f"{other}\n{mine}"


def measure(name: str, options: dict, per_level: int) -> dict:
    domain = make_domain(name, **options)
    cfg = RunConfig()
    split = data_split(RunConfig(domain=type(cfg.domain)(name=name, options=options, heldout_per_level=per_level)),
                       domain)
    tasks = split.dev or split.heldout   # (toolcall has no dev set: its held-out one)
    own, other, hedged, other_by_level = [], [], [], {}
    for i, task in enumerate(tasks):
        mine, theirs = reference(domain, task), reference(domain, tasks[(i + 1) % len(tasks)])
        own.append(replay(domain, task, mine).reward)
        paid = replay(domain, task, theirs).reward
        other.append(paid)
        other_by_level.setdefault(task.level, []).append(paid)
        hedged.append(replay(domain, task, mine[:-1] + [hedge(mine[-1], theirs[-1])]).reward)
    return {"tasks": len(tasks), "own": float(np.mean(own)), "other": float(np.mean(other)),
            "other_max_level": max(float(np.mean(v)) for v in other_by_level.values()),
            "hedge": float(np.mean(hedged))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-level", type=int, default=20)
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data"))
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "examples"))
    data = Path(args.data)
    specs = [("addition", {}), ("addition", {"reward": "digits"}), ("multihop", {}), ("multihop", {"reward": "f1"}),
             ("household", {}), ("toolcall", {}), ("apibank", {"data": str(data / "api-bank")}),
             ("travel", {"data": str(data / "travelplanner")}),
             ("travel", {"data": str(data / "travelplanner"), "reward": "final"})]
    print(f"{'domain':<38} {'tasks':>5} {'own':>6} {'other':>6} {'other (worst level)':>20} {'hedge':>6}")
    for name, options in specs:
        label = f"{name} {options.get('reward', '')}".strip()
        try:
            row = measure(name, options, args.per_level)
        except Exception as error:  # noqa: BLE001 (a domain whose data is absent here: said, and the rest go on)
            print(f"{label:<38} not measured: {type(error).__name__}: {str(error)[:80]}")
            continue
        print(f"{label:<38} {row['tasks']:>5} {row['own']:>6.3f} {row['other']:>6.3f} {row['other_max_level']:>20.3f} "
              f"{row['hedge']:>6.3f}")


if __name__ == "__main__":
    main()

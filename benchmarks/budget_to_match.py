"""How many agent rollouts a baseline run for longer needs to reach GenEnv's final held-out success.

    .venv/bin/python benchmarks/budget_to_match.py REFERENCE_ARM_DIR BASELINE_ARM_DIR

Both folders hold ``seed<k>/`` run folders (an arm of ``genenv compare``); the baseline's runs are meant to be
longer (``epochs=400`` for twice the budget). Per seed present in both: the reference's final success (the
target), the baseline's success at the reference's budget and at its own end, and the rollouts at which it first
reaches the target, as a multiple of the reference's budget. Then the same on the curves averaged over the
seeds (every run of an arm evaluates at the same rollout counts). `genenv compare` measures the same within
one budget; this says whether a baseline gets there with more data, and with how much.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from genenv.analysis import RunRecord, first_reach, load_run, rollouts_to_reach


def value_at(record: RunRecord, rollouts: float) -> float:
    """Held-out success at the last evaluation at or before ``rollouts``."""
    xs, ys = record.eval_curve()
    return float(ys[xs <= rollouts][-1])


def budget_to_match(reference: dict[int, RunRecord], baseline: dict[int, RunRecord]) -> dict:
    """Per seed and on the seed-mean curves: the baseline's rollouts to reach the reference's final success,
    as a multiple of the reference's budget (None: never, within the baseline's budget). A baseline run with fewer
    evaluations than the longest (still running, or stopped) is left out and listed in ``left_out``."""
    seeds = sorted(set(reference) & set(baseline))
    evaluations = {s: len(baseline[s].eval_curve()[0]) for s in seeds}
    longest = max(evaluations.values(), default=0)
    left_out = [s for s in seeds if evaluations[s] < longest]
    seeds = [s for s in seeds if evaluations[s] == longest]
    rows = []
    for seed in seeds:
        ref, base = reference[seed], baseline[seed]
        target, budget = ref.rows[-1]["heldout_success"], float(ref.eval_curve()[0][-1])
        needed = rollouts_to_reach(base, target)
        rows.append({"seed": seed, "target": target, "budget": budget, "at_budget": value_at(base, budget),
                     "at_end": base.rows[-1]["heldout_success"], "rollouts": needed,
                     "multiple": None if needed is None else needed / budget})
    mean = None
    if seeds:
        xs = baseline[seeds[0]].eval_curve()[0]
        curve = np.mean([baseline[s].eval_curve()[1] for s in seeds], axis=0)
        target = float(np.mean([r["target"] for r in rows]))
        budget = rows[0]["budget"]
        needed = first_reach(xs, curve, target)
        mean = {"target": target, "at_budget": float(curve[xs <= budget][-1]), "at_end": float(curve[-1]),
                "rollouts": needed, "multiple": None if needed is None else needed / budget}
    return {"per_seed": rows, "mean_curve": mean, "left_out": left_out}


def _seed_runs(arm_dir: Path) -> dict[int, RunRecord]:
    runs = (load_run(path) for path in sorted(arm_dir.glob("seed*/")) if (path / "metrics.jsonl").exists())
    return {r.seed: r for r in runs if r.rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reference", type=Path)
    parser.add_argument("baseline", type=Path)
    args = parser.parse_args()
    result = budget_to_match(_seed_runs(args.reference), _seed_runs(args.baseline))

    def multiple(row):
        return "never" if row["multiple"] is None else f"{row['rollouts']:.0f} rollouts = {row['multiple']:.2f}x"
    for row in result["per_seed"]:
        print(f"seed {row['seed']}: target {row['target']:.3f}; baseline {row['at_budget']:.3f} at the reference's "
              f"budget ({row['budget']:.0f}), {row['at_end']:.3f} at its end; reaches the target at {multiple(row)}")
    if result["left_out"]:
        print(f"left out (baseline run shorter than the others: unfinished?): seeds {result['left_out']}")
    m = result["mean_curve"]
    if m is not None:
        print(f"seed-mean curves: target {m['target']:.3f}; baseline {m['at_budget']:.3f} at the reference's budget, "
              f"{m['at_end']:.3f} at its end; reaches the target at {multiple(m)}")


if __name__ == "__main__":
    main()

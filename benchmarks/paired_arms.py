"""Arms from any comparison folders, paired by seed: every seed's final success and each arm's paired
difference against a reference, with 95% bootstrap intervals: BCa first (the headline: at 8-24 seeds it corrects
the percentile interval's bias and skew), the percentile one beside it (the decision rules of docs/results.md were
written on those).

    .venv/bin/python benchmarks/paired_arms.py --metric dev --reference genenv-predicted \\
        genenv-predicted=runs/dev37b/runs/genenv-predicted random=runs/dev37/runs/random ...
        [--gain-over random --gain-of oracle] [--epoch 199] [--last 3]

Each ``LABEL=ARM_DIR`` names a folder of ``seed<k>/`` run folders, or several joined by commas (seeds 0-7 from
one comparison, 8-15 from another: ``random=runs/dev37/runs/random,runs/dev37c/runs/random``; a seed found
twice is an error); only finished runs count, and only seeds every arm finished are paired. A folder may also be
an arm of a committed ``benchmarks/eval_curves.py`` file, ``FILE.json:ARM`` (runs of another session or machine:
``genenv-levels=docs/results-log/issue55/controls-T600.json:genenv-levels,runs/ctl55b/runs/genenv-levels``); its
runs count as finished when they ran as many epochs as the file's longest run of that arm.
``--metric valid_share``: the mean over a run's epochs (up to ``--epoch``) of ``valid / generated``, the share of
the simulator's generations the domain accepted (issue 57's rule).
``--gain-over B --gain-of C``: the share of C's gain over B that the reference recovers (reference - B) / (C - B),
with its interval (as ``genenv compare`` prints it for the oracle).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from genenv.analysis import load_run
from genenv.stats import gain_recovered, paired_differences


def finals(arm_dir: Path, metric: str, epoch: int | None = None, last: int = 1) -> dict[int, float]:
    """Seed -> the final ``{metric}_success`` of every finished run under ``arm_dir``; with ``epoch``, the one
    evaluated at that epoch of every run that has reached it (a longer run read at a shorter budget). With
    ``last`` = K > 1, the mean of the K evaluations ending there (a run with fewer is left out): one evaluation of
    a greedy agent can flip on a single update (issue 55, section 5d)."""
    out = {}
    for seed_dir in sorted(arm_dir.glob("seed*/")):
        if not (seed_dir / "config.yaml").exists():
            continue
        record = load_run(seed_dir)
        if metric == "valid_share":
            rows = [r for r in record.rows if epoch is None or r["epoch"] <= epoch]
            reached = record.finished if epoch is None else bool(rows) and rows[-1]["epoch"] == epoch
            shares = [r["valid"] / r["generated"] for r in rows if r.get("generated")]
            if reached and shares:
                out[record.seed] = sum(shares) / len(shares)
            continue
        key = f"{metric}_success"
        evaluations = {row["epoch"]: row[key] for row in record.rows if row.get(key) is not None}
        value = read_evaluations(evaluations, record.finished, epoch, last)
        if value is not None:
            out[record.seed] = value
    return out


def read_evaluations(evaluations: dict[int, float], finished: bool, epoch: int | None, last: int) -> float | None:
    """One run's reading from its evaluations (epoch -> success): the mean of the ``last`` ones ending at its final
    evaluation (a finished run) or at ``epoch`` (a run evaluated then); None when it has no such reading."""
    if epoch is None:
        if not finished:
            return None
    elif epoch not in evaluations:
        return None
    values = [v for e, v in sorted(evaluations.items()) if epoch is None or e <= epoch][-last:]
    return sum(values) / last if values and len(values) == last else None


def finals_from_curves(path: Path, arm: str, metric: str, epoch: int | None = None, last: int = 1) -> dict[int, float]:
    """:func:`finals` over the evaluations ``benchmarks/eval_curves.py`` kept of arm ``arm`` in ``path``."""
    if metric == "valid_share":
        raise ValueError(f"{path}: eval_curves files keep dev and held-out success only, not valid_share")
    data = json.loads(path.read_text())
    if arm not in data:
        raise ValueError(f"{path}: no arm {arm!r} (it has {', '.join(data)})")
    runs = data[arm]
    longest = max((run["epochs"] for run in runs.values()), default=0)
    column = 0 if metric == "dev" else 1
    out = {}
    for seed, run in runs.items():
        evaluations = {int(e): values[column] for e, values in run["evaluations"].items()
                       if values[column] is not None}
        value = read_evaluations(evaluations, run["epochs"] == longest, epoch, last)
        if value is not None:
            out[int(seed)] = value
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("arms", nargs="+", metavar="LABEL=ARM_DIR")
    parser.add_argument("--metric", default="dev", choices=("dev", "heldout", "valid_share"))
    parser.add_argument("--epoch", type=int, default=None, help="read each run at this epoch (it must have been "
                        "evaluated then) instead of its final row: a longer run at a shorter budget")
    parser.add_argument("--last", type=int, default=1, help="the mean of each run's last K evaluations (ending at "
                        "--epoch or the final row) instead of one")
    parser.add_argument("--reference", required=True, help="the arm every other is paired against")
    parser.add_argument("--gain-over", default=None, help="baseline arm of the gain share (e.g. random)")
    parser.add_argument("--gain-of", default=None, help="ceiling arm of the gain share (e.g. oracle)")
    args = parser.parse_args()
    arms = {}
    for item in args.arms:
        label, _, paths = item.partition("=")
        arms[label] = {}
        for path in paths.split(","):
            file, colon, arm = path.rpartition(":")
            if colon and file.endswith(".json"):
                try:
                    found = finals_from_curves(Path(file), arm, args.metric, args.epoch, args.last)
                except (OSError, ValueError) as err:
                    parser.error(f"{label}: {err}")
            else:
                found = finals(Path(path), args.metric, args.epoch, args.last)
            twice = sorted(set(found) & set(arms[label]))
            if twice:
                parser.error(f"{label}: seed(s) {twice} in more than one of its folders")
            arms[label].update(found)
    if args.reference not in arms:
        parser.error(f"--reference {args.reference!r} is not one of the arms")
    seeds = sorted(set.intersection(*(set(v) for v in arms.values())))
    if args.last < 1:
        parser.error("--last: at least 1")
    name = args.metric if args.metric == "valid_share" else f"{args.metric} success"
    if args.last > 1 and args.metric != "valid_share":
        name += f", the mean of the last {args.last} evaluations"
    print(f"{name}, seeds finished by every arm: {seeds}")
    width = max(len(label) for label in arms)
    for label, values in arms.items():
        row = " ".join(f"{values[s]:.3f}" for s in seeds)
        mean = sum(values[s] for s in seeds) / len(seeds) if seeds else float("nan")
        print(f"{label:<{width}}  mean {mean:.3f}  | {row}")
    reference = {s: arms[args.reference][s] for s in seeds}
    for label, values in arms.items():
        if label == args.reference:
            continue
        paired = paired_differences(reference, {s: values[s] for s in seeds})
        bca = paired["ci95_bca"] or [float("nan")] * 2
        ci = paired["ci95"] or [float("nan")] * 2
        print(f"{args.reference} minus {label}: {paired['mean']:+.3f} [{bca[0]:+.3f}, {bca[1]:+.3f}] (BCa; "
              f"percentile [{ci[0]:+.3f}, {ci[1]:+.3f}]), {paired['wins']} of {paired['of']} seeds ahead")
    if args.gain_over and args.gain_of:
        gain = gain_recovered(reference, {s: arms[args.gain_over][s] for s in seeds},
                              {s: arms[args.gain_of][s] for s in seeds})
        ci = gain.get("ci95")
        ratio = "undefined" if gain["ratio"] is None else f"{gain['ratio']:.0%}"
        print(f"{args.reference} recovers {ratio}" + (f" [{ci[0]:.0%}, {ci[1]:.0%}]" if ci else "") +
              f" of {args.gain_of}'s gain over {args.gain_over} ({gain['reference_gain']:+.3f} of "
              f"{gain['ceiling_gain']:+.3f})")


if __name__ == "__main__":
    main()

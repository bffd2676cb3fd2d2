"""Data efficiency of GenEnv against its baselines on the default domain, measured side by side in one run.

Runs ``genenv compare`` (every curriculum x seed, same agent rollouts per epoch; finished pairs are skipped on
a re-run), prints the results table, and ends with one line: GenEnv's final held-out success minus each
baseline's, and how many agent rollouts the static and offline baselines need, relative to GenEnv, to reach
GenEnv's final held-out success ("never" when they do not within the budget).

Usage: python benchmarks/data_efficiency.py [--seeds 3] [--workers 2] [--out runs/data_efficiency] [overrides]
About 30 minutes on 2 CPU cores with the defaults. The report is OUT/report.html.
"""

from __future__ import annotations

import argparse
import time


def ratio_text(summary: dict, label: str) -> str:
    """Rollouts the baseline needs to reach GenEnv's final held-out success, as a multiple of GenEnv's own,
    paired by seed (same warm start); "never" for seeds where the baseline does not reach it in the budget."""
    paired = summary["curricula"][label]["paired_to_reference_final"]
    parts = [("never" if row["rollouts"] is None else
              f"{row['ratio']:.2f}x" if row["ratio"] is not None else "reached at 0 rollouts")
             for row in paired["per_seed"]]
    return f"[{', '.join(parts)}]"


def main() -> None:
    from genenv.compare import compare
    from genenv.report import text_table as summary_table

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", help="dotted overrides for every run, e.g. epochs=100")
    parser.add_argument("--seeds", default="3")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--preset", default="default")
    parser.add_argument("--out", default="runs/data_efficiency")
    args = parser.parse_args()

    start = time.perf_counter()
    summary = compare(args.out, preset=args.preset, curricula="genenv,random,static,offline,learnability",
                      seeds=args.seeds, overrides=args.overrides, workers=args.workers)
    print(summary_table(summary))
    print(f"wall time {time.perf_counter() - start:.0f}s; report: {args.out}/report.html")
    curricula = summary["curricula"]
    ours = curricula["genenv"]["heldout_final"]["mean"]
    gaps = ", ".join(f"{label} {ours - s['heldout_final']['mean']:+.3f}" for label, s in curricula.items()
                     if label != "genenv")
    needs = ", ".join(f"{label} {ratio_text(summary, label)}" for label in curricula
                      if label.startswith(("static", "offline")))
    print(f"GenEnv final held-out {ours:.3f}; GenEnv minus baseline: {gaps}; rollouts to reach GenEnv's final "
          f"success relative to GenEnv, per seed: {needs}")


if __name__ == "__main__":
    main()

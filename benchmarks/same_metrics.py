"""Same seed, same metrics: one preset run by two code trees, every metrics row compared key by key.

A restructuring that is meant to keep behaviour (issue 42) must give the same metrics.jsonl as the code before it,
bit for bit, on the same machine. This runs ``genenv run PRESET`` once with the ``--before`` source tree on
PYTHONPATH (a ``git worktree`` of the earlier commit) and once with this checkout's, in fresh run folders, and
prints each key that differs, with the epoch and both values. Wall-clock and memory keys are not compared. Both
read the usual warm-start cache (its keys hold the code that trains them); ``--fresh-cache`` trains each tree's
warm starts anew in its own temporary cache.

    git worktree add /tmp/before <commit>
    .venv/bin/python benchmarks/same_metrics.py --before /tmp/before/src --preset smoke threads=1
    .venv/bin/python benchmarks/same_metrics.py --before /tmp/before/src --preset default threads=1 epochs=30

``--with KEY=VALUE`` (repeatable) gives overrides to the second run only: an option that must not change the
numbers (a fast path), checked against the same code without it (``--before`` left out: this checkout twice)::

    .venv/bin/python benchmarks/same_metrics.py --preset default threads=1 epochs=30 --with agent.shared_prefix=true

Exit status 0 when every compared value is equal, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent / "src"
# wall-clock and memory measurements: they differ between any two runs
NOT_COMPARED = ("seconds_by_phase", "seconds_total", "generated_tokens_per_second", "model_time_fraction",
                "peak_rss_mb_by_phase", "wall_seconds", "model_seconds")


def run(source: Path, preset: str, overrides: list[str], out: Path, cache: Path | None) -> list[dict]:
    """``genenv run`` of ``preset`` with ``source`` first on PYTHONPATH; its metrics rows."""
    env = dict(os.environ, PYTHONPATH=str(source))
    if cache is not None:
        env["GENENV_CACHE"] = str(cache)
    command = [sys.executable, "-m", "genenv.cli", "run", "--preset", preset, "--out", str(out), "progress=false",
               *overrides]
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{source}: genenv run failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]


def differences(before: list[dict], after: list[dict]) -> list[str]:
    """One line per (epoch, key) whose values differ, plus rows present in one run only."""
    lines = []
    if len(before) != len(after):
        lines.append(f"rows: {len(before)} before, {len(after)} after")
    for row_before, row_after in zip(before, after):
        keys = (row_before.keys() | row_after.keys()) - set(NOT_COMPARED)
        for key in sorted(keys):
            if row_before.get(key, "<missing>") != row_after.get(key, "<missing>"):
                lines.append(f"epoch {row_after.get('epoch', '?')}: {key}: {row_before.get(key, '<missing>')!r} "
                             f"-> {row_after.get(key, '<missing>')!r}")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, default=None,
                        help="the earlier code's src folder (default: this checkout, to compare --with options)")
    parser.add_argument("--with", dest="with_options", action="append", default=[], metavar="KEY=VALUE",
                        help="an override for the second run only (an option that must keep the metrics)")
    parser.add_argument("--preset", default="smoke")
    parser.add_argument("--fresh-cache", action="store_true", help="each tree trains its warm starts anew")
    parser.add_argument("overrides", nargs="*", help="key=value, given to both runs")
    args = parser.parse_args(argv)
    if args.before is None and not args.with_options:
        parser.error("give --before (an earlier code tree) or --with (options for the second run), or both")
    before_source = HERE if args.before is None else args.before.resolve()
    if not (before_source / "genenv" / "__init__.py").is_file():
        parser.error(f"--before: {args.before} has no genenv package (give a worktree's src folder)")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        caches = (tmp / "cache-before", tmp / "cache-after") if args.fresh_cache else (None, None)
        before = run(before_source, args.preset, args.overrides, tmp / "before", caches[0])
        after = run(HERE, args.preset, [*args.overrides, *args.with_options], tmp / "after", caches[1])
    lines = differences(before, after)
    compared = sum(len(row.keys() - set(NOT_COMPARED)) for row in after)
    if lines:
        print("\n".join(lines))
        print(f"DIFFERENT: {len(lines)} of {compared} values ({args.preset}, {len(after)} epochs)")
        return 1
    options = f"; second run with {' '.join(args.with_options)}" if args.with_options else ""
    print(f"same: {compared} values over {len(after)} epochs ({args.preset} {' '.join(args.overrides)}{options})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Issue 88, item 7: TravelPlanner's scorer on hostile plans of about 30,000 characters, with the linear parsers
(`from_to`, `strip_state`) and with the upstream regexes they replaced (``from (.+?) to ([^,]+)``, ``\\(.*?\\)``,
patched back in here), side by side: seconds per plan scored through `Domain.score` and the ratio.

    .venv/bin/python benchmarks/travel_scoring.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import re
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import numpy as np

from genenv.domains import make_domain
from genenv.domains.travel import constraints

ROOT = Path(__file__).resolve().parents[1]


def regex_strip_state(city) -> str:
    return re.sub(r"\(.*?\)", "", str(city)).strip()


def regex_from_to(text):
    match = re.search(r"from (.+?) to ([^,]+)", str(text or ""))
    return (None, None) if match is None else (regex_strip_state(match[1]), regex_strip_state(match[2]))


@contextmanager
def upstream_regexes():
    saved = constraints.from_to, constraints.strip_state
    constraints.from_to, constraints.strip_state = regex_from_to, regex_strip_state
    try:
        yield
    finally:
        constraints.from_to, constraints.strip_state = saved


def hostile_plans(days: int, size: int) -> dict[str, str]:
    """Plans of ``days`` days whose first day's ``current_city`` (which the route check and each day's transport
    read through ``from_to`` and ``strip_state``) is one hostile text of about ``size`` characters."""
    texts = {"unclosed parentheses": "(" * size, "from without to": "from " * (size // 5),
             "from, then a late to": "from a" * (size // 6) + " to x"}
    keys = ("transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")
    return {name: json.dumps([{"days": d + 1, "current_city": text if d == 0 else "-", **dict.fromkeys(keys, "-")}
                              for d in range(days)]) for name, text in texts.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    domain = make_domain("travel", data=str(ROOT / "tests" / "data" / "travel-world"), max_candidates=2)
    task = max(domain.seed_tasks(np.random.default_rng(0), 64), key=lambda t: int(domain.task_query(t)["days"]))
    days = int(domain.task_query(task)["days"])
    print(f"a {days}-day query; seconds to score one plan (best of {args.repeats})")
    print(f"{'plan':<24} {'characters':>10} {'regexes':>9} {'linear':>9} {'ratio':>7}")
    for name, plan in hostile_plans(days, 30_000).items():
        timings = {}
        for label, context in (("regexes", upstream_regexes), ("linear", nullcontext)):
            with context():
                best = float("inf")
                for _ in range(args.repeats):
                    start = time.perf_counter()
                    domain.score(task, plan)
                    best = min(best, time.perf_counter() - start)
            timings[label] = best
        print(f"{name:<24} {len(plan):>10,} {timings['regexes']:>9.3f} {timings['linear']:>9.3f} "
              f"{timings['regexes'] / timings['linear']:>6.0f}x")


if __name__ == "__main__":
    main()

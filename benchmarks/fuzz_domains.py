"""Every registered domain (and the sorting example) under `genenv check-domain`'s properties, many texts each:
counts of texts fed, of failures per property (a raise, a reasonless rejection, a reward out of range, a null
response that earns), for issue 38's fuzzing report; then, per domain, the hostile texts of the bounded
properties (issue 77: `genenv.domain_check.hostile_texts`) timed one call at a time, as simulator output through
`Domain.parse_and_validate` and as an agent's action through `Domain.checked_step` (the loop's entry points): texts,
calls that raised, calls over `Domain.call_seconds`, and the slowest call (an action: the whole episode of it) with
its text's length and class.

    .venv/bin/python benchmarks/fuzz_domains.py [--examples 5000] [--apibank-data ../shared/data/api-bank]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from genenv.domain_check import PROPERTIES, check_domain, hostile_texts
from genenv.domains import make_domain

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=5000)
    parser.add_argument("--apibank-data", default=str(ROOT.parent / "shared" / "data" / "api-bank"))
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "examples"))
    specs = [("addition", {}), ("addition", {"reward": "digits"}), ("multihop", {}), ("multihop", {"reward": "f1"}),
             ("household", {}), ("toolcall", {}), ("travel", {"data": str(ROOT / "tests/data/travel-world")}),
             ("apibank", {"data": args.apibank_data}), ("sorting_domain:SortingDomain", {})]
    print(f"{'domain':<30} " + " ".join(f"{p:>22}" for p in PROPERTIES))
    totals = dict.fromkeys(PROPERTIES, 0), dict.fromkeys(PROPERTIES, 0)
    for name, options in specs:
        try:
            domain = make_domain(name, **options)
        except Exception as error:   # a domain whose data is absent: said, not counted
            print(f"{name:<30} skipped: {error}")
            continue
        report = check_domain(domain, examples=args.examples)
        label = name + ("" if not options or "data" in options else f" {options}")
        print(f"{label:<30} " + " ".join(f"{report.failed[p]:>9} of {report.counts[p]:>9}" for p in PROPERTIES))
        for p in PROPERTIES:
            totals[0][p] += report.failed[p]
            totals[1][p] += report.counts[p]
        for failure in report.failures:
            print(f"    first failure: {failure}")
    print(f"{'all':<30} " + " ".join(f"{totals[0][p]:>9} of {totals[1][p]:>9}" for p in PROPERTIES))
    print()
    print("| domain | side | texts | raised | over call_seconds | slowest call | its text |")
    print("|---|---|---|---|---|---|---|")
    for name, options in specs:
        try:
            domain = make_domain(name, **options)
        except Exception:   # noqa: BLE001 (said above)
            continue
        shown = name.split(":")[-1] + ("" if not options or "data" in options else f" {options}")
        for side, row in bounded_rows(domain).items():
            texts, raised, over, (seconds, length, label) = row
            print(f"| {shown} | {side} | {texts} | {raised} | {over} | {seconds:.3f} s | {length:,} "
                  f"characters ({label}) |")


def bounded_rows(domain) -> dict:
    """Per side (simulator text, agent action): texts, raised, over the bound, (slowest seconds, length, class)."""
    task = domain.seed_tasks(np.random.default_rng(0), 1)[0]
    actions = [response for _, _, response in domain.warmstart_examples(task)][:2] + [task.answer or ""]
    sides = {"simulator text": (hostile_texts(domain.simulator_text_limit, [task.text]),
                                lambda text: domain.parse_and_validate(text)),
             "agent action": (hostile_texts(domain.agent_text_limit, actions),
                              lambda text: episode(domain, task, text))}
    out = {}
    for side, (texts, call) in sides.items():
        raised = over = 0
        slowest = (0.0, 0, "")
        for label, text in texts:
            start = time.perf_counter()
            try:
                call(text)
            except Exception:   # noqa: BLE001 (the entry points never raise: a count that must stay 0)
                raised += 1
            seconds = time.perf_counter() - start
            over += seconds > domain.call_seconds
            slowest = max(slowest, (seconds, len(text), label))
        out[side] = (len(texts), raised, over, slowest)
    return out


def episode(domain, task, action: str) -> None:
    """``action`` as every action of an episode until it ends (the step limit of a multi-turn domain)."""
    state, _ = domain.reset(task, seed=0)
    for _ in range(max(1, domain.max_turns)):
        result = domain.checked_step(state, action)
        state = result.state
        if result.terminated or result.truncated:
            break


if __name__ == "__main__":
    main()

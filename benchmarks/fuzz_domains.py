"""Every registered domain (and the sorting example) under `genenv check-domain`'s properties, many texts each:
counts of texts fed, of failures per property (a raise, a reasonless rejection, a reward out of range, a null
response that earns), for issue 38's fuzzing report.

    .venv/bin/python benchmarks/fuzz_domains.py [--examples 5000] [--apibank-data ../shared/data/api-bank]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from genenv.domain_check import PROPERTIES, check_domain
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


if __name__ == "__main__":
    main()

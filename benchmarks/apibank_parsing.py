"""API-Bank call parsing: SPEC.md 2.3's regular expressions against genenv's linear parser, on long hostile
responses (issue 38). Prints seconds for each and their ratio, measured side by side in one run.

    .venv/bin/python benchmarks/apibank_parsing.py [--sizes 8000,32000,64000]
"""

from __future__ import annotations

import argparse
import re
import time

from genenv.domains.apibank.calls import extract_call

SPEC_CALL = re.compile(r"\[(\w+)\((.*)\)\]")
SPEC_ARGUMENT = re.compile(r"(\w+)\s*=\s*(?:['\"](.+?)['\"]|(\[.*\])|(\w+))")


def spec_extract(text: str):
    match = SPEC_CALL.search(text)
    return None if match is None else [m.groups() for m in SPEC_ARGUMENT.finditer(match.group(2))]


def timed(function, text: str) -> float:
    start = time.perf_counter()
    function(text)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8000,32000,64000")
    args = parser.parse_args()
    shapes = {"one long word": lambda n: "[F(" + "a" * n + ")]", "'[a(' repeated": lambda n: "[a(" * (n // 3),
              "'a=[' repeated": lambda n: "[F(" + "a=[" * (n // 3) + ")]"}
    print(f"{'input':<16} {'chars':>7} {'spec regex s':>13} {'genenv s':>9} {'ratio':>8}")
    for name, make in shapes.items():
        for n in (int(s) for s in args.sizes.split(",")):
            text = make(n)
            regex, linear = timed(spec_extract, text), timed(extract_call, text)
            print(f"{name:<16} {n:>7} {regex:>13.3f} {linear:>9.4f} {regex / linear:>7.0f}x")


if __name__ == "__main__":
    main()

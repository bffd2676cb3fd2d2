"""What closing under a budget (``TokenConstraint(budget=...)``, issue 57: near ``max_new_tokens`` a constrained
text writes the short way its grammar closes) adds to the mask per token: each JSON domain's seed texts replayed
through ``TokenConstraint`` on SmolLM2's vocabulary without a budget and with one that ends ``--slack`` tokens after
the text (so its last tokens are inside the closing window), alternately in one process (the better of two passes
each); and how many of the seed texts' own tokens the closing refuses at that budget (a text that fits is refused a
token only where its closing, plus what one opening byte would add, leaves under ``CLOSING_MARGIN`` tokens spare).

    .venv/bin/python benchmarks/closing_overhead.py --domains toolcall,household --texts 10 --slack 16
"""

from __future__ import annotations

import argparse
import time

import numpy as np

OPTIONS = {"apibank": {"data": "../shared/data/api-bank"}}


def measure(name: str, tokenizer, texts: int, slack: int) -> str:
    from genenv.constrained import CLOSING_WINDOW, TokenConstraint
    from genenv.domains import make_domain
    domain = make_domain(name, **OPTIONS.get(name, {}))
    sequences = [tokenizer.encode(task.text, add_special_tokens=False) + [tokenizer.eos_token_id]
                 for task in domain.seed_tasks(np.random.default_rng(0), texts)]
    def compiled(budget):   # compiled before the timing: a run compiles its constraint once
        return TokenConstraint(domain.task_shape(), tokenizer, len(tokenizer), tokenizer.eos_token_id, name,
                               budget=budget)
    arms = {False: [compiled(None)] * len(sequences), True: [compiled(len(ids) + slack) for ids in sequences]}
    seconds, masks = {True: [], False: []}, {}
    for closing in (True, False, True, False):
        start = time.perf_counter()
        masks[closing] = [constraint.replay(ids) for constraint, ids in zip(arms[closing], sequences)]
        seconds[closing].append(time.perf_counter() - start)
    tokens = sum(map(len, sequences))
    windowed = sum(min(len(ids), max(0, CLOSING_WINDOW - slack)) for ids in sequences)
    refused = sum(not (int(mask[i, t >> 5]) >> (t & 31)) & 1
                  for ids, mask in zip(sequences, masks[True]) for i, t in enumerate(ids))
    without_us, with_us = (min(seconds[k]) / tokens * 1e6 for k in (False, True))
    added_in_window = (min(seconds[True]) - min(seconds[False])) / max(windowed, 1) * 1e6
    return (f"| {name} | {len(sequences)} | {tokens} | {windowed} | {without_us:.0f} | {with_us:.0f} "
            f"| {added_in_window:.0f} | {refused} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domains", default="toolcall,household,apibank")
    parser.add_argument("--texts", type=int, default=10)
    parser.add_argument("--slack", type=int, default=16, help="tokens of budget past each text's own length")
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    from genenv.models.registry import resolve_model
    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model("smollm2", log=lambda m: None)))
    print(f"budget: each text's tokens + {args.slack}")
    print("| domain | texts | tokens | tokens in the closing window | mask, us a token | under the budget "
          "| added, us a token in the window | seed tokens refused |")
    print("|---|---|---|---|---|---|---|---|")
    for name in filter(None, args.domains.split(",")):
        print(measure(name, tokenizer, args.texts, args.slack), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

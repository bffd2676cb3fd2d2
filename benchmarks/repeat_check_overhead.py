"""What the string checks (no repeated key or ``uniqueItems`` string, a member-of string one of the earlier items:
:mod:`genenv.json_unique`) add to a constrained sampler's mask per token (issue 57): each JSON domain's seed texts
replayed through ``TokenConstraint`` on SmolLM2's vocabulary, with the checks and without them, alternately in one
process (the better of two passes each); on how many positions of those texts the checks narrow the mask, and how
many of the seed texts' own tokens they refuse (0: every seed text stays writable).

    .venv/bin/python benchmarks/repeat_check_overhead.py --domains apibank,household --texts 20
"""

from __future__ import annotations

import argparse
import time

import numpy as np

OPTIONS = {"apibank": {"data": "../shared/data/api-bank"}}


def measure(name: str, tokenizer, texts: int) -> str:
    from genenv.constrained import TokenConstraint
    from genenv.domains import make_domain
    domain = make_domain(name, **OPTIONS.get(name, {}))
    constraint = TokenConstraint(domain.task_shape(), tokenizer, len(tokenizer), tokenizer.eos_token_id, name)
    sequences = [tokenizer.encode(task.text, add_special_tokens=False) + [tokenizer.eos_token_id]
                 for task in domain.seed_tasks(np.random.default_rng(0), texts)]
    tokens = sum(map(len, sequences))
    check, seconds, masks = constraint.unique, {True: [], False: []}, {}
    for with_check in (True, False, True, False):
        constraint.unique = check if with_check else None
        start = time.perf_counter()
        masks[with_check] = [constraint.replay(ids) for ids in sequences]
        seconds[with_check].append(time.perf_counter() - start)
    constraint.unique = check
    differ = sum(int((a != b).any(axis=1).sum()) for a, b in zip(masks[True], masks[False]))
    refused = sum(not (int(mask[i, t >> 5]) >> (t & 31)) & 1
                  for ids, mask in zip(sequences, masks[True]) for i, t in enumerate(ids))
    with_us, without_us = (min(seconds[k]) / tokens * 1e6 for k in (True, False))
    return (f"| {name} | {tokens} | {without_us:.1f} | {with_us:.1f} | {with_us - without_us:+.1f} | {differ} "
            f"| {refused} |")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domains", default="apibank,household")
    parser.add_argument("--texts", type=int, default=20)
    args = parser.parse_args(argv)
    from transformers import AutoTokenizer

    from genenv.models.registry import resolve_model
    tokenizer = AutoTokenizer.from_pretrained(str(resolve_model("smollm2", log=lambda m: None)))
    print("| domain | tokens | mask, us a token | with the string checks | added | positions whose mask narrows "
          "| seed tokens refused |")
    print("|---|---|---|---|---|---|---|")
    for name in filter(None, args.domains.split(",")):
        print(measure(name, tokenizer, args.texts), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

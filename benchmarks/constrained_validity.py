"""What the constraint buys the warm-started simulator (issue 57, item 4): valid tasks with ``env.constrained`` off
and on, side by side, from the same warm start, seeds and keyed streams.

For each preset and seed: the run's warm-started simulator (the cached one a run would use), the seed set a run
draws, and ``--epochs`` epochs of generation exactly as the loop's phase 1 writes them (``generate_tasks``: the
epoch's seeds from the pool, the simulator's prompts, ``env.variations`` tasks each), validated as phase 2 does;
no agent, no updates (so this is the warm start's validity, the first epoch's, not a run's). Reported per arm: the
valid share, how many valid tasks are distinct and their levels, the rejection reasons (their kinds, and in full
in the JSON lines), simulator tokens and seconds per valid task.

    .venv/bin/python benchmarks/constrained_validity.py --preset household-smoke --seeds 0,1 --epochs 4
    .venv/bin/python benchmarks/constrained_validity.py --preset household --seeds 32,33
    .venv/bin/python benchmarks/constrained_validity.py --preset smollm2-apibank --seeds 0 --arms on env.sampler=vllm

An override such as ``env.sampler=vllm`` decodes on that engine (vLLM applies the same masks through genenv's
logits processor: docs/vllm.md), to hold its validity against the transformers path's.
"""

from __future__ import annotations

import argparse
import json
import re
import time
from collections import Counter

import torch


def reason_kind(reason: str) -> str:
    """A rejection reason without what it quotes: names in quotes become '…', numbers N, and what follows a
    colon is dropped ("object 'vase 1' is in 'desk 1', ..." and "... 'egg 2' ... 'shelf 3' ..." are one kind)."""
    kind = re.sub(r"\d+", "N", re.sub(r"'[^']*'", "'…'", reason.split(":")[0]))
    return kind[:80]


def measure(preset: str, seed: int, constrained: bool, epochs: int, overrides: list[str]) -> dict:
    from genenv.coevolve import generate_tasks, validate_tasks
    from genenv.config import load_config
    from genenv.domains import make_domain
    from genenv.engine import LocalEngine
    from genenv.players import Players, RunState, simulator_constraint
    from genenv.splits import data_split, training_seed_tasks
    from genenv.warmstart import warm_start_simulator
    cfg = load_config(preset, [f"seed={seed}", f"env.constrained={str(constrained).lower()}", *overrides])
    domain = make_domain(cfg.domain.name, **cfg.domain.options)
    split = data_split(cfg, domain)
    env, _ = warm_start_simulator(cfg, domain, log=lambda m: None)
    if cfg.env.sampler == "vllm":   # the engine the run would decode with (env.sampler=vllm: its own masks applied)
        from genenv.players import player_sampler
        env.sampler = player_sampler(cfg, "env", env, cfg.env)
    state = RunState()
    for task in training_seed_tasks(cfg, domain, split):
        state.task_pool.add(task, "seed", -1)
    engine = LocalEngine(domain, Players(None, None, env, None, None, None, simulator_constraint(cfg, domain, env)))
    candidates, seconds = [], 0.0
    for epoch in range(epochs):
        start = time.perf_counter()
        written = generate_tasks(cfg, domain, env, state, epoch, engine)
        seconds += time.perf_counter() - start
        candidates += validate_tasks(domain, written, split)
    valid = [c for c in candidates if c.valid]
    levels = Counter(c.parsed.level for c in valid)
    reasons = Counter(reason_kind(c.parsed.reason) for c in candidates if not c.valid)
    details = Counter(c.parsed.reason[:100] for c in candidates if not c.valid)
    tokens = sum(len(c.token_ids) for c in candidates)
    return {"preset": preset, "seed": seed, "constrained": constrained, "written": len(candidates),
            "valid": len(valid), "valid_share": len(valid) / max(1, len(candidates)),
            "distinct_valid": len({c.parsed.text for c in valid}), "valid_by_level": dict(sorted(levels.items())),
            "tokens_per_valid": tokens / max(1, len(valid)), "seconds_per_valid": seconds / max(1, len(valid)),
            "reasons": dict(reasons.most_common(8)), "reasons_in_full": dict(details.most_common()),
            "malformed": [{"tokens": len(c.token_ids), "characters": len(c.raw), "end": c.raw[-60:]}
                          for c in candidates if not c.valid and c.parsed.reason.startswith("malformed")],
            "too_long_as_written": [{"characters": len(c.raw), "tokens": len(c.token_ids), "text": c.raw}
                                    for c in candidates if not c.valid and "characters" in c.parsed.reason]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="household-smoke")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--arms", default="off,on", help="which arms to write, in this order (off, on)")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        for constrained in [{"off": False, "on": True}[arm] for arm in args.arms.split(",")]:
            rows.append(measure(args.preset, seed, constrained, args.epochs, [f"threads={args.threads}",
                                                                            *args.overrides]))
            print(json.dumps(rows[-1]), flush=True)
    print("\n| preset | seed | constrained | valid / written | tokens per valid | s per valid | top rejections |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        reasons = "; ".join(f"{k} {v}" for k, v in r["reasons"].items()) or "none"
        print(f"| {r['preset']} | {r['seed']} | {'on' if r['constrained'] else 'off'} | {r['valid']} / {r['written']} "
              f"({r['valid_share']:.0%}) | {r['tokens_per_valid']:.1f} | {r['seconds_per_valid']:.3f} | {reasons} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

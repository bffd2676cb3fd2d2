"""How many valid tasks does a preset's warm-started simulator write? (The simulator side only; no agent.)

    .venv/bin/python benchmarks/simulator_validity.py --preset smollm2-bfcl [--seeds 8 --variations 2] [overrides]
    .venv/bin/python benchmarks/simulator_validity.py --by-seed-level [overrides]    # leveled domains

Warm-starts (or loads from the cache) the preset's simulator, lets it write ``variations`` tasks for each of
``seeds`` seed tasks at success rate 0.5, grounds them with the domain and prints the valid count and the
reasons of the rejects. ``--by-seed-level`` (a domain with ``random_task``): ``seeds`` seed tasks of each level
instead, and per seed level the levels of the valid tasks written: does the seed steer the simulator?
"""

import collections
import time

import numpy as np
from _preset import preset_from_args

from genenv.domains import Invalid
from genenv.generation import simulator_sampling, write_tasks
from genenv.seeding import stream_seed
from genenv.warmstart import warm_start_simulator


def main() -> None:
    args, cfg, domain = preset_from_args(__doc__, {"--seeds": {"type": int, "default": 8},
                                                   "--variations": {"type": int, "default": 2},
                                                   "--by-seed-level": {"action": "store_true"}})
    start = time.perf_counter()
    env, info = warm_start_simulator(cfg, domain)
    print(f"simulator warm start {info} ({time.perf_counter() - start:.0f} s)")
    if args.by_seed_level:
        by_seed_level(cfg, domain, env, args.seeds, args.variations)
        return
    seeds = domain.seed_tasks(np.random.default_rng(stream_seed(cfg.seed, "seed_tasks")), args.seeds)
    start = time.perf_counter()
    generated = write_tasks(domain, env, seeds, [0.5] * len(seeds), args.variations, cfg.seed,
                            **simulator_sampling(cfg, domain))
    verdicts = collections.Counter()
    for item in generated:
        result = domain.parse_and_validate(item.raw)
        verdicts["valid" if not isinstance(result, Invalid) else result.reason.split(":")[0][:60]] += 1
    print(f"valid {verdicts.pop('valid', 0)}/{len(generated)} ({time.perf_counter() - start:.0f} s); "
          f"rejected: {dict(verdicts.most_common())}")


def steering(levels: list[int], seed_level: int, written: list[int]) -> dict:
    """What a simulator wrote from seeds of ``seed_level``: the valid tasks' mean level, the share within one level
    of the seed, and the count per level of ``levels``."""
    counts = collections.Counter(written)
    return {"valid": len(written), "mean_level": float(np.mean(written)) if written else None,
            "within_1": float(np.mean([abs(w - seed_level) <= 1 for w in written])) if written else None,
            "histogram": [counts.get(level, 0) for level in levels]}


def by_seed_level(cfg, domain, env, per_level: int, variations: int) -> None:
    """Per seed level, the table of :func:`steering`: does the seed steer what the simulator writes?"""
    rng = np.random.default_rng(stream_seed(cfg.seed, "seed_tasks"))
    levels = domain.levels()
    print(f"{'seed level':>10s} {'valid':>9s} {'mean level':>10s} {'within 1':>8s}   levels written "
          f"({' '.join(map(str, levels))})")
    for level in levels:
        seeds = [domain.random_task(rng, level) for _ in range(per_level)]
        generated = write_tasks(domain, env, seeds, [0.5] * len(seeds), variations, cfg.seed + level,
                                **simulator_sampling(cfg, domain))
        written = [t.level for t in (domain.parse_and_validate(g.raw) for g in generated) if not isinstance(t, Invalid)]
        row = steering(levels, level, written)
        mean, near = (f"{row[k]:.2f}" if row[k] is not None else "-" for k in ("mean_level", "within_1"))
        print(f"{level:10d} {row['valid']:4d}/{len(generated):<4d} {mean:>10s} {near:>8s}   "
              f"{' '.join(map(str, row['histogram']))}")


if __name__ == "__main__":
    main()

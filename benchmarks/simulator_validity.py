"""How many valid tasks does a preset's warm-started simulator write? (The simulator side only; no agent.)

    .venv/bin/python benchmarks/simulator_validity.py --preset smollm2-bfcl [--seeds 8 --variations 2] [overrides]

Warm-starts (or loads from the cache) the preset's simulator, lets it write ``variations`` tasks for each of
``seeds`` seed tasks at success rate 0.5, grounds them with the domain and prints the valid count and the
reasons of the rejects.
"""

import collections
import time

import numpy as np
from _preset import preset_from_args

from genenv.domains import Invalid
from genenv.generation import write_tasks
from genenv.seeding import stream_seed
from genenv.warmstart import warm_start_simulator


def main() -> None:
    args, cfg, domain = preset_from_args(__doc__, {"--seeds": {"type": int, "default": 8},
                                                   "--variations": {"type": int, "default": 2}})
    start = time.perf_counter()
    env, info = warm_start_simulator(cfg, domain)
    print(f"simulator warm start {info} ({time.perf_counter() - start:.0f} s)")
    seeds = domain.seed_tasks(np.random.default_rng(stream_seed(cfg.seed, "seed_tasks")), args.seeds)
    start = time.perf_counter()
    generated = write_tasks(cfg, domain, env, seeds, [0.5] * len(seeds), args.variations, cfg.seed)
    verdicts = collections.Counter()
    for item in generated:
        result = domain.parse_and_validate(item.raw)
        verdicts["valid" if not isinstance(result, Invalid) else result.reason.split(":")[0][:60]] += 1
    print(f"valid {verdicts.pop('valid', 0)}/{len(generated)} ({time.perf_counter() - start:.0f} s); "
          f"rejected: {dict(verdicts.most_common())}")


if __name__ == "__main__":
    main()

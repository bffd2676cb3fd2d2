"""What does a preset's agent warm start reach? Greedy success on the dev set (never the held-out set).

    .venv/bin/python benchmarks/warmstart_check.py --preset household [--dev-per-level 10] [overrides]

Warm-starts (or loads from the cache) the preset's agent and prints dev success overall and per level, and
for domains with an expert the single-step accuracy too.
"""

import argparse
import json
import time

import torch

from genenv.coevolve import evaluate
from genenv.config import load_config
from genenv.domains import make_domain
from genenv.warmstart import warm_start_agent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="default")
    parser.add_argument("--dev-per-level", type=int, default=10)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    cfg = load_config(args.preset, args.overrides)
    torch.set_num_threads(cfg.threads)
    domain = make_domain(cfg.domain.name, **cfg.domain.options)
    start = time.perf_counter()
    agent, info = warm_start_agent(cfg, domain)
    print(f"agent warm start {info} ({time.perf_counter() - start:.0f} s)")
    print(json.dumps(evaluate(cfg, domain, agent, domain.dev_tasks(args.dev_per_level), "dev")))


if __name__ == "__main__":
    main()

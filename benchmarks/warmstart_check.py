"""What does a preset's agent warm start reach? Greedy success on the dev set (never the held-out set).

    .venv/bin/python benchmarks/warmstart_check.py --preset household [--dev-per-level 10] [overrides]

Warm-starts (or loads from the cache) the preset's agent and prints dev success overall and per level, and
for domains with an expert the single-step accuracy too.
"""

import json
import time

from _preset import preset_from_args

from genenv.evaluation import evaluate
from genenv.warmstart import warm_start_agent


def main() -> None:
    args, cfg, domain = preset_from_args(__doc__, {"--dev-per-level": {"type": int, "default": 10}})
    start = time.perf_counter()
    agent, info = warm_start_agent(cfg, domain)
    print(f"agent warm start {info} ({time.perf_counter() - start:.0f} s)")
    print(json.dumps(evaluate(cfg, domain, agent, domain.dev_tasks(args.dev_per_level), "dev")))


if __name__ == "__main__":
    main()

"""A preset's agent after its warm start (cached under ``~/.cache/genenv/models`` as a run caches it; nothing
after it): a trained model folder to evaluate, for measurements that need verdicts a model before training does not
give (it gets none of API-Bank's level-1 items right). Prints the folder.

    python benchmarks/warm_started_agent.py domain.options.data=../shared/data/api-bank threads=1
    python benchmarks/eval_speed.py --engines transformers/whole,llama.cpp/whole,llama.cpp --model FOLDER --limit 40

The first took 45 min on one core beside two experiment runs (60 steps of the warm start, then its 16-task check).
"""

from __future__ import annotations

import argparse

import torch

from genenv.config import load_config
from genenv.domains import make_domain
from genenv.warmstart import agent_cache_folder, warm_start_agent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="smollm2-apibank")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("overrides", nargs="*", help="KEY=VALUE settings of the preset (seed=1, the data, ...)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = load_config(args.preset, args.overrides)
    domain = make_domain(cfg.domain.name, **cfg.domain.options)
    _, info = warm_start_agent(cfg, domain)
    print(f"warm start: {info}")
    print(agent_cache_folder(cfg, domain))


if __name__ == "__main__":
    main()

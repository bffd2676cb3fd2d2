"""Rollouts per second of an epoch's sampled phases on 0 (in-process), 1, 2, ... Ray workers, side by side.

One epoch's worth of work of ``--preset`` (its warm-started players, from the cache under ~/.cache/genenv or
trained first): the simulator writes ``seeds_per_epoch x variations`` tasks (phase 1) and the agent rolls out
``group_size`` episodes on as many tasks as an epoch's budget (fresh + replay, phase 3). Each worker count gets
its own engine, all built before timing starts; rounds are interleaved (N = 0, 1, 2, 0, 1, 2, ...) so drift in
the machine's load hits every count alike, and the median round is reported. Every process runs ``threads``
torch threads (default 1 here). Prints rollouts per second, the speed-up over one worker, the scaling efficiency
(speed-up / N) and checks that every worker count sampled the same tokens.

Shards hold ``generation_batch / group_size`` tasks (the config, not the worker count, decides), so a worker
count above the number of shards has nothing to do: the default ``agent.generation_batch=128`` here makes 6
shards of 16 tasks for the default preset's 96 tasks.

Usage: python benchmarks/scaling.py [--workers 0,1,2] [--rounds 5] [--preset default] [overrides ...]
"""

from __future__ import annotations

import statistics
import time

import numpy as np
import torch
from _preset import preset_from_args

from genenv.coevolve import rollout_budget
from genenv.config import load_config
from genenv.engine import make_engine
from genenv.generation import simulator_sampling, write_tasks
from genenv.players import make_players
from genenv.rollout import rollout
from genenv.seeding import phase_seed
from genenv.splits import data_split, training_seed_tasks
from genenv.warmstart import warm_start_agent, warm_start_simulator


def main() -> None:
    args, cfg, domain = preset_from_args(__doc__, {
        "--workers": {"default": "0,1,2", "help": "worker counts to compare (0 = in-process)"},
        "--rounds": {"type": int, "default": 5, "help": "timed rounds per worker count (after one warm-up)"}})
    overrides = ["threads=1", "agent.generation_batch=128", "env.generation_batch=128", *args.overrides]
    cfg = load_config(args.preset, overrides)
    torch.set_num_threads(cfg.threads)
    counts = [int(n) for n in args.workers.split(",")]
    split = data_split(cfg, domain)
    seeds = training_seed_tasks(cfg, domain, split)
    agent, _ = warm_start_agent(cfg, domain, seeds=seeds)
    env, _ = warm_start_simulator(cfg, domain)
    players = make_players(cfg, agent, env)
    fresh, replay = rollout_budget(cfg)
    rng = np.random.default_rng(0)
    tasks = [seeds[i] for i in rng.choice(len(seeds), size=fresh + replay, replace=len(seeds) < fresh + replay)]
    prompts = [seeds[i] for i in rng.choice(len(seeds), size=cfg.seeds_per_epoch)]
    rollouts = len(tasks) * cfg.agent.group_size
    import ray  # noqa: PLC0415 (one local Ray with a CPU for every actor of every engine below)
    ray.init(num_cpus=max(1, sum(counts)), num_gpus=0, include_dashboard=False, log_to_driver=False)
    engines = {n: make_engine(load_config(args.preset, [*overrides, f"engine.workers={n}"]), domain, players)
               for n in counts}

    def one_epoch(engine, round_index: int):
        seed = phase_seed(cfg.seed, round_index, "scaling")
        written = write_tasks(domain, env, prompts, [0.5] * len(prompts), cfg.env.variations, seed,
                              **simulator_sampling(cfg, domain), run_shards=engine.run_shards)
        groups = rollout(domain, agent, tasks, group_size=cfg.agent.group_size,
                         max_new_tokens=min(cfg.agent.max_new_tokens, domain.agent_max_new_tokens),
                         temperature=cfg.agent.temperature, seed=seed, batch_size=cfg.agent.generation_batch,
                         max_context_tokens=cfg.agent.max_context_tokens, run_shards=engine.run_shards)
        return [w.token_ids for w in written], [[e.turns[0].response_ids for e in g] for g in groups]

    seconds = {n: [] for n in counts}
    samples = {}
    try:
        for n in counts:
            samples[n] = one_epoch(engines[n], 0)   # warm-up (actors load, first calls)
        for round_index in range(1, args.rounds + 1):
            for n in counts:
                start = time.perf_counter()
                one_epoch(engines[n], round_index)
                seconds[n].append(time.perf_counter() - start)
    finally:
        for engine in engines.values():
            engine.close()
    same = all(samples[n] == samples[counts[0]] for n in counts)
    shards = -(-len(tasks) // max(1, cfg.agent.generation_batch // cfg.agent.group_size))
    print(f"preset {args.preset}: {len(prompts) * cfg.env.variations} tasks written + {rollouts} rollouts "
          f"({len(tasks)} tasks in {shards} shards) per epoch, {cfg.threads} thread(s) per process, "
          f"median of {args.rounds} rounds")
    base = {n: rollouts / statistics.median(seconds[n]) for n in counts}
    one = base.get(1)
    print(f"{'workers':>8s} {'rollouts/s':>11s} {'vs 1 worker':>12s} {'efficiency':>11s}")
    for n in counts:
        speedup = base[n] / one if one else float("nan")
        eff = speedup / n if n and one else float("nan")
        print(f"{n:>8d} {base[n]:11.1f} {speedup:11.2f}x {eff:10.0%}" if n else
              f"{'0 (here)':>8s} {base[n]:11.1f} {speedup:11.2f}x {'':>11s}")
    print(f"same tokens for every worker count: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()

"""Will GRPO have anything to learn from? The share of mixed groups a preset's agent gives, per level, on dev tasks.

    .venv/bin/python benchmarks/group_signal.py --preset reasoning-gym [--per-level 16] [--group 8]
        [--no-warmstart] [overrides]

GRPO learns only from groups whose sampled rollouts disagree (0 < p_hat < 1): a group all solved or all failed
has zero advantage everywhere. Before a long comparison, this samples ``--group`` rollouts (the run's
temperature and token budget) of ``--per-level`` dev tasks per level with the preset's warm-started agent (or the
base model, ``--no-warmstart``) and prints, per level, the mean sampled success, greedy success, and the shares
of groups all failed, mixed and all solved. The dev set only, never the held-out set. A model and domain with
few mixed groups at every level give a curriculum nothing to choose between (docs/results-log/reasoning-gym-smollm2.md).
"""

import json
import time

import numpy as np
from _preset import preset_from_args

from genenv.reward import success_rate
from genenv.rollout import rollout
from genenv.warmstart import base_policy, warm_start_agent


def group_signal(groups, greedy_groups, threshold: float) -> dict:
    """Counts over tasks of one level: sampled success, greedy success and the groups' agreement (each group's
    p_hat as the run computes it, :func:`genenv.reward.success_rate`)."""
    fractions = [success_rate([episode.reward for episode in group], threshold) for group in groups]
    return {"tasks": len(groups),
            "sampled_success": round(float(np.mean(fractions)), 3) if fractions else 0.0,
            "greedy_success": round(float(np.mean([g[0].reward >= threshold for g in greedy_groups])), 3)
            if greedy_groups else 0.0,
            "all_failed": sum(f == 0.0 for f in fractions),
            "mixed": sum(0.0 < f < 1.0 for f in fractions),
            "all_solved": sum(f == 1.0 for f in fractions)}


def main() -> None:
    args, cfg, domain = preset_from_args(__doc__, {
        "--per-level": {"type": int, "default": 16},
        "--group": {"type": int, "default": 0, "help": "rollouts per task (default: the preset's group_size)"},
        "--no-warmstart": {"action": "store_true", "help": "the base model, not the warm-started agent"}})
    start = time.perf_counter()
    if args.no_warmstart:
        agent, info = base_policy("agent", cfg, cfg.agent, domain), "base model"
    else:
        agent, info = warm_start_agent(cfg, domain)
    print(f"agent: {info} ({time.perf_counter() - start:.0f} s)", flush=True)
    group = args.group or cfg.agent.group_size
    threshold = cfg.curriculum_reward.success_threshold
    tasks = domain.dev_tasks(args.per_level)
    common = dict(max_new_tokens=min(cfg.agent.max_new_tokens, domain.agent_max_new_tokens),
                  batch_size=cfg.agent.generation_batch, max_context_tokens=cfg.agent.max_context_tokens)
    start = time.perf_counter()
    sampled = rollout(domain, agent, tasks, group_size=group, temperature=cfg.agent.temperature, seed=cfg.seed,
                      **common)
    greedy = rollout(domain, agent, tasks, group_size=1, greedy=True, **common)
    rows = {}
    for level in sorted({task.level for task in tasks}):
        index = [i for i, task in enumerate(tasks) if task.level == level]
        rows[level] = group_signal([sampled[i] for i in index], [greedy[i] for i in index], threshold)
    total = group_signal(sampled, greedy, threshold)
    print(f"{len(tasks)} dev tasks x {group} rollouts at temperature {cfg.agent.temperature} "
          f"({time.perf_counter() - start:.0f} s)")
    print(f"{'level':>5} {'tasks':>5} {'sampled':>8} {'greedy':>7} {'all fail':>8} {'mixed':>6} {'all solve':>9}")
    for level, row in [*rows.items(), ("all", total)]:
        print(f"{level:>5} {row['tasks']:>5} {row['sampled_success']:>8.3f} {row['greedy_success']:>7.3f} "
              f"{row['all_failed']:>8} {row['mixed']:>6} {row['all_solved']:>9}")
    print(json.dumps({"per_level": {str(k): v for k, v in rows.items()}, "all": total}))


if __name__ == "__main__":
    main()

"""Which difficulty measure predicts the agent's success? Rank correlation with sampled success on the dev set.

    .venv/bin/python benchmarks/difficulty_correlation.py [--preset default] [--dev-per-level 100] [--rollouts 16]
        [--run RUN_DIR] [overrides]

Warm-starts (or loads from the cache) the preset's agent, rolls out every dev task (never the held-out set)
``--rollouts`` times at the preset's sampling temperature, and prints Spearman's rank correlation between each
of the domain's ``difficulty_measures`` and the tasks' success rate p_hat, overall and within each level.
With ``--run``, the same for the tasks a run's simulator wrote (``samples/epoch_*.jsonl``, their logged p_hat).
"""

import json
import time
from pathlib import Path

import numpy as np
from _preset import preset_from_args

from genenv.domains import Task
from genenv.io import read_jsonl
from genenv.reward import success_rate
from genenv.rollout import rollout
from genenv.stats import rank_correlation
from genenv.warmstart import warm_start_agent


def correlations(domain, tasks: list[Task], p_hats: list[float]) -> dict:
    measures = [domain.difficulty_measures(t) for t in tasks]
    out = {"tasks": len(tasks), "overall": {name: rank_correlation([m[name] for m in measures], p_hats)
                                            for name in measures[0]}}
    for level in sorted({t.level for t in tasks}):
        picks = [i for i, t in enumerate(tasks) if t.level == level]
        out[f"level {level}"] = {name: rank_correlation([measures[i][name] for i in picks], [p_hats[i] for i in picks])
                                 for name in measures[0] if name != "level"}
    return out


def show(title: str, result: dict) -> None:
    print(f"{title} ({result['tasks']} tasks): Spearman rank correlation with p_hat")
    for scope, values in result.items():
        if scope != "tasks":
            print(f"  {scope:10s} " + "  ".join(f"{k} {'-' if v is None else format(v, '+.3f')}"
                                                 for k, v in values.items()))


def main() -> None:
    args, cfg, domain = preset_from_args(__doc__, {"--dev-per-level": {"type": int, "default": 100},
                                                   "--rollouts": {"type": int, "default": 16},
                                                   "--run": {"default": None}})
    if not hasattr(domain, "difficulty_measures"):
        raise SystemExit(f"domain {cfg.domain.name!r} has no difficulty_measures")
    start = time.perf_counter()
    agent, _ = warm_start_agent(cfg, domain)
    tasks = domain.dev_tasks(args.dev_per_level)
    groups = rollout(domain, agent, tasks, group_size=args.rollouts, temperature=cfg.agent.temperature, seed=cfg.seed,
                     max_new_tokens=min(cfg.agent.max_new_tokens, domain.agent_max_new_tokens),
                     batch_size=cfg.agent.generation_batch)
    p_hats = [success_rate([e.reward for e in g], cfg.curriculum_reward.success_threshold) for g in groups]
    show(f"warm-started agent on the dev set, {args.rollouts} rollouts per task", correlations(domain, tasks, p_hats))
    if args.run:
        written, written_p = [], []
        for path in sorted(Path(args.run, "samples").glob("epoch_*.jsonl")):
            for row in read_jsonl(path):
                if row["valid"] and row.get("p_hat_task") is not None:
                    written.append(domain.parse_task(row["task"]))
                    written_p.append(row["p_hat_task"])
        show(f"tasks written during {args.run}", correlations(domain, written, written_p))
    print(json.dumps({"seconds": round(time.perf_counter() - start), "dev_mean_p_hat": float(np.mean(p_hats))}))


if __name__ == "__main__":
    main()

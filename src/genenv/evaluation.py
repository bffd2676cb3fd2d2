"""Phase 8 of an epoch, and the warm start's evaluation: greedy success on the held-out (report only) and dev (for
choosing settings) sets, overall and per level, with the paper's single-step accuracy where a domain has an expert.
Below the loop: the run folder, the loop and ``genenv eval --benchmark heldout`` all score a model this way."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from genenv.config import RunConfig
from genenv.domains import Task
from genenv.domains.base import Domain
from genenv.metrics import level_means
from genenv.models.policy import Policy
from genenv.rollout import rollout, single_step_accuracy
from genenv.splits import DataSplit

if TYPE_CHECKING:
    from genenv.engine import Engine


def evaluate(cfg: RunConfig, domain: Domain, agent: Policy, tasks: list[Task], prefix: str = "heldout",
             engine: Engine | None = None, records: list | None = None) -> dict:
    """Phase 8: greedy success on a fixed set, overall and per level (and, for domains with an expert, the
    paper's single-step accuracy). Episodes run in shards, here or on the engine's workers. ``records``, when
    given, receives one row per task: its set, level, text, the agent's actions, reward and verdict."""
    groups = rollout(domain, agent, tasks, group_size=1, greedy=True,
                     max_new_tokens=min(cfg.agent.max_new_tokens, domain.agent_max_new_tokens),
                     batch_size=cfg.agent.generation_batch, max_context_tokens=cfg.agent.max_context_tokens,
                     run_shards=engine.run_shards if engine else None)
    threshold = cfg.curriculum_reward.success_threshold
    outcomes = [(task.level, float(group[0].reward >= threshold)) for task, group in zip(tasks, groups)]
    if records is not None:
        records.extend({"set": prefix, "level": task.level, "task": task.text,
                        "actions": [turn.action for turn in group[0].turns], "reward": float(group[0].reward),
                        "success": bool(success)} for task, group, (_, success) in zip(tasks, groups, outcomes))
    if not outcomes:
        return {f"{prefix}_success": None, f"{prefix}_by_level": None, f"{prefix}_reward_mean": None}
    result = {f"{prefix}_success": float(np.mean([v for _, v in outcomes])),
              f"{prefix}_by_level": level_means(outcomes),
              # partial credit where the domain gives it (travel: the share of constraint checks passed)
              f"{prefix}_reward_mean": float(np.mean([group[0].reward for group in groups]))}
    steps = single_step_accuracy(domain, agent, tasks, batch_size=cfg.agent.generation_batch,
                                 max_new_tokens=min(cfg.agent.max_new_tokens, domain.agent_max_new_tokens),
                                 max_context_tokens=cfg.agent.max_context_tokens)
    if steps is not None:
        verdicts = [(task.level, v) for task, task_verdicts in zip(tasks, steps) for v in task_verdicts]
        result[f"{prefix}_step_accuracy"] = float(np.mean([v for _, v in verdicts]))
        result[f"{prefix}_step_accuracy_by_level"] = level_means(verdicts)
    return result


def evaluate_all(cfg: RunConfig, domain: Domain, agent: Policy, split: DataSplit,
                 engine: Engine | None = None, records: list | None = None) -> dict:
    """Held-out (report only) and dev (for tuning) success."""
    return {**evaluate(cfg, domain, agent, split.dev, "dev", engine, records),
            **evaluate(cfg, domain, agent, split.heldout, "heldout", engine, records)}

"""The data split: held-out and dev sets, and the rule that no task of either is ever trained on.

Every task that can reach the agent's training passes one check, :meth:`DataSplit.exclude`: the seed set
(the base training data and the agent's warm start), the simulator's generations, the fixed sets of the
static and offline baselines (the offline teacher's tasks included). A task whose text equals a held-out or
dev task is rejected with a reason and counted like any other invalid task; the rule holds at any
``domain.heldout_per_level``.

A level with few distinct tasks cannot be split without cost (addition's level 1 has 100): the held-out and
dev sets take a share of it, training sees only the rest. :func:`level_accounts` says how much, per level,
for domains that know their levels' sizes (``Domain.level_size``); the run folder keeps it in
``data_split.json``, and the run's log and report say so.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from genenv.config import RunConfig
from genenv.domains.base import Domain, Invalid, Task
from genenv.seeding import stream_seed

HELDOUT_REASON = "equals a held-out task"
DEV_REASON = "equals a dev task"
SMALL_LEVEL_SHARE = 0.05   # a level whose evaluation sets take at least this share of it is reported


@dataclass(frozen=True)
class DataSplit:
    heldout: list[Task]
    dev: list[Task]
    heldout_texts: frozenset[str] = field(init=False)
    dev_texts: frozenset[str] = field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "heldout_texts", frozenset(t.text for t in self.heldout))
        object.__setattr__(self, "dev_texts", frozenset(t.text for t in self.dev))

    def exclude(self, task: Task | Invalid) -> Task | Invalid:
        """``task`` unless it is a held-out or dev task (then an ``Invalid`` saying which)."""
        if isinstance(task, Invalid):
            return task
        if task.text in self.heldout_texts:
            return Invalid(HELDOUT_REASON, task.text)
        if task.text in self.dev_texts:
            return Invalid(DEV_REASON, task.text)
        return task


def data_split(cfg: RunConfig, domain: Domain) -> DataSplit:
    per_level = cfg.domain.heldout_per_level
    return DataSplit(domain.heldout_tasks(per_level), domain.dev_tasks(per_level))


def training_seed_tasks(cfg: RunConfig, domain: Domain, split: DataSplit, max_rounds: int = 20) -> list[Task]:
    """``domain.num_seed_tasks`` distinct seed tasks, none of them a held-out or dev task.

    The domain draws its seed tasks; those that are evaluation tasks or repeats are dropped and the domain is
    asked again (the same random stream, continued) for several times as many as are missing, at most
    ``max_rounds`` times. A domain with fewer distinct seed tasks gives fewer (``data_split.json`` counts them)."""
    rng = np.random.default_rng(stream_seed(cfg.seed, "seed_tasks"))
    wanted = cfg.domain.num_seed_tasks
    tasks: list[Task] = []
    seen: set[str] = set()
    ask = wanted
    for _ in range(max_rounds):
        for task in domain.seed_tasks(rng, ask):
            if len(tasks) < wanted and task.text not in seen and isinstance(split.exclude(task), Task):
                seen.add(task.text)
                tasks.append(task)
        if len(tasks) >= wanted:
            break
        ask = 4 * (wanted - len(tasks)) + 16
    return tasks


def level_accounts(domain: Domain, split: DataSplit, seeds: list[Task]) -> dict:
    """Per level: distinct held-out and dev tasks, seed tasks, and, where the domain knows the level's size, how
    many tasks remain for training. ``small_levels`` lists the levels whose evaluation sets take at least
    ``SMALL_LEVEL_SHARE`` of them, each with a sentence saying so."""
    evaluation = {t.text: t.level for t in [*split.heldout, *split.dev]}
    heldout = Counter(t.level for t in {t.text: t for t in split.heldout}.values())
    dev = Counter(t.level for t in {t.text: t for t in split.dev}.values())
    taken = Counter(evaluation.values())
    seeded = Counter(t.level for t in seeds)
    levels, small = {}, []
    for level in domain.levels():
        size = domain.level_size(level)
        row = {"heldout": heldout[level], "dev": dev[level], "seed": seeded[level], "level_size": size,
               "left_for_training": None if size is None else size - taken[level]}
        levels[str(level)] = row
        if size and taken[level] >= SMALL_LEVEL_SHARE * size:
            small.append(f"level {level} has {size} distinct tasks; the held-out and dev sets take {taken[level]} "
                         f"of them, so training can see only the other {size - taken[level]}")
    return {"levels": levels, "small_levels": small, "seed_tasks": len(seeds),
            "heldout_tasks": len(split.heldout), "dev_tasks": len(split.dev)}

"""The evolving pools of Algorithm 1, persisted in the run's checkpoint.

- ``TaskPool`` (D_train): base seed tasks plus every valid generated task, each with its p_hat history.
  Seeds for the simulator and replay tasks for the agent are drawn from it.
- ``EnvPool`` (D_env): the weighted (context -> generated task) sets of the simulator updates.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from genenv.domains.base import Task


@dataclass
class PoolEntry:
    task: Task
    source: str                 # "seed" or "generated"
    epoch: int                  # epoch it joined (-1 for seed tasks)
    p_hat_history: list[float] = field(default_factory=list)


class TaskPool:
    """Every change is also recorded as an event (``pending``), so checkpoints append only what is new."""

    def __init__(self, entries: list[PoolEntry] | None = None):
        self.entries: list[PoolEntry] = list(entries or [])
        self._index = {e.task.text: i for i, e in enumerate(self.entries)}
        self._by_level: dict[int, list[int]] = {}
        for i, e in enumerate(self.entries):
            self._by_level.setdefault(e.task.level, []).append(i)
        self.pending: list[dict] = []
        # every p_hat recorded, in order: (entry index, p_hat) (genenv.learning_progress reads the latest; a pool
        # built from entries lists theirs entry by entry)
        self.outcomes: list[tuple[int, float]] = [(i, p) for i, e in enumerate(self.entries) for p in e.p_hat_history]

    def __len__(self) -> int:
        return len(self.entries)

    def add(self, task: Task, source: str, epoch: int, p_hat: float | None = None) -> None:
        """Add a task, or record a new p_hat for one already in the pool."""
        index = self._index.get(task.text)
        if index is None:
            index = self._index[task.text] = len(self.entries)
            self.entries.append(PoolEntry(task, source, epoch))
            self._by_level.setdefault(task.level, []).append(index)
            self.pending.append({"add": task.to_json(), "source": source, "epoch": epoch})
        if p_hat is not None:
            self.entries[index].p_hat_history.append(float(p_hat))
            self.outcomes.append((index, float(p_hat)))
            self.pending.append({"p_hat": float(p_hat), "index": index})

    def joined_before(self, text: str, epoch: int) -> bool:
        """Whether the task ``text`` was in the pool before ``epoch`` (seed tasks joined at -1)."""
        index = self._index.get(text)
        return index is not None and self.entries[index].epoch < epoch

    def apply(self, event: dict) -> None:
        """Replay one recorded event (resume)."""
        if "add" in event:
            task = Task.from_json(event["add"])
            self._by_level.setdefault(task.level, []).append(len(self.entries))
            self._index[task.text] = len(self.entries)
            self.entries.append(PoolEntry(task, event["source"], event["epoch"]))
        else:
            self.entries[event["index"]].p_hat_history.append(event["p_hat"])
            self.outcomes.append((event["index"], event["p_hat"]))

    def indices_by_level(self) -> dict[int, list[int]]:
        """The entries' indices per task level, in the order they joined (kept as tasks are added)."""
        return self._by_level

    def last_p_hat(self, task: Task) -> float | None:
        index = self._index.get(task.text)
        if index is None or not self.entries[index].p_hat_history:
            return None
        return self.entries[index].p_hat_history[-1]

    def sample(self, rng: np.random.Generator, n: int) -> list[Task]:
        if not self.entries or n <= 0:
            return []
        picks = rng.choice(len(self.entries), size=n, replace=n > len(self.entries))
        return [self.entries[i].task for i in picks]

    def sample_by_learnability(self, rng: np.random.Generator, n: int, floor: float = 0.01) -> list[Task]:
        """Draw ``n`` distinct tasks with probability proportional to max(p (1 - p), floor), p the task's last
        p_hat (a task never rolled out counts as p = 0.5, the most learnable: it gets explored first)."""
        if not self.entries or n <= 0:
            return []
        p = np.array([e.p_hat_history[-1] if e.p_hat_history else 0.5 for e in self.entries])
        # + 1e-12: with floor 0, settled tasks are drawn only when fewer than n tasks have any weight
        weights = np.maximum(p * (1.0 - p), floor) + 1e-12
        picks = rng.choice(len(self.entries), size=n, replace=n > len(self.entries), p=weights / weights.sum())
        return [self.entries[i].task for i in picks]

@dataclass
class EnvExample:
    context: str
    prompt_ids: list[int]
    target_ids: list[int]
    r_env: float
    epoch: int


class EnvPool:
    def __init__(self, examples: list[EnvExample] | None = None):
        self.examples: list[EnvExample] = list(examples or [])
        self.pending: list[dict] = []

    def __len__(self) -> int:
        return len(self.examples)

    def extend(self, examples: list[EnvExample]) -> None:
        self.examples.extend(examples)
        self.pending.extend(dict(e.__dict__) for e in examples)

    def apply(self, event: dict) -> None:
        self.examples.append(EnvExample(**event))

    def before(self, epoch: int) -> list[EnvExample]:
        return [e for e in self.examples if e.epoch < epoch]

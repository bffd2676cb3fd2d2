"""Curricula: what the agent trains on each epoch, and whether the simulator learns (one class each).

Every curriculum runs the same loop (:mod:`genenv.coevolve`) with the same agent rollouts per epoch; they
differ only in the answers to three questions, which the loop asks and never tests names:

- ``generates``: does the simulator write this epoch's fresh tasks (else every slot is drawn from the pool)?
- ``trains_simulator``: is the simulator updated on the curriculum reward of its tasks?
- ``fixed_set`` / ``draw``: which set is written once before training, and how tasks are drawn from the pool.

A new curriculum is one class registered with ``@register_curriculum("name")``; ``curriculum=name`` then
selects it (import its module before the config is loaded, e.g. from a domain plugin).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

import numpy as np

from genenv.config import ConfigError
from genenv.domains.base import Domain, Task, registrar
from genenv.generation import Candidate, write_tasks
from genenv.pool import TaskPool
from genenv.seeding import phase_seed

if TYPE_CHECKING:
    from genenv.config import RunConfig
    from genenv.models.policy import Policy

_REGISTRY: dict[str, type[Curriculum]] = {}
register_curriculum = registrar(_REGISTRY)   # ``@register_curriculum("mine")``: ``curriculum=mine`` selects it


def curriculum_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


def make_curriculum(name: str) -> Curriculum:
    if name not in _REGISTRY:
        raise ConfigError(f"curriculum: {name!r} is not a curriculum; choose one of {', '.join(_REGISTRY)}")
    return _REGISTRY[name]()


class Curriculum:
    """Base class: the simulator does not write tasks, nothing is written before training, draws are uniform."""
    name: ClassVar[str] = "base"
    generates: ClassVar[bool] = False
    trains_simulator: ClassVar[bool] = False

    def fixed_set(self, cfg: RunConfig, domain: Domain, env: Policy, seeds: list[Task],
                  rng: np.random.Generator) -> tuple[list[Candidate], str] | None:
        """The training set written once before training (not validated yet) and who wrote it; None: none."""
        return None

    def draw(self, cfg: RunConfig, pool: TaskPool, rng: np.random.Generator, n: int) -> list[Task]:
        """``n`` tasks from the training pool: the replay slots (and the slots of invalid generations) of a
        generative curriculum, every slot of a fixed-data one."""
        return pool.sample(rng, n)


@register_curriculum("genenv")
class GenEnv(Curriculum):
    """The simulator writes every epoch's fresh tasks and learns from their curriculum reward (the paper)."""
    generates = True
    trains_simulator = True


@register_curriculum("random")
class RandomSimulator(Curriculum):
    """The simulator writes every epoch's tasks but never learns (paper's GenEnv-Random)."""
    generates = True


@register_curriculum("static")
class Static(Curriculum):
    """``baseline.static_variations`` simulator variations per seed task, written once (paper's GenEnv-Static)."""

    def fixed_set(self, cfg, domain, env, seeds, rng):
        return write_once(cfg, domain, env, seeds, cfg.baseline.static_variations), "simulator"


@register_curriculum("offline")
class Offline(Curriculum):
    """``(baseline.offline_multiplier - 1) x`` as many tasks as seeds, written once by a frozen generator: the
    domain's own (valid tasks of every level, the strong-teacher analogue of Gemini) or the warm-started
    simulator (paper's Gemini-Offline rows)."""

    def fixed_set(self, cfg, domain, env, seeds, rng):
        extra = int(round((cfg.baseline.offline_multiplier - 1.0) * len(seeds)))
        if cfg.baseline.offline_generator == "domain":
            return [Candidate(-1, task, "", [], [], task.text, task) for task in domain.reference_tasks(rng, extra)], \
                "domain"
        picks = rng.choice(len(seeds), size=extra, replace=True)
        return write_once(cfg, domain, env, [seeds[i] for i in picks], 1), "simulator"


@register_curriculum("learnability")
class Learnability(Static):
    """The static set, no generation; tasks drawn with probability proportional to p (1 - p) of their last
    rollouts (never-tried tasks count as 0.5): a strong non-generative baseline."""

    def draw(self, cfg, pool, rng, n):
        return pool.sample_by_learnability(rng, n, cfg.baseline.learnability_floor)


def write_once(cfg: RunConfig, domain: Domain, env: Policy, seeds: list[Task], n: int) -> list[Candidate]:
    """A fixed set's generations: no success statistics in the prompt (nothing is known before training)."""
    return write_tasks(cfg, domain, env, seeds, [None] * len(seeds), n, phase_seed(cfg.seed, -1, "fixed_set_generate"))

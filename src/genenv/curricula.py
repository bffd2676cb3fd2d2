"""Curricula: what the agent trains on each epoch, and whether the simulator learns (one class each).

Every curriculum runs the same loop (:mod:`genenv.coevolve`) with the same agent rollouts per epoch; they
differ only in the answers to three questions, which the loop asks and never tests names:

- ``generates``: are fresh tasks written every epoch (else every slot is drawn from the pool)? By the
  simulator, unless ``fresh_tasks`` writes them itself (the oracle: the domain's own generator).
- ``trains_simulator``: is the simulator updated on the curriculum reward of its tasks?
- ``fixed_set`` / ``draw``: which set is written once before training, and how tasks are drawn from the pool.

A new curriculum is one class registered with ``@register_curriculum("name")``; ``curriculum=name`` then
selects it (import its module before the config is loaded, e.g. from a domain plugin).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from genenv.config import ConfigError
from genenv.domains.base import Domain, Invalid, Task, registrar
from genenv.io import atomic_write_json, atomic_write_jsonl
from genenv.pool import TaskPool
from genenv.reward import level_success
from genenv.seeding import phase_rng, phase_seed
from genenv.signals import choose_level
from genenv.signals import information_used as strategy_information
from genenv.splits import DataSplit

if TYPE_CHECKING:
    from genenv.config import RunConfig
    from genenv.generation import Candidate
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

    def check(self, domain: Domain) -> None:
        """Raise a ConfigError when this curriculum cannot run on ``domain`` (before anything is trained)."""

    def fresh_tasks(self, cfg: RunConfig, domain: Domain, pool: TaskPool, epoch: int) -> list[Candidate] | None:
        """The epoch's fresh tasks (not validated yet) when the curriculum writes them itself; None: the simulator
        writes them (when ``generates``)."""
        return None

    def fixed_set(self, cfg: RunConfig, domain: Domain, env: Policy, seeds: list[Task], rng: np.random.Generator,
                  journal: Path | None = None, constraint=None) -> tuple[list[Candidate], str] | None:
        """The training set written once before training (not validated yet) and who wrote it; None: none.
        ``journal``: where the simulator's shards are kept as they are written (:func:`write_once`), so a run
        killed while writing resumes where it stopped; ``constraint``: the simulator's task shape
        (``env.constrained``), for the simulator's generations."""
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

    def fixed_set(self, cfg, domain, env, seeds, rng, journal=None, constraint=None):
        return write_once(cfg, domain, env, seeds, cfg.baseline.static_variations, journal, constraint), "simulator"


@register_curriculum("offline")
class Offline(Curriculum):
    """``(baseline.offline_multiplier - 1) x`` as many tasks as seeds, written once by a frozen generator: the
    domain's own (valid tasks of every level, the strong-teacher analogue of Gemini) or the warm-started
    simulator (paper's Gemini-Offline rows)."""

    def fixed_set(self, cfg, domain, env, seeds, rng, journal=None, constraint=None):
        from genenv.generation import Candidate  # noqa: PLC0415 (torch: imported when a run needs it)
        extra = int(round((cfg.baseline.offline_multiplier - 1.0) * len(seeds)))
        if cfg.baseline.offline_generator == "domain":
            return [Candidate(-1, task, "", [], [], task.text, task) for task in domain.reference_tasks(rng, extra)], \
                "domain"
        picks = rng.choice(len(seeds), size=extra, replace=True)
        return write_once(cfg, domain, env, [seeds[i] for i in picks], 1, journal, constraint), "simulator"


@register_curriculum("learnability")
class Learnability(Static):
    """The static set, no generation; tasks drawn with probability proportional to p (1 - p) of their last
    rollouts (never-tried tasks count as 0.5): a strong non-generative baseline."""

    def draw(self, cfg, pool, rng, n):
        return pool.sample_by_learnability(rng, n, cfg.baseline.learnability_floor)


@register_curriculum("oracle")
class Oracle(Curriculum):
    """The upper reference: a perfect teacher. The domain's own generator writes every fresh task, at the level
    the frontier rule picks (:func:`genenv.signals.choose_level`, :func:`genenv.signals.frontier_level`): the easiest
    level not yet mastered. A level never tried comes first, and with probability
    ``baseline.oracle_exploration`` the level is uniform. Needs a domain that
    draws tasks by level (``random_task(rng, level)``, e.g. a LeveledDomain); the simulator is never used.

    Why not the level closest to alpha: a tiny agent is nearly deterministic per task, so a level's p_hat is
    bimodal; with the mean rule the oracle trained on a mastered level (mean 0.9) whenever the next one sat at
    0.05, because 0.4 < 0.45, and the band rule does the same while the next level has no task in the band.
    The frontier rule moves on (held-out 0.449 against 0.392 for band over 8 seeds, docs/results-log.md; the band
    rule is experimental)."""
    generates = True

    def check(self, domain):
        if not callable(getattr(domain, "random_task", None)):
            raise ConfigError(f"curriculum: oracle needs a domain that draws a task at a given level "
                              f"(random_task(rng, level)); {domain.name!r} does not")

    def fresh_tasks(self, cfg, domain, pool, epoch):
        from genenv.generation import Candidate  # noqa: PLC0415
        rng = phase_rng(cfg.seed, epoch, "oracle")
        bc, cr = cfg.baseline, cfg.curriculum_reward
        stats = level_success(pool, domain.levels(), bc.oracle_window, cr.alpha, cr.k_min)
        out = []
        for batch in range(cfg.seeds_per_epoch):
            level = choose_level(stats, bc.oracle_exploration, rng, mastered=cr.alpha + cr.k_min)
            for _ in range(cfg.env.variations):
                task = domain.random_task(rng, level)
                out.append(Candidate(batch, task, "", [], [], task.text, Invalid("unparsed")))
        return out


PAPER_INFORMATION = "paper"   # what the paper's method knows: the seed tasks, the verifier, the agent's rollouts


def information_used(cfg: RunConfig) -> tuple[str, ...]:
    """What a run's method knows beyond the paper's (the seed tasks, the verifier, the agent's rollouts and the
    simulator): () for none. Each entry names the setting: the domain's difficulty levels read in training (the
    oracle's information) or the domain's own generator. A comparison names it beside each arm, so a method given
    more is compared with a control given the same."""
    curriculum = make_curriculum(cfg.curriculum)
    out = []
    if cfg.curriculum == "oracle":
        out.append("domain levels + generator (oracle)")
    # the seed draw and gate (a gate implies env.update=pg); the oracle writes its own tasks, no seeds
    out.extend(strategy_information(cfg, curriculum.generates and cfg.curriculum != "oracle",
                                    curriculum.trains_simulator))
    if cfg.curriculum == "offline" and cfg.baseline.offline_generator == "domain":
        out.append("domain generator (offline)")
    if cfg.curriculum != "oracle" and cfg.domain.options.get("variation_span") is not None:
        out.append("domain levels (simulator warm-start corpus: variation_span)")
    return tuple(out)


def information_label(cfg: RunConfig) -> str:
    """:func:`information_used` as one short text: ``paper`` or ``paper + ...``."""
    used = information_used(cfg)
    return PAPER_INFORMATION if not used else PAPER_INFORMATION + " + " + "; ".join(used)


def write_once(cfg: RunConfig, domain: Domain, env: Policy, seeds: list[Task], n: int,
               journal: Path | None = None, constraint=None) -> list[Candidate]:
    """A fixed set's generations: no success statistics in the prompt (nothing is known before training). Shards
    already in ``journal`` are read back, not written again (a run killed while writing resumes there)."""
    from genenv.generation import simulator_sampling, write_tasks  # noqa: PLC0415
    return write_tasks(domain, env, seeds, [None] * len(seeds), n, phase_seed(cfg.seed, -1, "fixed_set_generate"),
                       **simulator_sampling(cfg, domain),
                       progress=f"{cfg.curriculum} set (generations)" if cfg.progress else None, journal=journal,
                       constraint=constraint)


def add_fixed_set(cfg: RunConfig, domain: Domain, pool: TaskPool, seeds: list[Task], split: DataSplit,
                  written: list[Candidate], generator: str, run_dir: Path, log) -> dict:
    """A fixed-data curriculum's set, written once before training: validated like any generation, the valid
    tasks join the training pool next to the seeds, every rejection is counted. Recorded in ``fixed_set.json``
    and ``samples/fixed_set.jsonl``."""
    from genenv.generation import validated  # noqa: PLC0415
    written = validated(domain, written, split)
    before = len(pool)
    for item in written:
        if item.valid:
            pool.add(item.parsed, cfg.curriculum, -1)
    valid = [g for g in written if g.valid]
    summary = {"curriculum": cfg.curriculum, "seed_tasks": len(seeds), "generated": len(written),
               "valid": len(valid), "added": len(pool) - before, "size": len(pool),
               "invalid_reasons": dict(Counter(g.parsed.reason for g in written if not g.valid)),
               "level_histogram": dict(sorted(Counter(str(g.parsed.level) for g in valid).items())),
               "generator": generator}
    atomic_write_json(run_dir / "fixed_set.json", summary)
    atomic_write_jsonl(run_dir / "samples" / "fixed_set.jsonl",
                       [{"seed": g.seed.text, "generated": g.raw, "valid": g.valid,
                         "reason": None if g.valid else g.parsed.reason,
                         "level": g.parsed.level if g.valid else None} for g in written])
    log(f"{cfg.curriculum} training set: {summary['size']} tasks ({len(seeds)} seeds + {summary['added']} "
        f"written once; {len(written) - len(valid)} of {len(written)} generations invalid)")
    return summary


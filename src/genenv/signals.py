"""What the simulator is shown and paid: small strategies built from the config.

Where the main path has a real choice, a registry holds the choices and a config field selects one; the loop calls
the selected strategy with values and never tests an option's name:

- :data:`SEED_DRAWS` (``env.seed_draw``): which pool tasks the simulator writes variations of (its prompts).
- :data:`GATES` (``env.pg.gate``): which valid generations may earn the pg update's reward.

Where it has one answer, that answer is a plain class: :class:`AlphaSignal`, what a generation earns under the pg
update (R_env rescaled, the paper's reward). An experiment may put another class in its place (:data:`MAIN_PARTS`)
through the one hook for experiments, :func:`add_replacement`; the loop asks :func:`part` for it. (p_hat is k / n,
:func:`genenv.reward.success_rate`, and the oracle's level the frontier's, :func:`frontier_level`: their
alternatives, posterior and band, were retired in issue 94.)

Experiments come from plugins, through the ``genenv.strategies`` entry-point group (genenv's own options that lost
their decision rule are one): nothing here imports them or knows their names. A plugin registers strategies into the
registries, replaces parts (:func:`add_replacement`), and may add a check of the config (:func:`add_config_check`,
run by :func:`check_config`), a part of ``genenv config --describe`` (:func:`add_description`) and a reader of its
options' old spellings (:func:`add_old_spellings`, defined in :mod:`genenv.plugins`, below the config). A plugin's
strategy reads its own settings from the config (``read_options``).
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

import numpy as np

from genenv.config import ConfigError, knob_value
from genenv.plugins import add_old_spellings, load_plugins  # noqa: F401 (a plugin finds every hook here)
from genenv.reward import (
    LevelSuccess,
    challenger_rewards,
    frontier_reward,
    group_success,
    level_gate,
    level_success,
    open_levels,
)
from genenv.text_difficulty import learnt_levels

if TYPE_CHECKING:
    from genenv.config import RunConfig
    from genenv.domains.base import Domain, Task
    from genenv.pool import TaskPool

class Strategy(abc.ABC):
    """Base of every registered strategy: built from the run's config.

    ``information``: what it knows beyond the paper's method (the seed tasks, the verifier, the agent's rollouts),
    e.g. "domain levels"; None for nothing more. ``self.options``: the strategy's own settings, as its
    ``read_options`` reads them from the config (none for the main path's, whose settings are config fields). Each
    kind declares the method its strategies answer with as abstract: a class that lacks it is refused when it is
    built."""
    name: ClassVar[str] = "base"
    setting: ClassVar[str] = ""   # what selects it, knob=name ("" for a main-path part: nothing selects it)
    information: ClassVar[str | None] = None

    def __init__(self, cfg: RunConfig):
        self.cfg = cfg
        self.options = self.read_options(cfg)

    @classmethod
    def read_options(cls, cfg: RunConfig):
        """The strategy's settings from ``cfg`` (a plugin's strategy reads its own section); None: it has none."""
        return None


class Registry:
    """Strategies of one kind by name, selected by the config field ``knob``."""

    def __init__(self, kind: str, knob: str):
        self.kind, self.knob = kind, knob
        self.entries: dict[str, type[Strategy]] = {}

    def register(self, name: str):
        """``@REGISTRY.register("name")``: the class answers for ``<knob>=name``."""
        def wrap(cls):
            self.entries[name] = cls
            cls.name, cls.setting = name, f"{self.knob}={name}"
            return cls
        return wrap

    def names(self) -> tuple[str, ...]:
        load_plugins()
        return tuple(self.entries)

    def get(self, name: str) -> type[Strategy]:
        load_plugins()
        if name not in self.entries:
            raise ConfigError(f"{self.knob}: {name!r} is not a {self.kind}; choose one of {', '.join(self.entries)}")
        return self.entries[name]

    def selected(self, cfg: RunConfig) -> type[Strategy]:
        """The class ``cfg`` selects."""
        return self.get(knob_value(cfg, self.knob))

    def make(self, cfg: RunConfig) -> Strategy:
        """The strategy ``cfg`` selects, built from it."""
        return self.selected(cfg)(cfg)


# ============================================================================ seed draws


class SeedDraw(Strategy):
    """``env.seed_draw``: the epoch's seed tasks from the training pool."""

    @abc.abstractmethod
    def draw(self, pool: TaskPool, rng: np.random.Generator, epoch: int) -> list[Task]:
        """The epoch's ``seeds_per_epoch`` seed tasks."""


SEED_DRAWS = Registry("seed draw", "env.seed_draw")


@SEED_DRAWS.register("uniform")
class UniformSeeds(SeedDraw):
    """Uniform over the pool (the paper)."""

    def draw(self, pool, rng, epoch):
        return pool.sample(rng, self.cfg.seeds_per_epoch)


def frontier_rule(cfg: RunConfig) -> dict:
    """The frontier rule's values (the oracle's and the frontier seed draw's), from the config."""
    cr, bc = cfg.curriculum_reward, cfg.baseline
    return dict(alpha=cr.alpha, k_min=cr.k_min, window=bc.oracle_window, exploration=bc.oracle_exploration)


@SEED_DRAWS.register("frontier")
class FrontierSeeds(SeedDraw):
    """Each seed from the pool's tasks of the level the oracle's frontier rule picks (:func:`frontier_seeds`)."""
    information = "domain levels"

    def draw(self, pool, rng, epoch):
        return frontier_seeds(pool, self.cfg.seeds_per_epoch, rng, **frontier_rule(self.cfg))


@SEED_DRAWS.register("learnt_frontier")
class LearntFrontierSeeds(SeedDraw):
    """The frontier draw over levels the pool learns (:func:`genenv.text_difficulty.learnt_levels`: its tasks in
    ``env.learnt_levels.bins`` groups by the success their text predicts), no domain levels: each seed from the
    group the oracle's frontier rule picks; a uniform draw before anything was rolled out."""

    def draw(self, pool, rng, epoch):
        levels = self.cfg.env.learnt_levels
        groups = learnt_levels(pool, levels.bins, levels.window)
        if groups is None:
            return pool.sample(rng, self.cfg.seeds_per_epoch)
        return frontier_seeds(pool, self.cfg.seeds_per_epoch, rng, groups=groups, **frontier_rule(self.cfg))


# ============================================================================ level rules (the oracle's choice)


def frontier_level(stats: dict[int, LevelSuccess], mastered: float) -> int:
    """The easiest level whose mean recent success is below ``mastered`` (alpha + k_min: not yet solved
    reliably); the hardest level when every level is mastered."""
    levels = [lv for lv in sorted(stats) if stats[lv].mean < mastered]
    return int(levels[0] if levels else max(stats))


def choose_level(stats: dict[int, LevelSuccess | None], exploration: float, rng: np.random.Generator,
                 mastered: float = 0.75) -> int:
    """A uniform level with probability ``exploration``; else a level never tried; else the frontier level
    (:func:`frontier_level`)."""
    levels = list(stats)
    if rng.random() < exploration:
        return int(levels[rng.integers(len(levels))])
    untried = [lv for lv in levels if stats[lv] is None]
    if untried:
        return int(untried[rng.integers(len(untried))])
    return frontier_level(stats, mastered)


def frontier_seeds(pool: TaskPool, n: int, rng: np.random.Generator, *, alpha: float, k_min: float, window: int,
                   exploration: float, groups: dict[int, list[int]] | None = None) -> list[Task]:
    """``n`` seed tasks for the simulator, each drawn uniformly from the pool's tasks of one level, the level
    chosen as the oracle chooses its own (:func:`choose_level`, frontier rule: the easiest level whose recent mean
    success is below alpha + k_min, a level never rolled out first, a uniform level with probability
    ``exploration``). The simulator still writes the tasks; this only says which of the pool's tasks it varies.
    Levels are those present in the pool (a level the pool lacks cannot be varied), or ``groups`` (ordered
    easiest first) standing in for them."""
    if groups is None:
        by_level = pool.indices_by_level()
        groups = {level: by_level[level] for level in sorted(by_level)}
    if not groups or n <= 0:
        return []
    stats = group_success(pool, groups, window, alpha, k_min)
    seeds = []
    for _ in range(n):
        group = choose_level(stats, exploration, rng, mastered=alpha + k_min)
        members = groups[group]
        seeds.append(pool.entries[members[rng.integers(len(members))]].task)
    return seeds


# ============================================================================ gates


class Gate(Strategy):
    """``env.pg.gate``: which valid generations may earn the pg reward, read after the epoch's rollouts joined the
    pool. ``needs_ordered_levels``: refused at start on a domain that does not declare them."""
    needs_ordered_levels: ClassVar[bool] = False

    def predicate(self, domain: Domain, pool: TaskPool) -> Callable | None:
        """A predicate on a candidate (True: it may earn), or None for every one."""
        return None


GATES = Registry("gate", "env.pg.gate")


@GATES.register("none")
class NoGate(Gate):
    """Every valid task may earn (the paper's information)."""


@GATES.register("levels")
class LevelGate(Gate):
    """Only a task on a level the agent has not mastered: a level's mean last p_hat over its
    ``env.pg.gate_window`` latest rolled-out pool tasks below ``env.pg.gate_mastered``; a level never rolled out is
    open (its first tasks are paid); the hardest level when all are mastered."""
    information = "domain levels"
    needs_ordered_levels = True

    def predicate(self, domain, pool):
        pg, cr = self.cfg.env.pg, self.cfg.curriculum_reward
        return level_gate(open_levels(level_success(pool, domain.levels(), pg.gate_window, cr.alpha, cr.k_min),
                                      pg.gate_mastered))


# ============================================================================ signals


class Signal(Strategy):
    """What each generation earns under the pg update (:meth:`rewards`).

    :meth:`before_agent_update` is the one hook for what a signal must read before the agent's update: the loop
    calls it every epoch, after scoring (timed with the agent's update), a no-op by default; a signal that reads
    the agent or the pool reads it there, keeps what it read for its :meth:`rewards`, and returns its own metrics,
    which join the epoch's row. ``reads_agent``: it needs the agent's weights (refused where another trainer holds
    them)."""
    reads_agent: ClassVar[bool] = False

    def before_agent_update(self, domain, agent, state, generated: list, epoch: int) -> dict:
        """This signal's metrics for the epoch's row, after reading what its rewards need; nothing by default."""
        return {}

    @abc.abstractmethod
    def rewards(self, generated: list, gate: Callable | None) -> list[float]:
        """Every generation's reward, in order: ``gate`` (None: every valid task) names the valid tasks that may
        earn (the others earn 0, what a useless valid task earns)."""


class AlphaSignal(Signal):
    """R_env rescaled to [0, 1] (:func:`genenv.reward.frontier_reward`): the paper's reward under pg (0 for a task
    always solved or always failed when alpha = 0.5, 1 at alpha); an invalid generation earns 0."""

    def paid(self, candidate) -> float:
        """A valid task's reward (before the gate)."""
        cr = self.cfg.curriculum_reward
        return float(frontier_reward(candidate.r_env, cr.alpha, cr.beta))

    def rewards(self, generated, gate):
        return challenger_rewards(generated, self.paid, gate)


# ============================================================================ the one hook for experiments

# the main path's one answer for each part where it has no choice: the class an experiment may replace
MAIN_PARTS: dict[str, type[Strategy]] = {"signal": AlphaSignal}
REPLACEMENTS: list[Callable[[RunConfig, str], type[Strategy] | None]] = []   # add_replacement


def add_replacement(replace: Callable[[RunConfig, str], type[Strategy] | None]) -> None:
    """A plugin's hook: ``replace(cfg, name)`` returns the class ``cfg`` puts in the place of the main path's part
    ``name`` (a key of :data:`MAIN_PARTS`; a subclass of the same kind), or None to leave it (it may raise a
    ConfigError naming the field that selects it)."""
    if replace not in REPLACEMENTS:
        REPLACEMENTS.append(replace)


def part(cfg: RunConfig, name: str) -> type[Strategy]:
    """The class of part ``name`` (:data:`MAIN_PARTS`) in this run: the main path's, unless an experiment the config
    selects replaces it."""
    load_plugins()
    for replace in REPLACEMENTS:
        cls = replace(cfg, name)
        if cls is not None:
            return cls
    return MAIN_PARTS[name]


REGISTRIES = (SEED_DRAWS, GATES)


# ============================================================================ the config's view


def selected(cfg: RunConfig) -> list[type[Strategy]]:
    """The strategy of each registry that ``cfg`` selects, then each part's (:func:`part`); a ConfigError names an
    unknown one's field."""
    return [*(registry.selected(cfg) for registry in REGISTRIES), *(part(cfg, name) for name in MAIN_PARTS)]


CONFIG_CHECKS: list[Callable[[RunConfig], None]] = []          # plugins' checks of a config (add_config_check)
DESCRIPTIONS: list[Callable[[RunConfig | None], tuple[str, list]]] = []   # their parts of --describe


def add_config_check(check: Callable[[RunConfig], None]) -> None:
    """A plugin's check of a run's config, run by :func:`check_config` after the registries' (it may raise a
    ConfigError naming a field, and fill in or drop the settings it owns)."""
    if check not in CONFIG_CHECKS:
        CONFIG_CHECKS.append(check)


def add_description(describe: Callable[[RunConfig | None], tuple[str, list]]) -> None:
    """A plugin's part of ``genenv config --describe``: called with the config (or None), it returns a heading and
    (name, value, help) rows."""
    if describe not in DESCRIPTIONS:
        DESCRIPTIONS.append(describe)


def check_config(cfg: RunConfig) -> None:
    """Every registry's selection names a registered strategy; then every plugin's check of the config."""
    selected(cfg)
    for check in CONFIG_CHECKS:
        check(cfg)


def plugin_descriptions(cfg: RunConfig | None = None) -> list[tuple[str, list]]:
    """The plugins' parts of ``genenv config --describe``: (heading, rows) each."""
    load_plugins()
    return [describe(cfg) for describe in DESCRIPTIONS]


def information_used(cfg: RunConfig, generates: bool, trains_simulator: bool) -> list[str]:
    """What the selected seed draw and gate know beyond the paper, each naming its setting (the seed draw when the
    simulator writes tasks, the gate when it is trained)."""
    out = []
    for registry, applies in ((GATES, trains_simulator), (SEED_DRAWS, generates)):
        cls = registry.selected(cfg)
        if applies and cls.information:
            out.append(f"{cls.information} ({registry.knob}={cls.name})")
    return out


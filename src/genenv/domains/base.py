"""The Domain protocol: the one thing a user writes to add a task family.

A domain says what a task is (``Task``), how the simulator is prompted and how its text is parsed
(``simulator_prompt``, ``parse_task``), how a task is grounded (``validate``: the simulator proposes, the
domain decides what is true), and how an agent is scored: ``score`` for single-turn domains, or
``reset``/``step`` for multi-turn ones (Gymnasium-style: terminated and truncated are distinct).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np


@dataclass(frozen=True)
class Task:
    """A task the agent can attempt.

    ``text`` is the canonical serialisation (what the simulator writes and what pools store);
    ``prompt`` is the agent's first observation; ``answer`` the grounded reference; ``level`` an integer
    difficulty bucket used for per-level evaluation.
    """
    text: str
    prompt: str
    answer: str | None = None
    level: int = 0
    meta: dict = field(default_factory=dict, hash=False, compare=False)

    def to_json(self) -> dict:
        return {"text": self.text, "prompt": self.prompt, "answer": self.answer, "level": self.level,
                "meta": dict(self.meta)}

    @classmethod
    def from_json(cls, data: dict) -> "Task":
        return cls(**data)


@dataclass(frozen=True)
class Invalid:
    """A rejected simulator output, with the reason (counted and written to the samples file)."""
    reason: str
    text: str = ""


@dataclass
class StepResult:
    observation: str
    reward: float
    terminated: bool
    truncated: bool
    state: Any = None


class Domain:
    """Base class. Single-turn domains implement ``score``; multi-turn ones override ``reset``/``step``.

    Subclasses set ``name`` and ``alphabet`` (characters the tiny tokenizer must cover; ``None`` for a
    domain meant for real tokenizers), optionally ``tiny_words`` (whole words the tiny tokenizer keeps as one
    token each, see :mod:`genenv.models.tiny`), and implement the methods below that raise.
    """

    name: str = "base"
    alphabet: str | None = None
    tiny_words: tuple[str, ...] = ()
    multi_turn: bool = False
    max_turns: int = 1
    agent_max_new_tokens: int = 16
    env_max_new_tokens: int = 32
    format_version: int = 1     # bump when task texts or prompts change: cached warm starts then retrain

    # -------------------------------------------------------------- data
    def seed_tasks(self, rng: np.random.Generator, n: int) -> list[Task]:
        """Base training data: the paper's original training samples (easy levels)."""
        raise NotImplementedError

    def heldout_tasks(self, per_level: int) -> list[Task]:
        """Fixed evaluation set over every level. Deterministic; never trained on (the library rejects any
        training task whose text equals one of these or a dev task)."""
        raise NotImplementedError

    def dev_tasks(self, per_level: int) -> list[Task]:
        """A fixed development set, disjoint in sampling from the held-out set: tune hyperparameters here."""
        return []

    def simulator_corpus(self, rng: np.random.Generator, n: int) -> list[tuple[Task, dict, Task]]:
        """(seed, stats, task) triples of every difficulty: the simulator's warm-start 'world knowledge'."""
        raise NotImplementedError

    def reference_tasks(self, rng: np.random.Generator, n: int) -> list[Task]:
        """Valid tasks of every difficulty written by the domain itself: the 'strong frozen teacher' of the
        offline-augmentation baseline. Default: the tasks of ``simulator_corpus``."""
        return [task for _, _, task in self.simulator_corpus(rng, n)]

    def levels(self) -> list[int]:
        raise NotImplementedError

    def level_size(self, level: int) -> int | None:
        """How many distinct tasks ``level`` has, where that is known and small enough to matter (None: not
        known, or effectively unlimited). Used to report levels the held-out and dev sets take a share of."""
        return None

    # -------------------------------------------------------------- simulator side
    def simulator_prompt(self, seed: Task, stats: dict) -> str:
        raise NotImplementedError

    def parse_task(self, text: str) -> Task | Invalid:
        """Parse untrusted simulator text. Must never raise."""
        raise NotImplementedError

    def validate(self, task: Task) -> Task | Invalid:
        """Ground a parsed task (recompute its answer, check feasibility). Default: accept."""
        return task

    def difficulty(self, task: Task) -> float:
        """An interpretable difficulty for plots only (never seen by training)."""
        return float(task.level)

    # -------------------------------------------------------------- agent side
    def score(self, task: Task, response: str) -> float:
        """Reward in [0, 1] of a single-turn response."""
        raise NotImplementedError

    def reset(self, task: Task, seed: int = 0) -> tuple[Any, str]:
        """Start an episode: (state, first observation)."""
        return {"task": task}, task.prompt

    def step(self, state: Any, action: str) -> StepResult:
        """Apply the agent's action. Single-turn default: score it and terminate."""
        reward = float(self.score(state["task"], action))
        return StepResult("", reward, True, False, state)

    def agent_context(self, history: list[tuple[str, str]], observation: str) -> str:
        """The agent's prompt at a turn: earlier (observation, action) pairs then the new observation."""
        return "".join(obs + act + "\n" for obs, act in history) + observation

    def warmstart_examples(self, task: Task) -> list[tuple[list[tuple[str, str]], str, str]]:
        """Supervised warm-start examples of a seed task as (history, observation, target response).
        Default: the first observation and the grounded answer. Multi-turn domains return every expert step."""
        return [([], self.reset(task, seed=0)[1], task.answer)]

    def expert_steps(self, task: Task) -> list[tuple[list[tuple[str, str]], str, str]] | None:
        """Multi-turn domains with an expert: its trajectory as (history, observation, next action) steps,
        scored one by one by exact match (the paper's single-step protocol). None: not offered."""
        return None

    def action_matches(self, response: str, action: str) -> bool:
        """Exact match of a response to an expert action (single-step protocol); domains may normalise."""
        return response.strip() == action.strip()

    # -------------------------------------------------------------- conveniences
    def parse_and_validate(self, text: str) -> Task | Invalid:
        try:
            parsed = self.parse_task(text)
            if isinstance(parsed, Invalid):
                return parsed
            return self.validate(parsed)
        except Exception as err:  # the simulator's text is untrusted: a parser bug must not end the run
            return Invalid(f"parser error: {type(err).__name__}", text)


class LeveledDomain(Domain):
    """A domain that draws tasks procedurally by level (``random_task(rng, level)``): the fixed held-out and
    dev sets, the seed set (``seed_levels`` only, never a held-out task) and the simulator's corpus follow.

    Subclasses set ``heldout_seed``, ``dev_seed`` and ``seed_levels`` and may override the hooks below.
    """

    heldout_seed: int = 0
    dev_seed: int = 1
    seed_levels: list[int] = []

    def random_task(self, rng: np.random.Generator, level: int) -> Task:
        raise NotImplementedError

    def corpus_seed_level(self, rng: np.random.Generator) -> int:
        """Level of the seed task shown to the simulator in one corpus entry."""
        return int(rng.choice(self.seed_levels))

    def corpus_task_level(self, rng: np.random.Generator) -> int:
        """Level of the task the simulator learns to write in one corpus entry (every level)."""
        return int(rng.choice(self.levels()))

    def _level_set(self, seed: int, per_level: int) -> list[Task]:
        rng = np.random.default_rng(seed)
        return [self.random_task(rng, level) for level in self.levels() for _ in range(per_level)]

    def heldout_tasks(self, per_level):
        return self._level_set(self.heldout_seed, per_level)

    def dev_tasks(self, per_level):
        return self._level_set(self.dev_seed, per_level)

    def seed_tasks(self, rng, n):
        """``n`` distinct tasks of the seed levels (the library drops any held-out or dev task among them)."""
        tasks, seen, tries = [], set(), 0
        while len(tasks) < n and tries < 50 * n:
            tries += 1
            task = self.random_task(rng, int(rng.choice(self.seed_levels)))
            if task.text in seen:
                continue
            seen.add(task.text)
            tasks.append(task)
        return tasks

    def simulator_corpus(self, rng, n):
        corpus = []
        for _ in range(n):
            seed = self.random_task(rng, self.corpus_seed_level(rng))
            stats = {"success_rate": None if rng.random() < 0.1 else float(rng.random())}
            corpus.append((seed, stats, self.random_task(rng, self.corpus_task_level(rng))))
        return corpus


_REGISTRY: dict[str, Callable[..., Domain]] = {}


def register(name: str):
    """Class decorator: ``@register("addition")`` makes the domain available as ``domain.name``."""
    def wrap(cls):
        _REGISTRY[name] = cls
        cls.name = name
        return cls
    return wrap


def make_domain(name: str, **options) -> Domain:
    if name not in _REGISTRY:
        from genenv.config import ConfigError
        raise ConfigError(f"domain.name: unknown domain {name!r}; registered: {', '.join(sorted(_REGISTRY))}")
    try:
        return _REGISTRY[name](**options)
    except TypeError as err:
        from genenv.config import ConfigError
        raise ConfigError(f"domain.options: {err}") from None


def registered_domains() -> dict[str, Callable[..., Domain]]:
    return dict(_REGISTRY)

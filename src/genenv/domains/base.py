"""The Domain protocol: the one thing a user writes to add a task family.

A domain says what a task is (``Task``), how the simulator is prompted and how its text is parsed
(``simulator_prompt``, ``parse_task``), how a task is grounded (``validate``: the simulator proposes, the
domain decides what is true), and how an agent is scored: ``score`` for single-turn domains, or
``reset``/``step`` for multi-turn ones (Gymnasium-style: terminated and truncated are distinct).
"""

from __future__ import annotations

import abc
import ast
import difflib
import hashlib
import importlib
import importlib.metadata
import inspect
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

import numpy as np

from genenv.config import ConfigError
from genenv.timeouts import CallTimeout, time_limit


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
    error: str | None = None   # set by Domain.checked_step: why the step was cut short (its reward is then 0)


@dataclass(frozen=True)
class TaskShape:
    """What a simulator's task text looks like, declared by a domain (issue 57): a JSON schema of the one JSON
    object it writes (``json_schema``) or a regular expression its whole text matches (``regex``), exactly one.
    It holds what can be said of a text without the domain's state (names, types, required fields, lengths);
    ``validate`` still grounds the task. Constrained generation samples only texts of this shape, and ``genenv
    check-domain`` checks the domain's own seed tasks have it (:func:`genenv.domain_check.shape_problem`).
    ``max_chars``: the longest text the domain accepts, if it has a cap (a constrained text closes within it)."""
    json_schema: dict | None = None
    regex: str | None = None
    max_chars: int | None = None

    def __post_init__(self):
        if (self.json_schema is None) == (self.regex is None):
            raise TypeError("a TaskShape is a json_schema or a regex, exactly one")


@dataclass(frozen=True)
class WarmStartKey:
    """What a domain adds to the key of its cached warm starts, beside its class's name, what its modules compute
    (:func:`code_fingerprint`) and the run's settings, declared in one place (``Domain.warm_start_key``): a cached
    warm start is reused exactly when all of it is the same."""
    format_version: int = 1   # bump when task texts or prompts change in a way the source of its modules cannot show
    simulator_only_options: tuple[str, ...] = ()   # domain.options that shape only the simulator's corpus
    location_options: tuple[str, ...] = ()   # domain.options that say where data lives (keyed by data_fingerprint)
    code_modules: tuple[ModuleType, ...] = ()   # modules beyond the class's own whose code shapes tasks and rewards


OLD_KEY_MEMBERS = ("format_version", "simulator_only_options", "location_options", "code_modules")


class Domain(abc.ABC):
    """Base class. A domain implements the abstract methods below (constructing one that misses any fails at
    once, naming them); single-turn domains score a response (``score``), multi-turn ones also override
    ``reset``/``step``.

    Class attributes: ``alphabet`` (every character the tiny tokenizer must encode: task texts, prompts,
    answers, observations and the simulator prompt; ``None`` for a domain meant for real tokenizers only),
    ``tiny_words`` (whole words the tiny tokenizer keeps as one token each, see :mod:`genenv.models.tiny`),
    ``warm_start_key`` (what the domain adds to its cached warm starts' key: a :class:`WarmStartKey`, with
    ``data_fingerprint()`` for the data it reads),
    ``agent_max_new_tokens`` / ``env_max_new_tokens`` (caps on response and task length), ``multi_turn`` and
    ``max_turns``, ``reward_range`` and ``null_response_floor`` (what ``genenv check-domain`` holds the rewards to:
    every reward in the range; an empty, punctuation-only or echoed response earns at most the floor),
    ``ordered_levels`` (a capability: ``levels()`` are ordered by difficulty, easiest first, so a
    method may read them in training: ``env.pg.gate=levels``; such a method has the oracle's information, not the
    paper's). ``name`` is set by :func:`register`.

    Bounds on untrusted text (docs/domains.md, "Bounded work"): the loop reads a simulator's text through
    :meth:`parse_and_validate` and an agent's action through :meth:`checked_step`, which refuse a text longer
    than ``simulator_text_limit`` / ``agent_text_limit`` characters before any parsing (the reason names the
    limit), stop a call after ``call_seconds`` (Python code only: the size limits keep single C calls short), and
    turn any exception into an Invalid or a 0 reward with the reason. The defaults hold every built-in domain's
    longest legitimate task and answer many times over; a domain whose texts are longer raises them.
    """

    name: str = "base"
    alphabet: str | None = None
    tiny_words: tuple[str, ...] = ()
    multi_turn: bool = False
    max_turns: int = 1
    agent_max_new_tokens: int = 16
    env_max_new_tokens: int = 32
    warm_start_key: ClassVar[WarmStartKey] = WarmStartKey()   # what keys its cached warm starts (beside its code)

    def __init_subclass__(cls, **kwargs):
        """A domain written for an older genenv that sets a cache-key member of its own is refused at import, naming
        it: read no longer, it would let stale cached warm starts be reused."""
        super().__init_subclass__(**kwargs)
        old = [name for name in OLD_KEY_MEMBERS if name in vars(cls)]
        if old:
            raise TypeError(f"{cls.__qualname__}: {', '.join(old)} now go in one declaration, warm_start_key = "
                            f"WarmStartKey({', '.join(f'{name}=...' for name in old)}) (genenv.domains.base, "
                            "docs/domains.md)")
    ordered_levels: bool = False   # levels() are difficulty buckets, easiest first (what the level gate reads)
    reward_range: tuple[float, float] = (0.0, 1.0)   # every reward score/step returns lies in it
    null_response_floor: float = 0.0   # the most a response with nothing in it may earn (genenv check-domain)
    simulator_text_limit: int = 65_536   # characters of simulator text read; a longer text is Invalid unread
    agent_text_limit: int = 65_536       # characters of one agent action read; a longer one earns 0 unread
    call_seconds: float = 10.0           # the longest one parse + validate, or one step, may run
    # what a chat model not warm-started on the domain is told of its action format (a system prompt), or None when
    # the first observation says it: the verifiers tasksets send it (genenv.integrations.verifiers)
    agent_instructions: str | None = None
    # the domain grounds a simulator's text (``validate`` decides what is true); False (a verifiers taskset) refuses
    # the curricula that generate tasks, at start
    grounds_simulator_text: bool = True

    # -------------------------------------------------------------- data
    def data_fingerprint(self) -> str | None:
        """A hash of what the domain reads from outside its code (a data folder's files), or None when it reads
        nothing. The warm-start cache key holds it in place of ``warm_start_key.location_options``: the same data in
        another folder (a fresh machine, ``$GENENV_..._DATA`` instead of ``data=``) finds the cached players, and
        other data at the same path retrains them."""
        return None

    @abc.abstractmethod
    def seed_tasks(self, rng: np.random.Generator, n: int) -> list[Task]:
        """Base training data: the paper's original training samples (easy levels)."""
        raise NotImplementedError

    @abc.abstractmethod
    def heldout_tasks(self, per_level: int) -> list[Task]:
        """Fixed evaluation set over every level. Deterministic; never trained on (the library rejects any
        training task whose text equals one of these or a dev task)."""
        raise NotImplementedError

    def dev_tasks(self, per_level: int) -> list[Task]:
        """A fixed development set, disjoint in sampling from the held-out set: tune hyperparameters here."""
        return []

    def task_shape(self) -> TaskShape | None:
        """The shape of every task text this domain accepts from the simulator (:class:`TaskShape`), or None
        (the default: a user's domain need not declare one; generation is then unconstrained)."""
        return None

    @abc.abstractmethod
    def simulator_corpus(self, rng: np.random.Generator, n: int) -> list[tuple[Task, dict, Task]]:
        """(seed, stats, task) triples of every difficulty: the simulator's warm-start 'world knowledge'."""
        raise NotImplementedError

    def reference_tasks(self, rng: np.random.Generator, n: int) -> list[Task]:
        """Valid tasks of every difficulty written by the domain itself: the 'strong frozen teacher' of the
        offline-augmentation baseline. Default: the tasks of ``simulator_corpus``."""
        return [task for _, _, task in self.simulator_corpus(rng, n)]

    @abc.abstractmethod
    def levels(self) -> list[int]:
        """The difficulty levels tasks are bucketed in (``Task.level``; evaluation reports each)."""
        raise NotImplementedError

    def level_size(self, level: int) -> int | None:
        """How many distinct tasks ``level`` has, where that is known and small enough to matter (None: not
        known, or effectively unlimited). Used to report levels the held-out and dev sets take a share of."""
        return None

    # -------------------------------------------------------------- simulator side
    @abc.abstractmethod
    def simulator_prompt(self, seed: Task, stats: dict) -> str:
        """What the simulator is conditioned on: a seed task and ``stats`` (``stats["success_rate"]``: the
        agent's recent success on the seed, a float in [0, 1], or None when unknown). Every character of it
        must be in ``alphabet`` for tiny models."""
        raise NotImplementedError

    @abc.abstractmethod
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
    @abc.abstractmethod
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
        """``parse_task`` then ``validate`` of untrusted simulator text, bounded: a text past
        ``simulator_text_limit`` is Invalid before it is read, a call past ``call_seconds`` is stopped, and an
        exception is an Invalid naming it (a parser bug must not end the run). Never raises."""
        if not isinstance(text, str):
            return Invalid("not text", _clipped(repr(text)))
        if len(text) > self.simulator_text_limit:
            return Invalid(f"past the size limit: longer than {self.simulator_text_limit} characters "
                           "(Domain.simulator_text_limit)", _clipped(text))
        try:
            with time_limit(self.call_seconds):
                parsed = self.parse_task(text)
                if isinstance(parsed, Invalid):
                    return parsed
                return self.validate(parsed)
        except CallTimeout:
            return Invalid(f"past the time limit: parse_task and validate ran over {self.call_seconds:g} s "
                           "(Domain.call_seconds)", _clipped(text))
        except Exception as err:  # noqa: BLE001 (untrusted text: whatever a parser raises is this text's verdict)
            return Invalid(_clipped(f"parser error: {type(err).__name__}: {err}", 200), text)

    def checked_step(self, state: Any, action: str) -> StepResult:
        """``step`` on an agent's untrusted action, bounded as :meth:`parse_and_validate` is: an action past
        ``agent_text_limit`` earns 0 unread, a step past ``call_seconds`` is stopped, and a step that raises earns
        0; each ends the episode (terminated) with the reason in ``error``. Never raises."""
        if not isinstance(action, str):
            return StepResult("", 0.0, True, False, state, "not text")
        if len(action) > self.agent_text_limit:
            return StepResult("", 0.0, True, False, state,
                              f"past the size limit: longer than {self.agent_text_limit} characters "
                              "(Domain.agent_text_limit)")
        try:
            with time_limit(self.call_seconds):
                result = self.step(state, action)
            if not isinstance(result, StepResult):
                raise TypeError(f"step returned {type(result).__name__}, not a StepResult")
            return result
        except CallTimeout:
            return StepResult("", 0.0, True, False, state,
                              f"past the time limit: step ran over {self.call_seconds:g} s (Domain.call_seconds)")
        except Exception as err:  # noqa: BLE001 (untrusted text: a scoring bug must not end the run)
            return StepResult("", 0.0, True, False, state, _clipped(f"step error: {type(err).__name__}: {err}", 200))


def _clipped(text: str, limit: int = 1000) -> str:
    """``text`` cut to ``limit`` characters (a rejected text's record in the samples, not the whole of it)."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


class LeveledDomain(Domain):
    """A domain that draws tasks procedurally by level: it writes ``random_task(rng, level)`` and ``levels()``,
    and the fixed held-out and dev sets, the seed set (``seed_levels`` only) and the simulator's corpus follow.
    It still writes the simulator's side (``simulator_prompt``, ``parse_task``, optionally ``validate``) and the
    agent's (``score``).

    Subclasses set ``heldout_seed``, ``dev_seed`` and ``seed_levels`` and may override the hooks below.
    """

    heldout_seed: int = 0
    dev_seed: int = 1
    seed_levels: list[int] = []
    # None: the corpus pairs a seed with a task of any level (``corpus_task_level``), so the warm-started simulator
    # ignores its seed's level. k: the task is a variation of the seed, of a level within k of the seed's.
    variation_span: int | None = None
    # variation_span as a constructor option shapes only the corpus
    warm_start_key: ClassVar[WarmStartKey] = WarmStartKey(simulator_only_options=("variation_span",))

    @abc.abstractmethod
    def random_task(self, rng: np.random.Generator, level: int) -> Task:
        """A task of ``level`` drawn from ``rng`` (the held-out, dev and seed sets and the corpus are built on it)."""
        raise NotImplementedError

    def corpus_seed_level(self, rng: np.random.Generator) -> int:
        """Level of the seed task shown to the simulator in one corpus entry."""
        return int(rng.choice(self.seed_levels))

    def corpus_task_level(self, rng: np.random.Generator) -> int:
        """Level of the task the simulator learns to write in one corpus entry (every level)."""
        return int(rng.choice(self.levels()))

    def variation_level(self, rng: np.random.Generator, seed_level: int) -> int:
        """With ``variation_span`` k: a level within k of ``seed_level``, uniformly among the domain's levels."""
        near = [level for level in self.levels() if abs(level - seed_level) <= self.variation_span]
        return int(rng.choice(near))

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
            level = (self.corpus_task_level(rng) if self.variation_span is None
                     else self.variation_level(rng, seed.level))
            corpus.append((seed, stats, self.random_task(rng, level)))
        return corpus


_REGISTRY: dict[str, type[Domain]] = {}
ENTRY_POINT_GROUP = "genenv.domains"
SOURCE_GROUP = "genenv.domain_sources"   # prefix -> a callable from an id to a domain class (``verifiers:ID``)


def seed_round_trip_problem(domain: Domain, task: Task) -> str | None:
    """None when ``task``'s text, read back as simulator output, parses and grounds to the same task (text and
    answer); else what went wrong. ``genenv run`` makes a failure a config error at start, ``genenv check-domain``
    checks it on seed tasks, and a domain may keep only the tasks that pass (toolcall's seed set)."""
    again = domain.parse_and_validate(task.text)
    if isinstance(again, Invalid):
        return f"rejects its own seed task {task.text[:80]!r}: {again.reason}"
    if again.text != task.text or (again.answer or "") != (task.answer or ""):
        return (f"reads its own seed task {task.text[:80]!r} back as another task ({again.text[:80]!r}, answer "
                f"{again.answer!r})")
    return None


def registrar(registry: dict):
    """A decorator factory over ``registry``: ``@decorator("name")`` stores the class under ``name`` and sets its
    ``name`` attribute (domains here, curricula in :mod:`genenv.curricula`)."""
    def register(name: str):
        def wrap(cls):
            registry[name] = cls
            cls.name = name
            return cls
        return wrap
    return register


register = registrar(_REGISTRY)   # ``@register("addition")`` makes the domain available as ``domain.name``


def domain_class(name: str) -> type[Domain]:
    """The domain class ``domain.name`` names: a registered name, the name of an entry point in the
    ``genenv.domains`` group of an installed package, or ``package.module:ClassName`` (imported; works in
    every process a run starts, since the name travels in the run's config)."""
    if name in _REGISTRY:
        return _REGISTRY[name]
    source = _domain_source(name)
    if source is not None:
        cls = source(name.partition(":")[2])
    elif ":" in name:
        module_name, _, class_name = name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise ConfigError(f"domain.name: cannot import {module_name!r} ({err}); is it on the Python "
                              "path?") from None
        cls = getattr(module, class_name, None)
        if cls is None:
            classes = sorted(k for k, v in vars(module).items() if isinstance(v, type) and issubclass(v, Domain)
                             and v.__module__ == module.__name__)
            close = difflib.get_close_matches(class_name, classes, n=1)
            raise ConfigError(f"domain.name: module {module_name!r} has no {class_name!r}"
                              + (f"; did you mean {module_name}:{close[0]}?" if close else "")
                              + (f" (its domains: {', '.join(classes)})" if classes else " (it defines no Domain)"))
    else:
        points = [ep for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
        if not points:
            known = sorted({*_REGISTRY, *plugin_names()})
            raise ConfigError(f"domain.name: unknown domain {name!r}; registered: {', '.join(known)}; or give "
                              "package.module:ClassName")
        cls = points[0].load()
    if not (isinstance(cls, type) and issubclass(cls, Domain)):
        raise ConfigError(f"domain.name: {name!r} is not a genenv Domain subclass")
    if "name" not in cls.__dict__:
        cls.name = name
    return cls


def _domain_source(name: str):
    """The ``genenv.domain_sources`` entry point a ``prefix:ID`` name starts with (``verifiers:ID``: a verifiers
    taskset, :mod:`genenv.integrations.verifiers_domain`), loaded: a callable from ID to a domain class; or None."""
    prefix = name.partition(":")[0]
    if ":" not in name:
        return None
    points = [ep for ep in importlib.metadata.entry_points(group=SOURCE_GROUP) if ep.name == prefix]
    if not points:
        return None
    try:
        return points[0].load()
    except ImportError as err:
        raise ConfigError(f"domain.name: {name!r} needs the {prefix} extra (pip install "
                          f"'genenv-coevolve[{prefix}]'): {err}") from None


def plugin_names() -> list[str]:
    """Domains installed packages offer through the ``genenv.domains`` entry-point group."""
    return sorted(ep.name for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP))


def make_domain(name: str, **options) -> Domain:
    cls = domain_class(name)
    if inspect.isabstract(cls):
        missing = ", ".join(sorted(cls.__abstractmethods__))
        raise ConfigError(f"domain.name: {name!r} is incomplete: it does not implement {missing}")
    try:
        return cls(**options)
    except TypeError as err:
        raise ConfigError(f"domain.options: {err}") from None


def registered_domains() -> dict[str, type[Domain]]:
    """Built-in and registered domains, and the installed plugins' (loaded)."""
    return {**{name: domain_class(name) for name in plugin_names()}, **_REGISTRY}


def transcript(history: list[tuple[str, str | None]], observation: str, render_action=str.strip) -> str:
    """A multi-turn agent prompt in the ALFWorld style: each earlier observation, the action taken after it as a
    ``> action`` line (``render_action`` of the raw response), the new observation, then the ``> `` cue."""
    parts = []
    for previous, action in history:
        parts.append(previous)
        if action is not None:
            parts.append(f"> {render_action(action)}")
    parts.append(observation)
    return "\n".join(parts) + "\n> "


def folder_fingerprint(folder: Path, parts: tuple[str, ...]) -> str:
    """A hash of every file under ``folder``'s subfolders ``parts`` (those that exist): each file's path relative to
    ``folder`` and its bytes, in sorted order. What :meth:`Domain.data_fingerprint` returns for a data folder."""
    digest = hashlib.sha256()
    for part in parts:
        root = Path(folder) / part
        files = sorted(f for f in root.rglob("*") if f.is_file()) if root.is_dir() else []
        for file in files:
            digest.update(file.relative_to(folder).as_posix().encode() + b"\0")
            digest.update(hashlib.sha256(file.read_bytes()).digest())
    return digest.hexdigest()[:16]


def computation_hash(source: str) -> str:
    """A hash of what Python source computes, not of where it lives: its syntax tree without import statements
    and docstrings (a module moved to another package changes only its import lines; a docstring edit changes
    nothing it computes). Comments and formatting never reach the tree. Source that does not parse: its text."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return hashlib.sha256(source.encode()).hexdigest()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        kept = [child for child in body if not isinstance(child, (ast.Import, ast.ImportFrom))]
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and kept
                and isinstance(kept[0], ast.Expr) and isinstance(kept[0].value, ast.Constant)
                and isinstance(kept[0].value.value, str)):
            kept = kept[1:]
        node.body = kept or [ast.Pass()]
    return hashlib.sha256(ast.dump(tree, include_attributes=False).encode()).hexdigest()


def code_fingerprint(cls: type[Domain]) -> str:
    """A hash of what the domain computes: :func:`computation_hash` of every module the domain class is made of
    (its classes' modules and its ``warm_start_key.code_modules``), the modules' hashes sorted, so that neither a
    module's name nor its folder enters it. Part of the warm-start cache key: editing what a domain computes
    retrains its cached players, and moving its files (issue 56) does not."""
    modules = {sys.modules[c.__module__] for c in cls.__mro__ if c.__module__ in sys.modules
               and c.__module__ not in ("builtins", "abc")}
    modules |= set(cls.warm_start_key.code_modules)
    hashes = []
    for module in modules:
        try:
            hashes.append(computation_hash(inspect.getsource(module)))
        except (OSError, TypeError):  # no source (a compiled or interactive module): its name only
            hashes.append(module.__name__)
    return hashlib.sha256("\n".join(sorted(hashes)).encode()).hexdigest()[:12]

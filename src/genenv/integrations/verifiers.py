"""genenv's domains as `verifiers` tasksets (the ``verifiers`` extra; docs/verifiers.md).

verifiers loads an environment by id: ``vf-eval genenv-apibank`` imports the module ``genenv_apibank``, which exports
one :class:`vf.Taskset` and the :class:`vf.Env` that plays it (made here by :func:`domain_environment`). A domain's
fixed sets are its tasks, exactly the ones ``genenv run`` and ``genenv eval --benchmark heldout`` build
(:func:`split_tasks`): the held-out set (default), the dev set or the seed set, their sizes and seed options of the
taskset's config. ``genenv-domain`` takes any registered domain by name (``--env.taskset.domain NAME``): a plugin's
domains need no module of their own.

One episode is one genenv episode: the domain's first observation is the user's message, each assistant reply is
one action, and for a multi-turn domain (household, multihop's search) the observation ``Domain.step`` returns is the
next user message, until the domain ends the episode or ``max_turns`` actions were taken (:class:`DomainEnv`). The
reward is genenv's own: the task's replies replayed through the domain (:func:`genenv.rollout.replay`), so a
taskset's reward on a response equals ``genenv eval``'s on the same task and response; the domain's bounds on
untrusted text apply, and no response makes it raise.

The agent's seat defaults to verifiers' tool-less ``null`` harness on the local ``subprocess`` runtime: the domain,
not a sandbox, is the environment. ``--env.agent.harness.id`` and ``--env.agent.runtime.type`` choose others.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
from typing import Any, Literal

import numpy as np
import verifiers.v1 as vf
from pydantic import Field, create_model

from genenv.config import RunConfig
from genenv.domains import make_domain
from genenv.domains.base import Domain, Task
from genenv.rollout import replay
from genenv.splits import data_split, training_seed_tasks

SPLITS = ("heldout", "dev", "seed")
# the ids ``vf-eval`` takes (module genenv_<domain>) and the domain each loads; ``genenv-domain`` takes any by name
TASKSET_IDS = {f"genenv-{name.replace('_', '-')}": name
               for name in ("addition", "apibank", "household", "multihop", "reasoning_gym", "toolcall", "travel")}
SUCCESS_THRESHOLD = RunConfig().curriculum_reward.success_threshold   # a reward that counts as solved


def split_tasks(domain_name: str, options: dict, split: str, per_level: int, num_seed_tasks: int,
                seed: int) -> list[Task]:
    """The tasks of a domain's ``split``, the very ones a run with these settings builds: ``heldout`` and ``dev``
    (``per_level`` tasks a level: ``domain.heldout_per_level``), or ``seed`` (``num_seed_tasks`` tasks drawn with
    ``seed``: ``domain.num_seed_tasks`` and ``seed``, none of them a held-out or dev task)."""
    if split not in SPLITS:
        raise ValueError(f"split: {split!r} is not one of {', '.join(SPLITS)}")
    cfg = RunConfig(seed=seed)
    cfg = dataclasses.replace(cfg, domain=dataclasses.replace(
        cfg.domain, name=domain_name, options=dict(options), heldout_per_level=per_level,
        num_seed_tasks=num_seed_tasks))
    domain = cached_domain(domain_name, json.dumps(options, sort_keys=True))
    sets = data_split(cfg, domain)
    if split == "seed":
        return training_seed_tasks(cfg, domain, sets)
    return sets.heldout if split == "heldout" else sets.dev


@functools.lru_cache(maxsize=16)
def cached_domain(name: str, options_json: str) -> Domain:
    """One domain object per (name, options) in a process: building one may read a data folder."""
    return make_domain(name, **json.loads(options_json))


def wire_task(task: Task) -> dict:
    """``task`` as JSON-safe data (tuples as lists): what a verifiers task carries, read back by
    :func:`genenv_task` in whatever process scores it."""
    return json.loads(json.dumps(task.to_json(), default=_jsonable))


def _jsonable(value):
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} in a task's meta is not JSON data")


def genenv_task(data: dict) -> Task:
    return Task.from_json(data)


def first_message(observation) -> str | list:
    """A domain's first observation as verifiers' prompt: text, or chat messages where the domain writes them
    (toolcall's BFCL prompt: a system and a user message)."""
    if isinstance(observation, str):
        return observation
    return [dict(message) for message in observation]


class DomainTaskData(vf.TaskData):
    domain: str
    """The registered genenv domain (``genenv domains``)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """The domain's constructor options (``domain.options``)."""
    split: str = "heldout"
    level: int = 0
    """The task's difficulty level (genenv's ``Task.level``)."""
    genenv_task: dict
    """The genenv task, as :func:`wire_task` writes it."""


class DomainTask(vf.Task[DomainTaskData]):
    """One genenv task; its reward is the domain's score of the episode the trace's replies make."""

    def domain(self) -> Domain:
        return cached_domain(self.data.domain, json.dumps(self.data.options, sort_keys=True))

    @vf.reward(weight=1.0)
    async def reward(self, trace: vf.Trace) -> float:
        """genenv's reward for the replies (:func:`genenv.rollout.replay`): the domain's score of a single-turn
        answer, the episode's summed step rewards of a multi-turn one."""
        return float(replay(self.domain(), genenv_task(self.data.genenv_task), replies(trace)).reward)

    async def validate(self, runtime) -> bool | None:
        """``vf-validate``'s gold check: the domain's own reference actions (its warm-start targets: the grounded
        answer, or a multi-turn domain's expert steps) replayed earn success (genenv's
        ``curriculum_reward.success_threshold``); None where the domain knows no reference for the task."""
        task = genenv_task(self.data.genenv_task)
        domain = self.domain()
        examples = domain.warmstart_examples(task)
        actions = [target for _, _, target in examples or []]
        if not actions or any(not isinstance(action, str) for action in actions):
            return None
        return replay(domain, task, actions).reward >= SUCCESS_THRESHOLD

    @vf.metric
    async def turns(self, trace: vf.Trace) -> float:
        """Actions the episode read (the domain stops reading once it ends the episode)."""
        return float(len(replay(self.domain(), genenv_task(self.data.genenv_task), replies(trace)).turns))


def replies(trace: vf.Trace) -> list[str]:
    """The agent's actions in a trace: its assistant messages' text, in order."""
    return [_text(message.content) for message in trace.assistant_messages]


def _text(content) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(getattr(part, "text", "") or "" for part in content)


class DomainTasksetConfig(vf.TasksetConfig):
    domain: str = "addition"
    """The registered genenv domain (``genenv domains``; a plugin's too)."""
    options: dict[str, Any] = Field(default_factory=dict)
    """The domain's constructor options, as ``domain.options`` in a genenv config (``data``: API-Bank's folder)."""
    split: Literal["heldout", "dev", "seed"] = "heldout"
    """Which of the domain's sets: ``heldout`` (report only), ``dev`` (tune here) or ``seed`` (training data)."""
    per_level: int = Field(100, ge=1)
    """Held-out and dev tasks per difficulty level (genenv's ``domain.heldout_per_level``)."""
    num_seed_tasks: int = Field(4000, ge=1)
    """Tasks in the seed set (genenv's ``domain.num_seed_tasks``)."""
    seed: int = Field(0, ge=0)
    """The seed set's draw (genenv's ``seed``); the held-out and dev sets are the domain's own, fixed."""


class DomainTaskset(vf.Taskset[DomainTask, DomainTasksetConfig]):
    """A genenv domain's fixed set as verifiers tasks, in genenv's order."""

    def load(self):
        config = self.config
        domain = cached_domain(config.domain, json.dumps(config.options, sort_keys=True))
        tasks = split_tasks(config.domain, config.options, config.split, config.per_level, config.num_seed_tasks,
                            config.seed)
        for index, task in enumerate(tasks):
            _, observation = domain.reset(task, seed=0)
            yield DomainTask(DomainTaskData(
                id=f"{config.domain}-{config.split}-{index}", prompt=first_message(observation),
                system_prompt=domain.agent_instructions,
                domain=config.domain, options=config.options, split=config.split, level=task.level,
                genenv_task=wire_task(task)), config.task)


class DomainEnvConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"}, runtime=vf.SubprocessConfig())
    """The agent's seat: verifiers' tool-less chat program on the local machine by default (the domain is the
    environment; no sandbox is needed)."""


class DomainEnv(vf.Env[DomainEnvConfig]):
    """A genenv episode: the domain's observations as user turns, the agent's replies as actions."""

    async def run(self, task: DomainTask, agents) -> None:
        domain = task.domain()
        if not domain.multi_turn:
            await agents.agent.run(task)
            return
        state, _ = domain.reset(genenv_task(task.data.genenv_task), seed=0)
        async with agents.agent.interaction(task) as chat:
            segment = await chat.turn()   # the task's prompt (the first observation) opens the exchange
            for taken in range(1, domain.max_turns + 1):
                if segment.terminated:
                    return
                result = domain.checked_step(state, replies(chat.trace)[-1])
                state = result.state
                if result.terminated or result.truncated or taken == domain.max_turns:
                    return
                segment = await chat.turn(result.observation or "(no observation)")


def domain_taskset(domain_name: str, module: str, prefix: str) -> type[DomainTaskset]:
    """The taskset of ``vf-eval genenv-<name>`` for one domain (its module exports it and :class:`DomainEnv`): a
    :class:`DomainTaskset` whose config names the domain by default."""
    config = create_model(f"{prefix}Config", __base__=DomainTasksetConfig, __module__=module,
                          domain=(str, domain_name))
    taskset = types.new_class(f"{prefix}Taskset", (DomainTaskset, vf.Taskset[DomainTask, config]))
    taskset.__module__ = module
    taskset.__doc__ = f"genenv's {domain_name} domain: its held-out, dev or seed set (docs/verifiers.md)."
    return taskset

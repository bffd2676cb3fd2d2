"""Any verifiers taskset as a genenv domain: ``domain.name=verifiers:ID`` (the ``verifiers`` extra; docs/verifiers.md).

The taskset ``ID`` loads through verifiers' own loader (``ID`` as ``vf-eval`` takes it; ``domain.options.taskset``:
its config's fields), at most ``limit`` tasks (an endless one is cut there). Its tasks split by a keyed hash of each
task's key (verifiers' ``Task.key``: its content hash, or its dataset's durable id) into held-out
(``heldout_share``), dev (``dev_share``) and seed tasks, disjoint, the same on every machine for the same
``split_key``. A task's reward is the taskset's own: its reward functions (async) score a trace of the prompt and the
agent's one reply, run inside genenv's bounded call (``Domain.checked_step``: a reward that raises or hangs earns 0).

One level, no ordering; no simulator grounding: a verifiers taskset can say whether a reply is right but not whether a
written task is sound, so a curriculum that generates tasks is refused at start (``grounds_simulator_text``), unless
a subclass brings its own ``parse_task`` and ``validate`` and sets it. The curricula that need no parser run on it
(``static``, ``learnability``; ``env.seed_draw=learnt_frontier`` over its seeds). A taskset whose rewards need a
runtime (a sandbox) or whose tasks bring tools is refused at construction, naming what.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import hashlib
import inspect
import json
import string
from typing import Any

import numpy as np
import verifiers.v1 as vf
from verifiers.v1.types import AssistantMessage, SystemMessage, UserMessage
from verifiers.v1.utils.loaders import load_taskset, taskset_class, taskset_config_type

from genenv.domains.base import Domain, Invalid, Task
from genenv.domains.jsontask import parse_json_object
from genenv.errors import ConfigError


@functools.cache
def domain_class(taskset_id: str) -> type[Domain]:
    """The domain class of ``domain.name=verifiers:<taskset_id>`` (the ``genenv.domain_sources`` entry point): one
    class per id in a process; an id verifiers' loader cannot import is refused here, naming it."""
    try:
        taskset_class(taskset_id)
    except (ImportError, TypeError, ValueError, AttributeError) as error:
        raise ConfigError(f"domain.name: verifiers taskset {taskset_id!r}: {error}") from None
    return type(f"Verifiers[{taskset_id}]", (VerifiersDomain,), {"taskset_id": taskset_id, "__module__": __name__})


def split_point(split_key: str, task_key: str) -> float:
    """Where a task falls in [0, 1): the first 8 bytes of sha256(split_key + ':' + task key)."""
    digest = hashlib.sha256(f"{split_key}:{task_key}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2 ** 64


def run_coroutine(coroutine):
    """A coroutine's result from synchronous code, whether or not an event loop runs in this thread."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine)
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coroutine).result()


class VerifiersDomain(Domain):
    """A verifiers taskset's tasks and rewards (see the module). Options: ``taskset`` (its config's fields),
    ``limit`` (tasks read), ``heldout_share`` and ``dev_share`` (of the tasks, by keyed hash), ``split_key``,
    ``answer_field`` (the task data's field that holds a reference reply, for the agent's warm start; tasks without
    one give no warm-start example), ``max_reply_tokens`` (the agent's reply cap)."""

    taskset_id: str = ""
    grounds_simulator_text = False
    env_max_new_tokens = 256

    def __init__(self, taskset: dict | None = None, limit: int = 2000, heldout_share: float = 0.1,
                 dev_share: float = 0.1, split_key: str = "genenv", answer_field: str = "answer",
                 max_reply_tokens: int = 256):
        if not (0 < heldout_share and 0 < dev_share and heldout_share + dev_share < 1):
            raise TypeError(f"heldout_share and dev_share must be positive with a sum below 1, got {heldout_share} "
                            f"and {dev_share}")
        self.limit, self.split_key, self.answer_field = int(limit), str(split_key), str(answer_field)
        self.agent_max_new_tokens = int(max_reply_tokens)
        try:
            config = taskset_config_type(self.taskset_id).model_validate({**(taskset or {}), "id": self.taskset_id})
            loaded = load_taskset(config)
        except (ImportError, TypeError, ValueError, AttributeError) as error:
            raise TypeError(f"verifiers taskset {self.taskset_id!r}: {error}") from None
        self.task_type, self.task_config = type(loaded).task_type(), config.task
        if self.task_type.toolsets(self.task_config) or type(loaded).toolsets(loaded.config):
            raise TypeError(f"verifiers taskset {self.taskset_id!r} brings tools (Task.toolsets / Taskset.toolsets); "
                            "genenv plays a task as one prompt and one reply")
        view = loaded if loaded.bounded else loaded.take(self.limit)
        self.tasks: dict[str, Any] = {}   # genenv task text -> the verifiers task
        parts: dict[str, list[Task]] = {"heldout": [], "dev": [], "seed": []}
        for vtask in view:
            if len(self.tasks) >= self.limit:
                break
            task = self._genenv_task(vtask)
            if task.text in self.tasks:
                continue
            self.tasks[task.text] = vtask
            point = split_point(self.split_key, vtask.key)
            part = "heldout" if point < heldout_share else "dev" if point < heldout_share + dev_share else "seed"
            parts[part].append(task)
        if not self.tasks:
            raise TypeError(f"verifiers taskset {self.taskset_id!r} loaded no task")
        needs = [fn.__name__ for fn in next(iter(self.tasks.values())).hooks("reward")
                 if (p := inspect.signature(fn).parameters.get("runtime")) is not None and p.default is p.empty]
        if needs:
            raise TypeError(f"verifiers taskset {self.taskset_id!r}: the rewards {', '.join(needs)} need a runtime "
                            "(a sandbox), which genenv's scoring does not start")
        self.parts = parts
        texts = "".join(t.text + t.prompt + (t.answer or "") for t in self.tasks_in_order())
        self.alphabet = string.printable + "".join(sorted(set(texts) - set(string.printable)))

    def tasks_in_order(self) -> list[Task]:
        return [*self.parts["heldout"], *self.parts["dev"], *self.parts["seed"]]

    def _genenv_task(self, vtask) -> Task:
        data = vtask.data.model_dump(mode="json", exclude_defaults=True, exclude={"idx"})
        answer = data.get(self.answer_field)
        prompt = "\n\n".join(part for part in (vtask.data.system_prompt, vtask.data.prompt_text) if part)
        return Task(json.dumps(data, sort_keys=True), prompt, None if answer is None else str(answer), 0,
                    meta={"key": vtask.key})

    def _verifiers_task(self, task: Task):
        known = self.tasks.get(task.text)
        if known is not None:
            return known
        data = self.task_type.data_type().model_validate(json.loads(task.text))
        return self.task_type(data, self.task_config)

    # -------------------------------------------------------------- data
    def data_fingerprint(self) -> str:
        """A hash of the tasks read, in order (the taskset's data: another version retrains cached warm starts)."""
        digest = hashlib.sha256()
        for text in self.tasks:
            digest.update(text.encode() + b"\0")
        return digest.hexdigest()[:16]

    def levels(self):
        return [0]

    def heldout_tasks(self, per_level):
        return self.parts["heldout"][:per_level]

    def dev_tasks(self, per_level):
        return self.parts["dev"][:per_level]

    def seed_tasks(self, rng, n):
        seeds = self.parts["seed"]
        return [seeds[i] for i in rng.permutation(len(seeds))[:n]]

    def warmstart_examples(self, task):
        return [] if task.answer is None else super().warmstart_examples(task)

    # -------------------------------------------------------------- simulator side (no grounding: see the module)
    def simulator_corpus(self, rng, n):
        seeds = self.parts["seed"] or self.tasks_in_order()
        picks = rng.integers(len(seeds), size=(n, 2))
        return [(seeds[a], {"success_rate": None}, seeds[b]) for a, b in picks]

    def simulator_prompt(self, seed, stats):
        return f"Write a new task like this one, as JSON:\n{seed.text}\nNew task:\n"

    def parse_task(self, text):
        """The taskset's task data as JSON, read by its own data model (never run); unknown tasks are not grounded
        here (``grounds_simulator_text``)."""
        raw = parse_json_object(text, ())
        if isinstance(raw, Invalid):
            return raw
        try:
            data = self.task_type.data_type().model_validate(raw)
        except (ValueError, TypeError) as error:
            return Invalid(f"not the taskset's task data: {str(error).splitlines()[0][:160]}", text)
        return self._genenv_task(self.task_type(data, self.task_config))

    def validate(self, task):
        """Only the taskset's own tasks: a verifiers taskset cannot say whether a task it does not hold is sound (a
        subclass that can overrides this and sets ``grounds_simulator_text``)."""
        if task.text not in self.tasks:
            return Invalid("not one of the taskset's tasks (a verifiers taskset cannot ground a new one)", task.text)
        return task

    # -------------------------------------------------------------- agent side
    def score(self, task, response):
        """The taskset's rewards of ``response`` (their weighted sum, verifiers' ``Trace.reward``)."""
        vtask = self._verifiers_task(task)
        nodes = []
        if vtask.data.system_prompt:
            nodes.append(vf.MessageNode(message=SystemMessage(content=vtask.data.system_prompt)))
        prompt = vtask.data.prompt
        for message in ([UserMessage(content=prompt)] if isinstance(prompt, str) else list(prompt or [])):
            nodes.append(vf.MessageNode(parent=len(nodes) - 1 if nodes else None, message=message))
        nodes.append(vf.MessageNode(parent=len(nodes) - 1 if nodes else None,
                                    message=AssistantMessage(content=str(response)), sampled=True))
        trace = vf.Trace(task=vf.TraceTask(type=type(vtask).__name__, data=vtask.data, key=vtask.key,
                                           hash=vtask.hash),
                         agent=vf.AgentInfo(config=vf.AgentConfig(), name="agent"), nodes=nodes)
        run_coroutine(vtask.score(trace))
        reward = float(trace.reward)
        return reward if np.isfinite(reward) else 0.0

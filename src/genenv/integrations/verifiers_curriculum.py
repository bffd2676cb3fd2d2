"""genenv's curriculum as an endless verifiers taskset: ``vf-eval genenv-curriculum`` (module ``genenv_curriculum``;
the ``verifiers`` extra; docs/verifiers.md).

``load()`` writes the tasks round after round, as genenv's loop writes them (:class:`genenv.integrations.trl.
SimulatorSide`: the curriculum's seeds, the simulator's tasks, the domain's validation, pool draws for the other
slots), each task one verifiers task (``INFINITE = True``; bound a run with ``-n``). Each rollout's reward is the
domain's (as :mod:`genenv.integrations.verifiers` scores it) and goes back to the curriculum through the state
folder's reward inbox (``rewards.jsonl``, a line a reward, appended): whichever process scores it, the process that
writes the tasks reads the inbox before each round, and once a round's every task has ``group_size`` rewards
(``vf-eval -r``) it observes the round: p_hat per task, R_env, the gate, the simulator's update where it trains, the
pools, the learnt seed draw. The curriculum's state (simulator weights and optimiser, pools, rounds written and not
yet observed, metrics a round) is saved in ``state`` after every round written and observed; a later ``load()`` on the
same folder goes on from it (the rounds written and not yet observed are served again first).
"""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path

import verifiers.v1 as vf
from pydantic import Field

from genenv.config import load_config
from genenv.domains.base import Task
from genenv.integrations.trl import SimulatorSide, grouped_rewards
from genenv.integrations.verifiers import DomainTask, DomainTaskData, first_message, wire_task
from genenv.io import atomic_write_json

INBOX, READ = "rewards.jsonl", "inbox_read.json"


class CurriculumTaskData(DomainTaskData):
    round: int
    """The curriculum's round that wrote the task."""
    state: str
    """The curriculum's state folder, where the task's rewards go (its reward inbox)."""


class CurriculumTask(DomainTask):
    """A task the curriculum wrote: its reward is the domain's, and it goes back to the curriculum."""

    @vf.reward(weight=1.0)
    async def reward(self, trace: vf.Trace) -> float:
        """The domain's reward of the replies (as :class:`DomainTask`), handed to the curriculum's inbox."""
        value = await DomainTask.reward(self, trace)
        if not trace.agent.trainable:   # vf-validate's checks, a judge's or a user simulator's seat: not the agent's
            return value
        text = self.data.genenv_task["text"]
        post(Path(self.data.state), self.data.round, text, value)
        live = Curriculum.live.get(str(Path(self.data.state).resolve()))
        if live is not None:   # the curriculum writes in this process: it learns now
            live.absorb()
        return value


def post(folder: Path, round_index: int, text: str, reward: float) -> None:
    """One reward appended to the inbox as one line (O_APPEND under an exclusive lock: whole lines, any process)."""
    folder.mkdir(parents=True, exist_ok=True)
    line = (json.dumps([round_index, text, reward]) + "\n").encode()
    descriptor = os.open(folder / INBOX, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        os.write(descriptor, line)
    finally:
        os.close(descriptor)


class CurriculumTasksetConfig(vf.TasksetConfig):
    preset: str = "default"
    """The genenv preset the curriculum is built from (``genenv config --presets``)."""
    overrides: list[str] = Field(default_factory=list)
    """Dotted overrides of the preset, as ``genenv run`` takes them (``domain.name=multihop``, ``env.backend=openai``
    with ``env.openai.base_url`` for a simulator behind an endpoint)."""
    state: str = "genenv-curriculum"
    """The folder of the curriculum's state and reward inbox; a later run on it goes on where it was."""
    group_size: int = Field(4, ge=1)
    """Rollouts a task gets (``vf-eval -r``): a round is observed once its every task has this many rewards."""


class Curriculum:
    """The process's curriculum of one state folder: the simulator side, and what of the inbox it has read."""

    live: dict[str, Curriculum] = {}

    @classmethod
    def of(cls, config: CurriculumTasksetConfig) -> Curriculum:
        key = str(Path(config.state).resolve())
        if key not in cls.live:
            cls.live[key] = cls(config)
        return cls.live[key]

    def __init__(self, config: CurriculumTasksetConfig):
        self.folder, self.group_size = Path(config.state), config.group_size
        self.cfg = load_config(config.preset, list(config.overrides))
        self.side = SimulatorSide(self.cfg, log=lambda message: None, main_process=True)
        self.rows: list[tuple[int, str, float]] = []   # rewards of rounds not yet observed
        self.read = 0   # bytes of the inbox read (whole lines)
        if (self.folder / "state.json").exists():
            self.rows = self.side.load(self.folder)
            self.read = json.loads((self.folder / READ).read_text())["bytes"]

    def absorb(self) -> list[dict]:
        """The inbox's new rewards; each round whose every task has ``group_size`` of them is observed (in order).
        Returns the observed rounds' metrics."""
        inbox = self.folder / INBOX
        if inbox.exists():   # only what was appended since the last read, up to its last whole line
            with inbox.open("rb") as file:
                file.seek(self.read)
                new = file.read()
            whole = new[:new.rfind(b"\n") + 1]
            self.rows += [tuple(json.loads(line)) for line in whole.decode().splitlines()]
            self.read += len(whole)
        observed = []
        for round_index, rewards in sorted(grouped_rewards(self.rows).items()):
            written = self.side.rounds.get(round_index)
            if written is None:
                continue
            tasks = [c.parsed.text for c in written[0] if c.valid] + [t.text for t in written[1]]
            if sum(map(len, rewards.values())) >= self.group_size * len(tasks):
                observed.append(self.side.observe(round_index, rewards))
                self.rows = [row for row in self.rows if row[0] != round_index]
        if observed:
            self.save()
        return observed

    def write_round(self) -> tuple[int, list[Task]]:
        round_index = self.side.next_round
        tasks = self.side.write_round(round_index)
        self.save()
        return round_index, tasks

    def save(self) -> None:
        self.side.save(self.folder, self.rows)
        atomic_write_json(self.folder / READ, {"bytes": self.read})


class CurriculumTaskset(vf.Taskset[CurriculumTask, CurriculumTasksetConfig]):
    """Tasks the curriculum writes, round after round, forever (see the module)."""

    INFINITE = True

    def load(self):
        curriculum = Curriculum.of(self.config)
        domain = curriculum.side.domain
        while True:
            curriculum.absorb()
            round_index, tasks = curriculum.write_round()
            for index, task in enumerate(tasks):
                _, observation = domain.reset(task, seed=0)
                yield CurriculumTask(CurriculumTaskData(
                    id=f"round{round_index}-{index}", prompt=first_message(observation),
                    system_prompt=domain.agent_instructions, domain=curriculum.cfg.domain.name,
                    options=curriculum.cfg.domain.options, split="curriculum", level=task.level,
                    genenv_task=wire_task(task), round=round_index, state=str(curriculum.folder)), self.config.task)


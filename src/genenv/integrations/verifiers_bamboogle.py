"""Bamboogle's 125 questions as a verifiers taskset, closed-book: ``vf-eval genenv-bamboogle`` (module
``genenv_bamboogle``; the ``verifiers`` extra; docs/verifiers.md). The benchmark's items, as genenv's
``eval --benchmark bamboogle`` asks and scores them without ``--corpus``: its system prompt and question, the reply's
first line (without a leading ``Answer:``) scored by the official exact match (the reward) and token F1 (a metric:
the official F1 pays a hedge of several answers, so it is reported, never trained on). The data stays where the user
keeps it: ``--env.taskset.data`` or ``$GENENV_BAMBOOGLE_DATA``.
"""

from __future__ import annotations

import verifiers.v1 as vf

from genenv.domains.multihop import bamboogle
from genenv.integrations.verifiers import DomainEnvConfig, replies


class BamboogleData(vf.TaskData):
    answer: str
    """The gold answer."""


class BamboogleTask(vf.Task[BamboogleData]):
    """One Bamboogle question; the reply's first line is its answer."""

    def answer_of(self, trace: vf.Trace) -> str:
        said = replies(trace)
        return bamboogle.extract_answer(said[0] if said else "")

    @vf.reward(weight=1.0)
    async def exact_match(self, trace: vf.Trace) -> float:
        """The official exact match after the SQuAD normalisation (the benchmark's EM)."""
        return bamboogle.exact_match(self.answer_of(trace), self.data.answer)

    @vf.metric
    async def f1(self, trace: vf.Trace) -> float:
        """The official token F1 (reported; a hedge earns it, so no reward)."""
        return bamboogle.token_f1(self.answer_of(trace), self.data.answer)

    async def validate(self, runtime) -> bool:
        """``vf-validate``'s gold check: the gold answer, as a reply, earns the exact match."""
        return bamboogle.exact_match(bamboogle.extract_answer(self.data.answer), self.data.answer) == 1.0


class BamboogleConfig(vf.TasksetConfig):
    data: str | None = None
    """bamboogle.jsonl or its folder (default ``$GENENV_BAMBOOGLE_DATA``)."""


class BamboogleTaskset(vf.Taskset[BamboogleTask, BamboogleConfig]):
    """Bamboogle's questions in the file's order."""

    def load(self):
        for question in bamboogle.load_questions(self.config.data):
            system, user = bamboogle.closed_book_messages(question["question"])
            yield BamboogleTask(BamboogleData(id=str(question["id"]), prompt=user["content"],
                                              system_prompt=system["content"], answer=question["answer"]),
                                self.config.task)


class BamboogleEnv(vf.Env[DomainEnvConfig]):
    """One reply per question, on the null harness (the seat's default, as genenv's domain tasksets have it)."""

    async def run(self, task, agents) -> None:
        await agents.agent.run(task)

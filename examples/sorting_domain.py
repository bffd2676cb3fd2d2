"""A complete genenv domain outside the library: sort a list of digits (level = the list's length).

Run it without installing anything (the module only has to be importable):

    PYTHONPATH=examples genenv run --preset smoke domain.name=sorting_domain:SortingDomain

or, from a package of your own, register it by name through an entry point in your pyproject.toml:

    [project.entry-points."genenv.domains"]
    sorting = "sorting_domain:SortingDomain"

and run ``genenv run domain.name=sorting``. Every command (run, --resume, compare, report) finds it the same way.
"""

from __future__ import annotations

import numpy as np

from genenv.domains import Invalid, Task, TaskShape
from genenv.domains.base import LeveledDomain


class SortingDomain(LeveledDomain):
    """Sort a list of digits: '3 1 2' -> '1 2 3'."""

    # every character of task texts, prompts, answers and the simulator prompt (tiny models encode only these)
    alphabet = "0123456789 =>|s?"
    seed_levels = [2, 3]
    heldout_seed, dev_seed = 11, 12
    agent_max_new_tokens = 12      # the longest answer: 6 digits and 5 spaces, then end of text
    env_max_new_tokens = 12

    def levels(self) -> list[int]:
        return [2, 3, 4, 5, 6]

    def level_size(self, level: int) -> int:
        return 10 ** level           # lists of `level` digits

    def make_task(self, digits: list[int]) -> Task:
        text = " ".join(map(str, digits))
        return Task(text=text, prompt=text + "=", answer=" ".join(map(str, sorted(digits))), level=len(digits))

    def random_task(self, rng: np.random.Generator, level: int) -> Task:
        return self.make_task([int(d) for d in rng.integers(0, 10, size=level)])

    # the simulator sees the success rate on a seed task and writes a new list
    def simulator_prompt(self, seed: Task, stats: dict) -> str:
        rate = stats.get("success_rate")
        return f"s{'?' if rate is None else min(9, int(rate * 10))}|{seed.text}>"

    # optional: the shape of every task text (2-6 digits, one space apart); `env.constrained=true` makes the
    # simulator write only text of this shape, and `genenv check-domain` checks the seed tasks have it
    def task_shape(self) -> TaskShape:
        return TaskShape(regex=r"[0-9]( [0-9]){1,5}")

    def parse_task(self, text: str) -> Task | Invalid:
        parts = text.strip().split(" ")
        if not all(len(p) == 1 and p in "0123456789" for p in parts):   # not isdigit: "¹" is a digit to it
            return Invalid("not single digits separated by spaces", text)
        if not 2 <= len(parts) <= 6:
            return Invalid("length outside 2-6", text)
        return self.make_task([int(p) for p in parts])   # the answer is computed here, never taken on trust

    def score(self, task: Task, response: str) -> float:
        return float(response.strip() == task.answer)

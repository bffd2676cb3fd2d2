"""A complete genenv domain outside the library: sort a list of digits (level = the list's length).

Run it without installing anything (the module only has to be importable):

    PYTHONPATH=examples genenv run --preset smoke domain.name=sorting_domain:SortingDomain

or, from a package of your own, register it by name through an entry point in your pyproject.toml:

    [project.entry-points."genenv.domains"]
    sorting = "sorting_domain:SortingDomain"

and run ``genenv run domain.name=sorting``. Every command (run, --resume, compare, report) finds it the same way.

It also brings a benchmark (``add_arguments`` declares its options, ``from_command_line`` runs it), which an entry
point makes ``genenv eval --benchmark sorting``:

    [project.entry-points."genenv.benchmarks"]
    sorting = "sorting_domain"

    genenv eval --benchmark sorting --model FOLDER --lengths 2,3,4 --tasks 50
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


# ----- the benchmark: a model's greedy answers on fresh lists of each length -----------------------------------

def add_arguments(parser) -> None:
    """``genenv eval --benchmark sorting``'s own options."""
    parser.add_argument("--lengths", default="2,3,4,5,6", help="comma-separated list lengths to evaluate")
    parser.add_argument("--tasks", type=int, default=50, help="lists per length")
    parser.add_argument("--seed", type=int, default=0, help="the random lists' seed")


def from_command_line(args, common: dict) -> dict:
    """Exact-match accuracy per length and overall, written to OUT/scores.json and every answer to results.jsonl."""
    from genenv.eval_driver import greedy_responses, load_eval_policy, save_results  # noqa: PLC0415 (torch)
    try:
        lengths = [int(v) for v in args.lengths.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--lengths: {args.lengths!r} is not a comma-separated list of lengths") from None
    domain, rng = SortingDomain(), np.random.default_rng(args.seed)
    tasks = [domain.random_task(rng, length) for length in lengths for _ in range(args.tasks)]
    policy = load_eval_policy(args.model, print, common["device"], common["threads"], common["sampler"],
                              sampler_dtype=common["sampler_dtype"])
    answers = greedy_responses(policy, [t.prompt for t in tasks], domain.agent_max_new_tokens, args.batch_size)
    rows = [{"task": t.text, "length": t.level, "answer": a, "correct": domain.score(t, a or "")}
            for t, a in zip(tasks, answers)]
    by_length = {str(n): float(np.mean([r["correct"] for r in rows if r["length"] == n])) for n in lengths}
    scores = {"model": args.model, "accuracy": float(np.mean([r["correct"] for r in rows])), "by_length": by_length,
              "tasks": len(rows)}
    save_results(args.out, rows, scores)
    print(f"sorting: accuracy {scores['accuracy']:.3f} over {len(rows)} lists")
    return scores

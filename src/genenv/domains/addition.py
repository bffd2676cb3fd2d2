"""Fixed-width addition, least-significant digit first: the embedded default domain.

A task is two ``width``-digit numbers written LSD-first and zero-padded, e.g. ``21000000+53000000`` is
12 + 35. The agent answers with the ``width + 1``-digit sum, also LSD-first (``74000000`` + a final 0).
The level of a task is the number of significant digits of its longer operand (1..width): harder levels
need the carry skill of the easier ones. Seed tasks cover only levels 1-2; the held-out set covers all.

Why this format: with variable-length, most-significant-first numbers a tiny model warm-started on 1-2
digits scores exactly 0 on 3 digits, so RL gets no signal and no curriculum can matter. Fixed width and
LSD-first order leave a small non-zero success on the next level, which GRPO can climb.

The simulator is prompted with a seed task and the agent's recent success, ``s5|21000000+53000000>``
(``s5`` = success about 0.5; ``s?`` unknown) and writes a task in the same form. Its warm-start corpus pairs a
seed with a task of any level, or, with ``variation_span=k`` (beyond the paper), of a level within k of the
seed's, so the warm-started simulator writes variations near its seed. ``validate`` recomputes
the answer, so a simulator cannot teach a wrong sum.
"""

from __future__ import annotations

import re

import numpy as np

from genenv.domains.base import Invalid, LeveledDomain, Task, TaskShape, register

HELDOUT_SEED = 20251222
DEV_SEED = 777


@register("addition")
class AdditionDomain(LeveledDomain):
    heldout_seed = HELDOUT_SEED
    dev_seed = DEV_SEED
    alphabet = "0123456789+=|>s? "
    ordered_levels = True   # level L = L significant digits per operand

    def __init__(self, width: int = 8, seed_levels: list[int] | None = None, reward: str = "exact",
                 variation_span: int | None = None):
        if not isinstance(width, int) or not 2 <= width <= 20:
            raise TypeError(f"width must be an integer in [2, 20], got {width!r}")
        if reward not in ("exact", "digits"):
            raise TypeError(f"reward must be 'exact' or 'digits', got {reward!r}")
        if variation_span is not None and (not isinstance(variation_span, int) or not 0 <= variation_span < width):
            raise TypeError(f"variation_span must be null or an integer in [0, {width - 1}], got {variation_span!r}")
        self.variation_span = variation_span
        self.reward = reward
        self.width = width
        self.seed_levels = list(seed_levels or [1, 2])
        if any(not isinstance(lv, int) or not 1 <= lv <= width for lv in self.seed_levels):
            raise TypeError(f"seed_levels must be integers in [1, {width}], got {self.seed_levels!r}")
        self.agent_max_new_tokens = width + 2
        self.env_max_new_tokens = 2 * width + 2
        self._pattern = re.compile(rf"^([0-9]{{{width}}})\+([0-9]{{{width}}})$")

    # -------------------------------------------------------------- helpers
    def levels(self) -> list[int]:
        return list(range(1, self.width + 1))

    def _encode(self, value: int, width: int) -> str:
        return str(value).zfill(width)[::-1]

    def make_task(self, a: int, b: int) -> Task:
        text = f"{self._encode(a, self.width)}+{self._encode(b, self.width)}"
        level = max(len(str(a)) if a else 1, len(str(b)) if b else 1)
        return Task(text=text, prompt=text + "=", answer=self._encode(a + b, self.width + 1), level=level,
                    meta={"a": a, "b": b})

    def difficulty_measures(self, task: Task) -> dict[str, int]:
        """Candidate difficulty measures of a task (``benchmarks/difficulty_correlation.py``, at commit 0c7cab3,
        measured how well each predicts the agent's success): the level (digits of the longer operand), the shorter
        operand's digits, both operands' digits, the number of carries and the longest run of consecutive carries."""
        a, b = task.meta["a"], task.meta["b"]
        digits = [len(str(a)) if a else 1, len(str(b)) if b else 1]
        carries = longest = run = carry = 0
        for position in range(self.width):
            carry = int((a // 10 ** position) % 10 + (b // 10 ** position) % 10 + carry >= 10)
            carries += carry
            run = run + 1 if carry else 0
            longest = max(longest, run)
        return {"level": task.level, "shorter_operand_digits": min(digits), "operand_digits": sum(digits),
                "carries": carries, "longest_carry_chain": longest}

    def random_task(self, rng: np.random.Generator, level: int) -> Task:
        """Both operands have at most ``level`` digits and at least one has exactly ``level``."""
        low = 10 ** (level - 1) if level > 1 else 0
        high = 10 ** level
        a = int(rng.integers(low, high))
        b = int(rng.integers(0, high))
        if rng.random() < 0.5:
            a, b = b, a
        return self.make_task(a, b)

    # -------------------------------------------------------------- data
    def level_size(self, level):
        """Pairs whose longer operand has ``level`` digits: 100 at level 1, 10^(2L) - 10^(2L-2) above."""
        return 100 if level == 1 else 10 ** (2 * level) - 10 ** (2 * level - 2)

    def corpus_seed_level(self, rng):
        return int(rng.integers(1, self.width + 1))

    def corpus_task_level(self, rng):
        return int(rng.integers(1, self.width + 1))

    # -------------------------------------------------------------- simulator side
    def simulator_prompt(self, seed, stats):
        rate = stats.get("success_rate")
        bucket = "?" if rate is None else str(min(9, int(rate * 10)))
        return f"s{bucket}|{seed.text}>"

    def task_shape(self):
        """Two ``width``-digit operands and a plus, nothing else."""
        return TaskShape(regex=rf"[0-9]{{{self.width}}}\+[0-9]{{{self.width}}}")

    def parse_task(self, text):
        if not isinstance(text, str):
            return Invalid("not text", repr(text))
        body = text.strip()
        match = self._pattern.match(body)
        if not match:
            if "+" not in body:
                return Invalid("no '+' between operands", text)
            left, _, right = body.partition("+")
            if not (left.isdigit() and right.isdigit() and left.isascii() and right.isascii()):
                return Invalid("non-digit characters", text)
            return Invalid(f"operands must have exactly {self.width} digits", text)
        a = int(match.group(1)[::-1])
        b = int(match.group(2)[::-1])
        return self.make_task(a, b)

    def validate(self, task):
        a, b = task.meta.get("a"), task.meta.get("b")
        if a is None or b is None:
            return Invalid("missing operands", task.text)
        # Ground the task: the reference answer is recomputed here, never taken from the simulator.
        return self.make_task(int(a), int(b))

    # -------------------------------------------------------------- agent side
    def score(self, task, response):
        """1.0 for the exact sum. ``reward="digits"``: otherwise, for a response made of ASCII digits only, the
        share of the answer's positions written right, over the longer of answer and response (a partial credit
        GRPO can climb where exact success is never sampled; success, p_hat and evaluation count only 1.0:
        ``success_threshold``); anything else (the task echoed back, punctuation) earns 0."""
        response = response.strip()
        if response == task.answer:
            return 1.0
        if self.reward == "exact" or not (response.isascii() and response.isdigit()):
            return 0.0
        right = sum(a == b for a, b in zip(response, task.answer))
        return right / max(len(response), len(task.answer))

"""reasoning-gym's procedural task families, each with its own verifier and difficulty levels: the simulator
writes a family, levels and a seed, reasoning-gym builds the item (options: datasets=[basic_arithmetic, ...]).

reasoning-gym (PyPI ``reasoning-gym``) generates items of over a hundred task families from a configuration and
a seed, verifies answers with each family's own scorer, and describes each family's difficulty as a curriculum of
attributes with levels (basic_arithmetic: ``num_terms`` 2..6, ``num_digits`` 1..4). Here the simulator does not
write the question: it writes a task *specification*, which the domain grounds by building the item with
reasoning-gym:

    basic_arithmetic num_terms=1 num_digits=0 seed=48213

(the family, each attribute's level index in reasoning-gym's curriculum, the generator's seed). The agent sees the
item's question and is scored by the family's own ``score_answer``: 1 when it says correct, else 0
(``reward=exact``; several families give 0.01-0.1 to any well-formed answer, which would pay format, not
correctness; ``reward=partial`` passes their score through). A task's level is 1 + the sum of its attribute
level indices, so levels are ordered by difficulty (``ordered_levels``). Training seed tasks are levels 1-2; the
held-out, dev and training sets use disjoint generator seed ranges (held-out [0, 100000), dev [100000, 200000),
everything else [200000, 1000000)), so no item of the evaluation sets is generated for training except by a
specification equal to one of them, which the library rejects.

Needs ``pip install 'genenv-coevolve[reasoning-gym]'`` (``make install`` has it). Questions of some families use
characters outside printable ASCII: those need a real model (``agent.model=smollm2``), the tiny tokenizer says so.
"""

from __future__ import annotations

import re
from functools import lru_cache

import numpy as np

from genenv.domains.base import Invalid, LeveledDomain, Task, TaskShape, register

HELDOUT_SEEDS, DEV_SEEDS, TRAIN_SEEDS = (0, 100_000), (100_000, 200_000), (200_000, 1_000_000)
SPEC = re.compile(r"^\s*([a-z_0-9]+)((?:\s+[a-z_0-9]+=\d{1,2})*)\s+seed=(\d{1,7})\s*$")


def _reasoning_gym():
    try:
        import reasoning_gym  # noqa: PLC0415 (optional: the reasoning-gym extra)
        from reasoning_gym import factory  # noqa: PLC0415
    except ImportError:
        raise ValueError("domain reasoning_gym needs reasoning-gym: "
                         "pip install 'genenv-coevolve[reasoning-gym]'") from None
    return reasoning_gym, factory


@lru_cache(maxsize=64)
def _attributes(dataset: str) -> tuple[tuple[str, int], ...]:
    """(attribute, number of levels) of a family's curriculum, in its own order."""
    _, factory = _reasoning_gym()
    curriculum = factory.create_curriculum(dataset)
    return tuple((name, len(attribute.levels)) for name, attribute in curriculum.attributes.items())


@lru_cache(maxsize=64)
def _scorer(dataset: str):
    """The family's ``score_answer``, built once: reasoning-gym's ``get_score_answer_fn`` constructs the family's
    dataset on every call (spell_backward loads its word list: 30 ms a score, 95% of a tiny run's time)."""
    _, factory = _reasoning_gym()
    return factory.get_score_answer_fn(dataset)


@lru_cache(maxsize=4096)
def _item(dataset: str, levels: tuple[tuple[str, int], ...], seed: int) -> dict:
    """The one item a specification names (cached: a task is scored many times)."""
    reasoning_gym, factory = _reasoning_gym()
    curriculum = factory.create_curriculum(dataset)
    for name, level in levels:
        curriculum.set_attr_level(name, level)
    config = curriculum.generate_configuration({"seed": seed, "size": 1})
    return reasoning_gym.create_dataset(dataset, **vars(config))[0]


@register("reasoning_gym")
class ReasoningGymDomain(LeveledDomain):
    alphabet = "".join(chr(c) for c in range(32, 127)) + "\n"
    heldout_seed, dev_seed = 4242, 4343
    seed_levels = [1, 2]
    ordered_levels = True
    agent_max_new_tokens = 24
    env_max_new_tokens = 40

    def __init__(self, datasets: list[str] | tuple[str, ...] = ("basic_arithmetic",), max_level: int | None = None,
                 variation_span: int | None = None, reward: str = "exact"):
        _, factory = _reasoning_gym()
        if reward not in ("exact", "partial"):
            raise ValueError(f"reward: {reward!r} is not exact or partial")
        self.reward = reward
        # partial: the family's own score as it is, including the credit some give any well-formed answer
        self.null_response_floor = 0.0 if reward == "exact" else 0.1
        datasets = [datasets] if isinstance(datasets, str) else list(datasets)
        unknown = [d for d in datasets if d not in factory.DATASETS]
        no_curriculum = [d for d in datasets if d in factory.DATASETS and not factory.has_curriculum(d)]
        if not datasets or unknown or no_curriculum:
            raise ValueError(f"datasets: {unknown or no_curriculum or datasets} "
                             f"{'are not reasoning-gym families' if unknown else 'have no difficulty curriculum'}; "
                             f"e.g. {', '.join(sorted(d for d in factory.CURRICULA)[:8])}")
        self.datasets = datasets
        most = max(1 + sum(count - 1 for _, count in _attributes(d)) for d in datasets)
        self.max_level = min(most, max_level) if max_level else most
        self.variation_span = variation_span
        # whole words of the tiny tokenizer: the families' and attributes' names and "seed"
        self.tiny_words = tuple(sorted({*datasets, *(name for d in datasets for name, _ in _attributes(d)),
                                        "seed"}, key=len, reverse=True))

    def levels(self) -> list[int]:
        return list(range(1, self.max_level + 1))

    # -------------------------------------------------------------- tasks
    def make_task(self, dataset: str, levels: dict[str, int], seed: int) -> Task:
        ordered = tuple((name, int(levels[name])) for name, _ in _attributes(dataset))
        item = _item(dataset, ordered, int(seed))
        text = " ".join([dataset, *(f"{name}={level}" for name, level in ordered), f"seed={seed}"])
        return Task(text, f"{item['question']}\nAnswer: ", str(item["answer"]), 1 + sum(level for _, level in ordered),
                    meta={"dataset": dataset, "levels": dict(ordered), "seed": int(seed)})

    def _draw(self, rng: np.random.Generator, level: int, seeds: tuple[int, int]) -> Task:
        """A task of ``level``: a family that reaches it, its attribute levels summing to level - 1 (spread at
        random), a generator seed from ``seeds``."""
        reaching = [d for d in self.datasets if 1 + sum(c - 1 for _, c in _attributes(d)) >= level]
        dataset = reaching[int(rng.integers(len(reaching)))]
        attributes = list(_attributes(dataset))
        levels = {name: 0 for name, _ in attributes}
        for _ in range(level - 1):
            room = [name for name, count in attributes if levels[name] < count - 1]
            levels[room[int(rng.integers(len(room)))]] += 1
        return self.make_task(dataset, levels, int(rng.integers(*seeds)))

    def random_task(self, rng: np.random.Generator, level: int) -> Task:
        return self._draw(rng, level, TRAIN_SEEDS)

    def _level_set(self, seed: int, per_level: int) -> list[Task]:
        seeds = HELDOUT_SEEDS if seed == self.heldout_seed else DEV_SEEDS if seed == self.dev_seed else TRAIN_SEEDS
        rng = np.random.default_rng(seed)
        return [self._draw(rng, level, seeds) for level in self.levels() for _ in range(per_level)]

    # -------------------------------------------------------------- the simulator's side
    def simulator_prompt(self, seed: Task, stats: dict) -> str:
        rate = stats.get("success_rate")
        return f"s{'?' if rate is None else min(9, int(rate * 10))}|{seed.text}>"

    def task_shape(self):
        """A specification as the domain writes it: one of ``datasets``, each attribute of its curriculum in the
        curriculum's order with a level index in range, a training seed below 10^6. Left to ``validate``: the
        sum of levels within ``max_level``, reasoning-gym accepting the configuration."""
        def family(dataset):
            pairs = "".join(f" {name}=(?:{'|'.join(str(i) for i in range(count))})"
                            for name, count in _attributes(dataset))
            return re.escape(dataset) + pairs
        return TaskShape(regex=f"(?:{'|'.join(family(d) for d in self.datasets)}) seed=[0-9]{{1,6}}")

    def parse_task(self, text: str) -> Task | Invalid:
        """A specification, e.g. ``basic_arithmetic num_terms=1 num_digits=0 seed=48213``: a family of
        ``datasets``, every attribute of its curriculum once with a level index in range, a seed below 10^6."""
        match = SPEC.match(text)
        if not match:
            return Invalid("not '<family> <attribute>=<level> ... seed=<n>'", text)
        dataset, pairs, seed = match.group(1), match.group(2).split(), int(match.group(3))
        if dataset not in self.datasets:
            return Invalid("family not in domain.options.datasets", text)
        attributes = dict(_attributes(dataset))
        levels = dict(pair.split("=") for pair in pairs)
        if len(levels) != len(pairs) or set(levels) != set(attributes):
            return Invalid("not each of the family's attributes once", text)
        levels = {name: int(value) for name, value in levels.items()}
        if any(not 0 <= levels[name] < count for name, count in attributes.items()):
            return Invalid("an attribute level out of range", text)
        if seed >= TRAIN_SEEDS[1]:
            return Invalid("seed out of range", text)
        if 1 + sum(levels.values()) > self.max_level:
            return Invalid("above domain.options.max_level", text)
        try:
            return self.make_task(dataset, levels, seed)
        except Exception as err:  # noqa: BLE001 (reasoning-gym rejecting a configuration: an invalid task)
            return Invalid(f"reasoning-gym could not build it ({type(err).__name__})", text)

    # -------------------------------------------------------------- the agent's side
    def score(self, task: Task, response: str) -> float:
        meta = task.meta
        item = _item(meta["dataset"], tuple((name, int(level)) for name, level in meta["levels"].items()),
                     int(meta["seed"]))
        try:
            reward = float(_scorer(meta["dataset"])(answer=response.strip(), entry=item))
        except Exception:  # noqa: BLE001 (a family's scorer failing on odd text scores it 0, never crashes)
            return 0.0
        if reward != reward:
            return 0.0
        if self.reward == "exact":   # the family's verdict "correct" (several give 0.01-0.1 to any answer)
            return float(reward >= 1.0)
        return min(1.0, max(0.0, reward))

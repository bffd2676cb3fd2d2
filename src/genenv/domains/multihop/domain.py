"""Multi-hop question answering with a search tool, over a small fact base each task carries.

A task is a little world of facts (subject, relation, object triples rendered as short sentences), a question
that follows a chain of 2-4 relations from a start entity, and its answer. The simulator writes one as JSON::

    {"facts": [["Ulla Voss", "born_in", "Kardon"], ["Kardon", "city_in", "Mirrel"], ...],
     "start": "Ulla Voss", "path": ["born_in", "city_in"], "answer": "Mirrel"}

and the domain grounds it by following the chain itself: every relation is known and every fact has the
relation's kinds of entities; from the start each hop leads to exactly one entity (a missing link or two
candidates is rejected), the chain never revisits an entity (a cycle), it ends at the stated answer, and no
single fact links the start to the answer (a one-hop shortcut). The question text is rendered from the chain
by templates ("In which country is the city where Ulla Voss was born?"), so it always says what the chain means.

The agent acts in turns: ``search: <query>`` returns the task's facts that best match the query (BM25 from the
``rank_bm25`` package over the fact sentences), ``answer: <text>`` ends the episode. Reward: exact match after
the SQuAD normalisation (``reward: em``, default, the Bamboogle evaluation's EM) or token F1 of an answer whose every
token is in the reference (``reward: f1``, :func:`single_answer_f1`; the evaluation's official F1 pays hedges).
``level`` = hops; difficulty adds the distractor facts.
"""

from __future__ import annotations

import collections
import json
import string

from genenv.constrained.references import MEMBER_OF
from genenv.domains.base import Invalid, LeveledDomain, StepResult, Task, TaskShape, register, transcript
from genenv.domains.jsontask import parse_json_object, stated_rate
from genenv.domains.multihop import bamboogle
from genenv.domains.multihop.bamboogle import exact_match, normalize_answer, read_action, search_observation, token_f1
from genenv.domains.multihop.retrieval import Bm25Index

# relation -> (subject kind, object kind, noun phrase of the object given the subject's phrase X)
RELATIONS = {
    "born_in": ("person", "city", "the city where {} was born"),
    "works_for": ("person", "company", "the company {} works for"),
    "married_to": ("person", "person", "the spouse of {}"),
    "founded_by": ("company", "person", "the founder of {}"),
    "based_in": ("company", "city", "the city {} is based in"),
    "city_in": ("city", "country", "the country {} is in"),
    "mayor_of": ("city", "person", "the mayor of {}"),
    "capital_of": ("country", "city", "the capital of {}"),
    "leader_of": ("country", "person", "the leader of {}"),
}
SENTENCES = {
    "born_in": "{} was born in {}.", "works_for": "{} works for {}.", "married_to": "{} is married to {}.",
    "founded_by": "{} was founded by {}.", "based_in": "{} is based in {}.", "city_in": "{} is a city in {}.",
    "mayor_of": "The mayor of {} is {}.", "capital_of": "The capital of {} is {}.",
    "leader_of": "The leader of {} is {}.",
}
KEYWORD = {"born_in": "born", "works_for": "works", "married_to": "married", "founded_by": "founded",
           "based_in": "based", "city_in": "city", "mayor_of": "mayor", "capital_of": "capital", "leader_of": "leader"}
QUESTIONS = {"born_in": "Where was {} born?", "works_for": "Which company does {} work for?",
             "married_to": "Who is {} married to?", "founded_by": "Who founded {}?",
             "based_in": "In which city is {} based?", "city_in": "In which country is {}?",
             "mayor_of": "Who is the mayor of {}?", "capital_of": "What is the capital of {}?",
             "leader_of": "Who is the leader of {}?"}
MAX_FACTS, MAX_NAME = 24, 40
SYLLABLES = ["ka", "lo", "mi", "ren", "tas", "vo", "bel", "dor", "fi", "gan", "hul", "ix", "jor", "nel", "pra",
             "qui", "sol", "tor", "ul", "wen", "zar", "ost", "ema", "rik"]
COMPANY_SUFFIX = ["Works", "Labs", "Group", "Foods", "Motors"]


def single_answer_f1(prediction: str, gold: str) -> float:
    """The training reward ``reward: f1``: the official token F1 (:func:`token_f1`) of a prediction whose every
    normalised token is in the reference (as many times), else 0. The official F1 pays a hedge: ``W G``, a wrong and
    the right answer together, earns 0.67 where ``W`` alone earns 0, which an agent would learn; here a hedge earns
    no more than its wrong answer alone (0), while a part of the answer (``Kardon`` for ``New Kardon``: 0.67) still
    earns partial credit. The Bamboogle evaluation keeps the official F1."""
    pred, ref = normalize_answer(prediction).split(), normalize_answer(gold).split()
    if collections.Counter(pred) - collections.Counter(ref):
        return 0.0
    return token_f1(prediction, gold)


def question_text(start: str, path: list[str]) -> str:
    """The chain as one question: the innermost phrase is the start, each hop wraps it."""
    phrase = start
    for relation in path[:-1]:
        phrase = RELATIONS[relation][2].format(phrase)
    return QUESTIONS[path[-1]].format(phrase)


def fact_sentence(fact: list[str]) -> str:
    subject, relation, obj = fact
    return SENTENCES[relation].format(subject, obj)


@register("multihop")
class MultiHopDomain(LeveledDomain):
    """Multi-hop question answering with a search tool over the facts each task carries (Bamboogle's format).

    Options: ``reward`` ('em' or 'f1': :func:`single_answer_f1`), ``search_top_k`` (facts per search),
    ``max_steps`` (actions per episode), ``distractors`` (extra facts per task in the procedural worlds, on top of
    the level's share)."""

    alphabet = string.printable
    multi_turn = True
    agent_max_new_tokens = 24
    agent_instructions = bamboogle.SEARCH_PROMPT
    env_max_new_tokens = 384
    seed_levels = [2]
    heldout_seed, dev_seed = 31, 32

    def __init__(self, reward: str = "em", search_top_k: int = 3, max_steps: int = 6, distractors: int = 2):
        if reward not in ("em", "f1"):
            raise TypeError(f"reward must be 'em' or 'f1', got {reward!r}")
        self.reward, self.search_top_k, self.distractors = reward, int(search_top_k), int(distractors)
        self.max_steps = self.max_turns = int(max_steps)

    def levels(self):
        return [2, 3, 4]

    # -------------------------------------------------------------- tasks
    def make_task(self, facts: list[list[str]], start: str, path: list[str], answer: str) -> Task | Invalid:
        problem = ground(facts, start, path, answer)
        if problem:
            return Invalid(problem, "")
        text = json.dumps({"facts": facts, "start": start, "path": path, "answer": answer})
        question = question_text(start, path)
        return Task(text, f"Question: {question}\n", answer, len(path),
                    meta={"facts": facts, "question": question})

    def random_task(self, rng, level):
        for _ in range(100):
            task = self.make_task(*random_world(rng, level, self.distractors + level - 2))
            if isinstance(task, Task):
                return task
        raise RuntimeError(f"no valid world of {level} hops in 100 draws")

    def difficulty(self, task):
        return float(task.level) + 0.1 * len(task.meta.get("facts", []))

    # -------------------------------------------------------------- simulator side
    def simulator_prompt(self, seed, stats):
        known = stated_rate(stats)
        return (f"Write a new task like this one (solved at rate {known}; aim for about half):\n{seed.text}\n"
                "New task:\n")

    def task_shape(self):
        """1-24 facts, each [entity, known relation, entity] of non-empty names up to 40 characters; a start
        entity and an answer named in the facts, a path of 2-4 known relations the facts use
        (``x-member-of``: strings of the facts written before them). Left to ``validate``:
        entities of consistent kinds, no repeated fact, the path followed from the start reaching the answer and
        nothing else."""
        name = {"type": "string", "minLength": 1, "maxLength": MAX_NAME}
        relation = {"enum": sorted(RELATIONS)}
        in_facts = {MEMBER_OF: ["facts"]}   # one of the facts' strings written before (constrained.references)
        return TaskShape(json_schema={
            "type": "object", "additionalProperties": False, "required": ["facts", "start", "path", "answer"],
            "properties": {
                "facts": {"type": "array", "minItems": 1, "maxItems": MAX_FACTS,
                          "items": {"type": "array", "prefixItems": [name, relation, name], "items": False,
                                    "minItems": 3}},
                "start": {**name, **in_facts},
                "path": {"type": "array", "items": {**relation, **in_facts}, "minItems": 2, "maxItems": 4},
                "answer": {**name, **in_facts}}})

    def parse_task(self, text):
        data = parse_json_object(text, ("facts", "start", "path", "answer"))
        if isinstance(data, Invalid):
            return data
        return Task(text, "", None, 0, meta={"parts": (data["facts"], data["start"], data["path"], data["answer"])})

    def validate(self, task):
        parts = task.meta.get("parts")
        if parts is None:
            return Invalid("not a parsed task", task.text)
        grounded = self.make_task(*parts)
        return Invalid(grounded.reason, task.text) if isinstance(grounded, Invalid) else grounded

    # -------------------------------------------------------------- agent side
    def reset(self, task, seed=0):
        facts = task.meta.get("facts") or json.loads(task.text)["facts"]
        sentences = [fact_sentence(f) for f in facts]
        return {"task": task, "index": Bm25Index(sentences), "steps": 0}, task.prompt

    def step(self, state, action):
        steps = state["steps"] + 1
        state = {**state, "steps": steps}
        _, verb, argument = read_action(str(action))
        if verb == "answer":
            return StepResult("", self.score(state["task"], argument), terminated=True, truncated=False, state=state)
        observation = search_observation(verb, argument, lambda query: self.search(state, query))
        return StepResult(observation, 0.0, terminated=False, truncated=steps >= self.max_steps, state=state)

    def search(self, state, query: str) -> list[str]:
        return state["index"].search(query, self.search_top_k)

    def score(self, task, response):
        answer = str(response).strip()
        if answer.lower().startswith("answer:"):
            answer = answer[len("answer:"):].strip()
        if not normalize_answer(answer) or not normalize_answer(task.answer or ""):
            return 0.0   # nothing to match: an empty answer never earns (SQuAD's EM gives "" == "" full credit)
        return exact_match(answer, task.answer) if self.reward == "em" else single_answer_f1(answer, task.answer)

    def agent_context(self, history, observation):
        return transcript(history, observation)

    def expert_steps(self, task):
        """Search each hop's entity with the relation's word in turn, then answer (the domain knows the chain)."""
        data = json.loads(task.text)
        state, observation = self.reset(task)
        history, steps, entity = [], [], data["start"]
        for relation in data["path"]:
            action = f"search: {entity} {KEYWORD[relation]}"
            steps.append((list(history), observation, action))
            result = self.step(state, action)
            history.append((observation, action))
            state, observation = result.state, result.observation
            entity = follow(data["facts"], entity, relation)[0]
        steps.append((list(history), observation, f"answer: {task.answer}"))
        return steps

    def warmstart_examples(self, task):
        return self.expert_steps(task)


# ============================================================================ grounding

def follow(facts: list[list[str]], entity: str, relation: str) -> list[str]:
    return [obj for subject, rel, obj in facts if subject == entity and rel == relation]


def entity_kinds(facts: list[list[str]]) -> dict[str, str] | str:
    """Each entity's kind from the relations it takes part in, or the reason two facts disagree."""
    kinds: dict[str, str] = {}
    for subject, relation, obj in facts:
        for entity, kind in ((subject, RELATIONS[relation][0]), (obj, RELATIONS[relation][1])):
            if kinds.setdefault(entity, kind) != kind:
                return f"{entity!r} is both a {kinds[entity]} and a {kind}"
    return kinds


def ground(facts, start, path, answer) -> str | None:
    """Why the task is not a well-posed multi-hop question, or None."""
    if not isinstance(facts, list) or not 1 <= len(facts) <= MAX_FACTS:
        return f"facts must be a list of 1-{MAX_FACTS} [subject, relation, object] triples"
    for fact in facts:
        if not (isinstance(fact, list) and len(fact) == 3 and all(isinstance(x, str) and x.strip() for x in fact)):
            return "a fact is not three non-empty strings"
        if fact[1] not in RELATIONS:
            return f"unknown relation {fact[1]!r}"
        if any(len(x) > MAX_NAME for x in (fact[0], fact[2])) or fact[0] == fact[2]:
            return "an entity name is too long or a fact links an entity to itself"
    if len({tuple(f) for f in facts}) != len(facts):
        return "a fact is repeated"
    kinds = entity_kinds(facts)
    if isinstance(kinds, str):
        return kinds
    if not isinstance(path, list) or not 2 <= len(path) <= 4 or not all(isinstance(r, str) for r in path):
        return "path must be a list of 2-4 relations"
    if any(r not in RELATIONS for r in path):
        return "the path uses an unknown relation"
    if not isinstance(start, str) or start not in kinds:
        return "the start entity is not in the facts"
    if not isinstance(answer, str) or not answer.strip():
        return "answer must be a non-empty string"
    if not normalize_answer(answer):
        return f"answer {answer!r} is empty after the scorer's normalisation (articles and punctuation)"
    entity, seen = start, [start]
    for hop, relation in enumerate(path, 1):
        found = follow(facts, entity, relation)
        if not found:
            return f"missing link at hop {hop}: no {relation} fact for {entity!r}"
        if len(found) > 1:
            return f"ambiguous hop {hop}: {entity!r} has {len(found)} {relation} facts"
        entity = found[0]
        if entity in seen:
            return f"the chain revisits {entity!r} (a cycle)"
        seen.append(entity)
    if entity != answer:
        return "the chain does not end at the answer"
    if any(f[0] == start and f[2] == answer for f in facts) or any(f[2] == start and f[0] == answer for f in facts):
        return "one fact links the start to the answer (a one-hop shortcut)"
    return None


# ============================================================================ procedural worlds

def _name(rng, kind: str, used: set[str]) -> str:
    for _ in range(100):
        word = "".join(SYLLABLES[int(i)] for i in rng.integers(len(SYLLABLES), size=int(rng.integers(2, 4))))
        if kind == "person":
            last = "".join(SYLLABLES[int(i)] for i in rng.integers(len(SYLLABLES), size=2))
            name = f"{word.capitalize()} {last.capitalize()}"
        elif kind == "company":
            name = f"{word.capitalize()} {COMPANY_SUFFIX[int(rng.integers(len(COMPANY_SUFFIX)))]}"
        else:
            name = word.capitalize()
        if name not in used:
            used.add(name)
            return name
    raise RuntimeError("ran out of names")


def random_world(rng, hops: int, distractors: int):
    """A chain of ``hops`` relations from a fresh start entity, plus distractor facts about other entities."""
    used: set[str] = set()
    by_kind: dict[str, list[str]] = {}
    kind = str(rng.choice(["person", "company", "city", "country"]))
    start = _name(rng, kind, used)
    entity, facts, path = start, [], []
    for _ in range(hops):
        options = [r for r, (subject_kind, _, _) in RELATIONS.items() if subject_kind == kind]
        relation = str(rng.choice(options))
        object_kind = RELATIONS[relation][1]
        obj = _name(rng, object_kind, used)
        facts.append([entity, relation, obj])
        path.append(relation)
        by_kind.setdefault(object_kind, []).append(obj)
        entity, kind = obj, object_kind
    for _ in range(distractors):  # facts about new entities, sometimes pointing at chain entities
        relation = str(rng.choice(list(RELATIONS)))
        subject_kind, object_kind = RELATIONS[relation][:2]
        subject = _name(rng, subject_kind, used)
        pool = by_kind.get(object_kind, [])
        obj = str(rng.choice(pool)) if pool and rng.random() < 0.5 else _name(rng, object_kind, used)
        facts.append([subject, relation, obj])
    order = rng.permutation(len(facts))
    return [facts[int(i)] for i in order], start, path, entity


__all__ = ["MultiHopDomain", "ground", "question_text", "random_world", "RELATIONS"]

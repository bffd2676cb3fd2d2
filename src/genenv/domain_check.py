"""``genenv check-domain``: the properties every domain must hold on untrusted text, checked on many examples.

Like Gymnasium's ``env_checker``: a domain author runs it on their own class before training. The properties:

- ``seed_round_trip``: each seed task's text, read back as simulator output, parses and grounds to a task with the
  same text and answer (the simulator learns to write what the seed tasks look like; a domain whose own tasks do
  not parse can never accept one).
- ``task_shape``: for a domain that declares the shape of its tasks (``Domain.task_shape``: a JSON schema or a
  regex, what constrained generation samples), each seed task's text has it. Where the shape sets no length cap
  (:func:`genenv.constrained.shape_unbounded_places`) the report carries a note, not a failure.
- ``simulator_text``: for arbitrary text as simulator output, ``parse_task`` and then ``validate`` never raise and
  return a Task or an Invalid whose reason says what is wrong (a non-empty text).
- ``agent_response``: for arbitrary text as the agent's response to a valid task (as one reply, and as every
  action of an episode), scoring never raises and returns a finite number in ``Domain.reward_range``.
- ``null_response``: a response with nothing in it (empty, whitespace, punctuation only, the prompt or the task's
  own text echoed back) is not a success and earns at most ``Domain.null_response_floor`` (0 by default); and
  the same inside the domain's own answer format (``null_in_format``): each verified response of a task
  (``Domain.warmstart_examples``) with every string of its JSON replaced by nothing (".", "{", "null", control
  characters...), cut down to its first element's first field, or with its answer replaced, as an agent that
  learned the format but not the content would write it.
- ``wrong_json_types``: a well-formed task with one JSON field (at any depth) replaced by a value of another type
  (an object, a list of objects, a number, true, null, a 100,000-character string) is handled as any simulator
  text is: no raise, a Task or an Invalid with a reason.

- ``bounded_simulator_text`` and ``bounded_agent_response``: hostile texts a careful fuzzer of JSON and free text
  tries (:func:`hostile_texts`: numbers past Python's integer digit limit, float overflow and NaN, nesting
  100,000 deep, arrays and objects of thousands of members, duplicate keys, lone surrogates and NUL bytes, one word
  or one character repeated, texts at the size limit and one past it), as simulator output and as every action of
  an episode until its step limit: each call timed. A text within ``Domain.simulator_text_limit`` /
  ``agent_text_limit`` must be handled by ``parse_task``/``validate`` / ``score``/``step`` as the properties above
  say within ``Domain.call_seconds`` (per step); one past it must be refused, unread, by the loop's entry point
  (``Domain.parse_and_validate`` / ``checked_step``) with a reason. A call over its bound is stopped and is a
  failure naming the text's class and the time.

The texts come from a seeded generator (random characters, the domain's alphabet, mutations of real tasks and
answers, malformed JSON, very long and non-ASCII text), so a check repeats exactly; nothing is evaluated. The
test suite feeds the same property functions with hypothesis.
"""

from __future__ import annotations

import json
import math
import re
import string
import time
from dataclasses import dataclass, field

import numpy as np

from genenv.constrained import grammar_problem, shape_unbounded_places
from genenv.domains.base import Domain, Invalid, Task, TaskShape, seed_round_trip_problem
from genenv.timeouts import CallTimeout, time_limit

PROPERTIES = ("seed_round_trip", "task_shape", "simulator_text", "wrong_json_types", "agent_response",
              "null_response", "null_in_format", "bounded_simulator_text", "bounded_agent_response")
_PUNCTUATION_ONLY = ("", " ", "\n", "\t  \n", ".", "?", "!?", "...", "-", "{}", "[]", "[{}]", "[{}, {}]", "()", ",;:",
                     "\"\"", "''", "answer:", "answer: ?")
# a structure with nothing in it: lists and objects of meaningless keys (a plan of empty days; an empty answer)
_EMPTY_STRUCTURES = ("[{}]", "[{}, {}]", "[{\"x\": 1}]", "[{\"days\": 1}]", "{\"answer\": \"\"}", "[[]]")
# what an answer may be renamed to: text that normalises to nothing under the usual answer normalisation
_EMPTY_NAMES = ("The", "+", "{}", "a .")
_ODD = ("\u00b9", "\u0663", "\x00", "\u202e", "\ud7ff", "\U0001f600", "\u00a0", "\r\n", "\\", "\ufeff")


@dataclass
class Failure:
    prop: str
    example: str
    detail: str

    def __str__(self) -> str:
        shown = self.example if len(self.example) <= 160 else self.example[:160] + f"... ({len(self.example)} chars)"
        return f"{self.prop}: {self.detail}; example: {shown!r}"


@dataclass
class DomainCheck:
    domain: str
    counts: dict = field(default_factory=lambda: dict.fromkeys(PROPERTIES, 0))
    failed: dict = field(default_factory=lambda: dict.fromkeys(PROPERTIES, 0))   # failing examples per property
    failures: list[Failure] = field(default_factory=list)   # the first failure of each property
    notes: list[str] = field(default_factory=list)   # what holds but a user should know (an unbounded shape)

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        checked = ", ".join(f"{name} {count}" for name, count in self.counts.items())
        if self.ok:
            return f"{self.domain}: every property holds ({checked} examples)"
        return f"{self.domain}: {len(self.failures)} propert{'y' if len(self.failures) == 1 else 'ies'} fail; first: " \
               f"{self.failures[0]}"


# ---------------------------------------------------------------------------------------- the properties

def simulator_text_problem(domain: Domain, text: str) -> str | None:
    """None when ``text`` as simulator output is handled as the protocol says; else what went wrong."""
    try:
        parsed = domain.parse_task(text)
    except Exception as error:   # the property is that it never gets here
        return f"parse_task raised {type(error).__name__}: {error}"
    problem = _verdict_problem(parsed, "parse_task")
    if problem or isinstance(parsed, Invalid):
        return problem
    try:
        grounded = domain.validate(parsed)
    except Exception as error:
        return f"validate raised {type(error).__name__}: {error}"
    return _verdict_problem(grounded, "validate")


def shape_problem(shape: TaskShape, text: str) -> str | None:
    """None when ``text`` has ``shape`` (the whole text matches its regex, or is one JSON value its schema
    accepts, checked with ``jsonschema``) and a constrained sampler could write it as it is
    (:func:`genenv.constrained.grammar_problem`: the JSON laid out as ``json.dumps`` does, keys in the schema's
    order); else what is wrong, naming the place in the object."""
    if shape.regex is not None:
        if not re.fullmatch(shape.regex, text):
            return f"does not match {shape.regex!r}"
        return grammar_problem(shape, text)
    import jsonschema  # noqa: PLC0415  (only a domain with a schema needs it)
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as err:
        return f"not one JSON value: {type(err).__name__}"
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(shape.json_schema).iter_errors(value))
    if error is None:
        return grammar_problem(shape, text)
    where = "/".join(str(part) for part in error.absolute_path) or "the object"
    return f"at {where}: {error.message[:200]}"


def _verdict_problem(result, where: str) -> str | None:
    if isinstance(result, Invalid):
        if not isinstance(result.reason, str) or not result.reason.strip():
            return f"{where} returned an Invalid without a reason"
        return None
    if not isinstance(result, Task):
        return f"{where} returned {type(result).__name__}, not a Task or an Invalid"
    return None


def response_rewards(domain: Domain, task: Task, response: str) -> list[float]:
    """The rewards ``response`` earns on ``task``: as one reply (``score``) and, for a multi-turn domain, as every
    action of an episode until it ends (``reset``/``step``). Raises what the domain raises."""
    rewards = [domain.score(task, response)]
    if domain.multi_turn:
        state, _ = domain.reset(task, seed=0)
        total = 0.0
        for _ in range(max(1, domain.max_turns)):
            result = domain.step(state, response)
            total, state = result.reward, result.state
            if result.terminated or result.truncated:
                break
        rewards.append(total)
    return rewards


def agent_response_problem(domain: Domain, task: Task, response: str) -> str | None:
    try:
        rewards = response_rewards(domain, task, response)
    except Exception as error:
        return f"scoring raised {type(error).__name__}: {error}"
    low, high = domain.reward_range
    for reward in rewards:
        if not isinstance(reward, (int, float)) or isinstance(reward, bool) or not math.isfinite(reward):
            return f"scoring returned {reward!r}, not a finite number"
        if not low <= reward <= high:
            return f"scoring returned {reward}, outside reward_range {domain.reward_range}"
    return None


def null_responses(task: Task, observation="") -> list[str]:
    """Responses with nothing in them: empty, whitespace, punctuation, what the agent was shown echoed back (the
    prompt, the first observation, and the task's text where the agent sees it), except a text that is the task's
    answer (sorting an already sorted list: echoing it is right). A task's internal text that the agent never sees
    (a multihop world's facts) is not something it can echo."""
    observation = observation if isinstance(observation, str) else json.dumps(observation, default=str)
    shown = task.prompt + "\n" + observation
    texts = [*_PUNCTUATION_ONLY, *_EMPTY_STRUCTURES, task.prompt, observation, task.prompt + task.prompt,
             *([task.text] if task.text and task.text in shown else [])]
    answer = (task.answer or "").strip()
    return [t for t in dict.fromkeys(texts) if not answer or t.strip() != answer]


def null_response_problem(domain: Domain, task: Task, response: str, success_threshold: float = 1.0) -> str | None:
    problem = agent_response_problem(domain, task, response)
    if problem:
        return problem
    for reward in response_rewards(domain, task, response):
        if reward >= success_threshold:
            return f"a null response scored {reward}, a success"
        if reward > domain.null_response_floor:
            return f"a null response scored {reward}, above null_response_floor {domain.null_response_floor}"
    return None


# ---------------------------------------------------------------------------------------- JSON inside texts

# what a string of a well-formed answer is replaced by when it says nothing
_NULL_FILLERS = (".", "{", "null", "-", "", " ", "\x01\x02", "?", "None")
# a quoted string literal of a call written as code ('...' or "...", backslash escapes)
_QUOTED = re.compile(r"'(?:[^'\\\n]|\\.)*'|\"(?:[^\"\\\n]|\\.)*\"")
# values of every JSON type, put in place of one field of a well-formed task
_OTHER_TYPES = ({}, [{}], [], 0, -1, 1.5, True, None, "", [1, 2], {"a": {}}, "x" * 100_000)


def json_part(text: str):
    """(prefix, value, suffix) when ``text`` holds a JSON object or list: the whole text, else its part from the
    first ``[`` or ``{`` to the last ``]`` or ``}``; None otherwise (a bare number or string is not a structure)."""
    if not isinstance(text, str):
        return None
    starts = [i for i in (text.find("["), text.find("{")) if i >= 0]
    if not starts:
        return None
    start, end = min(starts), max(text.rfind("]"), text.rfind("}"))
    if end <= start:
        return None
    try:
        value = json.loads(text[start:end + 1])
    except (ValueError, RecursionError):
        return None
    return (text[:start], value, text[end + 1:]) if isinstance(value, (dict, list)) else None


def _paths(value, path=()):
    """Every node's path below the root (dict keys and list indices), depth first."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, child in items:
        yield path + (key,)
        yield from _paths(child, path + (key,))


def _replaced(value, path, new):
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {k: (_replaced(v, rest, new) if k == head else v) for k, v in value.items()}
    return [(_replaced(v, rest, new) if i == head else v) for i, v in enumerate(value)]


def _strings_replaced(value, filler: str):
    if isinstance(value, str):
        return filler
    if isinstance(value, dict):
        return {k: _strings_replaced(v, filler) for k, v in value.items()}
    if isinstance(value, list):
        return [_strings_replaced(v, filler) for v in value]
    return value


def _first_field(value, filler: str):
    """The structure cut to its first element's first field, that field's value ``filler``."""
    if isinstance(value, list):
        return [_first_field(value[0], filler)] if value else value
    if isinstance(value, dict) and value:
        key = next(iter(value))
        return {key: _first_field(value[key], filler) if isinstance(value[key], (dict, list)) else filler}
    return filler


def formatted_null_responses(domain: Domain, task: Task) -> list[str]:
    """Responses in the task's own answer format with nothing in them: each verified response
    (``domain.warmstart_examples``) whose JSON strings are all replaced by a filler, or cut down to its first
    element's first field; or, where the answer is a part of it (``answer: X``), with the answer replaced. Texts
    equal to a verified response are left out (a structure with no strings in it is already an answer)."""
    try:
        targets = [target for _, _, target in domain.warmstart_examples(task) if isinstance(target, str)]
    except Exception:   # noqa: BLE001 (a domain without verified responses for this task: nothing to derive)
        return []
    out = []
    answer = (task.answer or "").strip()
    for target in targets:
        part = json_part(target)
        if part is not None:
            prefix, value, suffix = part
            for filler in _NULL_FILLERS:
                out.append(prefix + json.dumps(_strings_replaced(value, filler)) + suffix)
                out.append(prefix + json.dumps(_first_field(value, filler)) + suffix)
        elif _QUOTED.search(target):   # a call written as code: f(a='x', b="y") with every quoted value emptied
            out += [_QUOTED.sub(lambda m, f=filler: m.group(0)[0] + f + m.group(0)[0], target)
                    for filler in _NULL_FILLERS if "'" not in filler and '"' not in filler]
        if answer and answer in target and target.strip() != answer:
            out += [target.replace(answer, filler) for filler in _NULL_FILLERS]
    known = {t.strip() for t in targets} | ({answer} if answer else set())
    return [t for t in dict.fromkeys(out) if t.strip() not in known]


def type_confused_texts(text: str, rng: np.random.Generator | None = None, limit: int | None = None) -> list[str]:
    """``text``'s JSON with one field at a time (every depth) replaced by a value of each other JSON type; at most
    ``limit`` of them, drawn with ``rng`` when there are more."""
    part = json_part(text)
    if part is None:
        return []
    prefix, value, suffix = part
    out = [prefix + json.dumps(_replaced(value, path, new)) + suffix
           for path in _paths(value) for new in _OTHER_TYPES]
    if limit is not None and len(out) > limit:
        rng = rng or np.random.default_rng(0)
        out = [out[i] for i in sorted(rng.choice(len(out), size=limit, replace=False))]
    return out


# ---------------------------------------------------------------------------------------- the texts

def _random_text(rng: np.random.Generator, alphabet: str, longest: int) -> str:
    return "".join(alphabet[i] for i in rng.integers(len(alphabet), size=int(rng.integers(0, longest + 1))))


def _mutated(rng: np.random.Generator, text: str, alphabet: str) -> str:
    if not text:
        return _random_text(rng, alphabet, 8)
    chars = list(text)
    for _ in range(int(rng.integers(1, 4))):
        kind, at = int(rng.integers(4)), int(rng.integers(len(chars) + 1))
        if kind == 0 and chars:
            del chars[min(at, len(chars) - 1)]
        elif kind == 1:
            chars.insert(at, alphabet[int(rng.integers(len(alphabet)))])
        elif kind == 2 and chars:
            chars[min(at, len(chars) - 1)] = alphabet[int(rng.integers(len(alphabet)))]
        else:
            chars = chars[:at]
    return "".join(chars)


def targeted_texts(tasks: list[Task]) -> list[str]:
    """Texts aimed at known holes: each task's text with its answer renamed everywhere to something that
    normalises to nothing (a world whose answer entity is 'The'), and each answer with its ASCII digits written
    as other Unicode digits (a superscript one passes str.isdigit, then int() raises; an Arabic-Indic three
    converts)."""
    out = []
    for task in tasks:
        answer = (task.answer or "").strip()
        if answer and answer in task.text:
            out += [task.text.replace(answer, name) for name in _EMPTY_NAMES]
        if any(c in "0123456789" for c in answer):
            out += [answer.translate(str.maketrans("0123456789", digits))
                    for digits in ("\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079",
                                   "\u0660\u0661\u0662\u0663\u0664\u0665\u0666\u0667\u0668\u0669")]
    return out


def fuzz_texts(rng: np.random.Generator, n: int, real: list[str], alphabet: str | None) -> list[str]:
    """``n`` texts: random printable and domain-alphabet strings, mutations of ``real`` texts, malformed JSON, odd
    characters, and a few very long ones."""
    printable = string.printable
    own = alphabet or printable
    fixed = ["", "null", "{}", "[]", "{\"", "[" * 2000, "{\"a\": " * 500, json.dumps({"text": "x" * 50}),
             "x" * 50_000, "a=" * 20_000, "".join(_ODD), "[F(" + "a" * 30_000 + ")]"]
    # a real text whose first character is swapped for an odd one: a superscript one passes str.isdigit, and
    # int() then raises (a parser that trusts isdigit fails here)
    out = fixed + [odd + text[1:] for text in real[:4] for odd in _ODD]
    while len(out) < n:
        kind = int(rng.integers(5))
        if kind == 0:
            out.append(_random_text(rng, printable, 60))
        elif kind == 1:
            out.append(_random_text(rng, own, 60))
        elif kind == 2 and real:
            out.append(_mutated(rng, real[int(rng.integers(len(real)))], own + "".join(_ODD)))
        elif kind == 3 and real:
            base = real[int(rng.integers(len(real)))]
            out.append(base + _random_text(rng, printable + "".join(_ODD), 12))
        else:
            out.append(_random_text(rng, printable + "".join(_ODD), 30))
    return out


def hostile_texts(limit: int, real: list[str]) -> list[tuple[str, str]]:
    """(class, text) pairs that break parsers and scorers which are not bounded: numbers past Python's integer
    digit limit (bare, in JSON, inside each of ``real``'s JSON objects), float overflow and NaN literals, deep
    nesting, arrays and objects sized to ``limit`` characters, duplicate keys, lone surrogates and NUL bytes, one
    word or character repeated to the limit, each of ``real`` padded to the limit, and texts past it."""
    digits = "9" * 5000
    out = [("a number past the digit limit", digits), ("a JSON number past the digit limit", '{"a": %s}' % digits),
           ("a negative number past the digit limit", "[-%s]" % digits),
           ("a float past the digit limit", "0.%se%s" % (digits, digits[:4000])),
           ("float overflow and NaN", '{"a": 1e400, "b": NaN, "c": -Infinity, "d": -0}'),
           ("deep nesting (arrays)", "[" * 100_000 + "]" * 100_000),
           ("deep nesting (objects)", '{"a": ' * 30_000 + "1" + "}" * 30_000),
           ("duplicate keys", "{" + ", ".join(f'"a": {i}' for i in range(2000)) + "}"),
           ("lone surrogates", "\\ud800" * 200 + "\ud800\udfff" + '{"a": "\\udc00"}'),
           ("NUL bytes", "\x00" * 1000 + '{"a": "\x00"}')]
    for text in real:
        if text.startswith("{") and text.endswith("}"):
            out.append(("a real task with a number past the digit limit", text[:-1] + ', "n": %s}' % digits))
    sized = [("an array of thousands of members", "[" + "0," * limit),
             ("an object of thousands of keys", "{" + "".join(f'"k{i}":{i},' for i in range(limit // 8))),
             ("one word repeated to the size limit", "search: " + "word " * limit),
             ("one character to the size limit", "x" * limit), ("lines to the size limit", "\n" * limit),
             ("backslashes to the size limit", "\\" * limit), ("a string to the size limit", '{"a": "' + "y" * limit)]
    out += [(label, text[:limit]) for label, text in sized]
    out += [("a real text padded to the size limit", (text + " " * limit)[:limit]) for text in real[:2]]
    out += [("one past the size limit", "x" * (limit + 1)),
            ("an object of 50,000 keys", json.dumps({f"k{i}": i for i in range(50_000)})),
            ("a text of 1.5 MB", ("search: " + "ab " * 500_000)[:1_500_000])]
    return out


def _timed(bound: float, call) -> str | None:
    """``call()``'s problem (None: none), stopped at ``bound`` seconds: a call that ran that long is a problem,
    whatever it returned (code under test may catch the stop and return a verdict)."""
    start = time.perf_counter()
    try:
        with time_limit(bound):
            problem = call()
    except CallTimeout:
        problem = None
    seconds = time.perf_counter() - start
    if seconds >= bound:
        return f"ran {seconds:.1f} s, past its bound of {bound:g} s (Domain.call_seconds)"
    return problem


def bounded_simulator_problem(domain: Domain, label: str, text: str) -> str | None:
    """None when ``text`` as simulator output is handled within the domain's bounds: within
    ``simulator_text_limit`` by ``parse_task``/``validate`` as :func:`simulator_text_problem` says, in
    ``call_seconds``; past it refused by :meth:`Domain.parse_and_validate` with a reason, as fast."""
    if len(text) <= domain.simulator_text_limit:
        problem = _timed(domain.call_seconds, lambda: simulator_text_problem(domain, text))
    else:
        def refused():
            verdict = domain.parse_and_validate(text)
            if not isinstance(verdict, Invalid) or not verdict.reason:
                return f"a text of {len(text)} characters, past simulator_text_limit, was not refused"
            return None
        problem = _timed(domain.call_seconds, refused)
    return None if problem is None else f"{label} ({len(text)} characters): {problem}"


def bounded_agent_problem(domain: Domain, task: Task, label: str, text: str) -> str | None:
    """None when ``text`` as the agent's action (every action of an episode until its step limit) is handled within
    the domain's bounds: within ``agent_text_limit`` scored as :func:`agent_response_problem` says, in
    ``call_seconds`` a step; past it refused by :meth:`Domain.checked_step` (reward 0, the reason in ``error``)."""
    steps = 1 + (max(1, domain.max_turns) if domain.multi_turn else 0)
    if len(text) <= domain.agent_text_limit:
        problem = _timed(domain.call_seconds * steps, lambda: agent_response_problem(domain, task, text))
    else:
        def refused():
            state, _ = domain.reset(task, seed=0)
            result = domain.checked_step(state, text)
            if result.reward != 0.0 or not result.error:
                return f"an action of {len(text)} characters, past agent_text_limit, was not refused"
            return None
        problem = _timed(domain.call_seconds, refused)
    return None if problem is None else f"{label} ({len(text)} characters): {problem}"


# ---------------------------------------------------------------------------------------- the checker

def check_domain(domain: Domain, examples: int = 200, seed: int = 0, tasks: int = 8,
                 success_threshold: float = 1.0) -> DomainCheck:
    """Check every property on ``examples`` generated texts (and ``tasks`` seed tasks, whose responses are
    checked); the first failure of each property is kept."""
    rng = np.random.default_rng(seed)
    report = DomainCheck(domain.name)
    seen: set[str] = set()

    def record(prop: str, example: str, problem: str | None) -> None:
        report.counts[prop] += 1
        report.failed[prop] += bool(problem)
        if problem and prop not in seen:
            seen.add(prop)
            report.failures.append(Failure(prop, example, problem))

    seeds = domain.seed_tasks(np.random.default_rng(seed), tasks)
    for task in seeds:
        record("seed_round_trip", task.text,
               simulator_text_problem(domain, task.text) or seed_round_trip_problem(domain, task))
    shape = domain.task_shape()
    if shape is not None:
        for task in seeds:
            record("task_shape", task.text, shape_problem(shape, task.text))
        places = shape_unbounded_places(shape)
        if places:
            report.notes.append(f"task_shape: {len(places)} place(s) where a constrained text has no length cap "
                                f"(a text there runs on until the budget makes it close, with short values): "
                                f"{'; '.join(places[:4])}"
                                + (" ..." if len(places) > 4 else ""))
    real = [t.text for t in seeds] + [t.answer or "" for t in seeds]
    accepted: list[Task] = []   # fuzzed simulator texts the domain accepted: valid tasks too
    for text in targeted_texts(seeds) + fuzz_texts(rng, examples, real, domain.alphabet):
        problem = simulator_text_problem(domain, text)
        record("simulator_text", text, problem)
        if problem is None and len(accepted) < tasks:
            task = domain.parse_and_validate(text)
            if isinstance(task, Task) and all(task.text != s.text for s in seeds):
                accepted.append(task)
    for label, text in hostile_texts(domain.simulator_text_limit, [t.text for t in seeds[:2]]):
        record("bounded_simulator_text", text, bounded_simulator_problem(domain, label, text))
    per_seed = max(1, examples // max(1, len(seeds)))
    for task in seeds:
        for text in type_confused_texts(task.text, rng, per_seed):
            record("wrong_json_types", text, simulator_text_problem(domain, text))
    checked = seeds + accepted
    if not checked:
        return report
    answers = [t.answer or "" for t in checked]
    for task in checked[:2]:
        actions = [response for _, _, response in domain.warmstart_examples(task)][:2]
        for label, text in hostile_texts(domain.agent_text_limit, actions + [task.answer or ""]):
            record("bounded_agent_response", text, bounded_agent_problem(domain, task, label, text))
    per_task = max(1, examples // len(checked))
    for task in checked:
        for response in targeted_texts([task]) + fuzz_texts(rng, per_task, answers + [task.prompt],
                                                             domain.alphabet)[:per_task]:
            record("agent_response", response, agent_response_problem(domain, task, response))
        observation = domain.reset(task, seed=0)[1]
        for response in null_responses(task, observation):
            record("null_response", response, null_response_problem(domain, task, response, success_threshold))
        for response in formatted_null_responses(domain, task):
            record("null_in_format", response, null_response_problem(domain, task, response, success_threshold))
    return report


__all__ = ["PROPERTIES", "DomainCheck", "Failure", "agent_response_problem", "bounded_agent_problem",
           "bounded_simulator_problem", "check_domain", "formatted_null_responses", "hostile_texts",
           "fuzz_texts", "json_part", "targeted_texts", "type_confused_texts",
           "null_response_problem", "null_responses", "response_rewards", "seed_round_trip_problem", "shape_problem",
           "simulator_text_problem"]

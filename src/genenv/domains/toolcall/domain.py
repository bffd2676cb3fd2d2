"""Tool calling in BFCL's format: the simulator writes function-calling tasks, BFCL's checker scores the agent.

A task is (function docs as JSON schema, a user question, possible answers). The agent answers as BFCL asks a
prompting model to: a Python-style list of calls, ``[get_weather(city='Paris', unit='celsius')]``, and its
reward is BFCL's AST verdict (1 or 0). Seed tasks come from BFCL's ``live_simple`` and ``live_multiple``
categories; the held-out set from ``simple_python`` and ``multiple`` (disjoint: nothing evaluated is trained
on). The simulator writes a new task as one JSON object::

    {"functions": [{"name": ..., "description": ..., "parameters": {"type": "dict", "properties": {...},
                    "required": [...]}}],
     "question": "...", "call": {"name": ..., "arguments": {...}}}

(keys in that order, the gold call last, so a generation cut short loses the least) and the domain grounds
it: a valid schema, a gold call that names a given function, passes every required
parameter, no unknown ones, values of the declared types and inside enums, a non-empty question, and finally
BFCL's own checker must accept the gold call against the task. Anything else is rejected with a reason.
"""

from __future__ import annotations

import json
import string

from genenv.constrained.references import ITEM, MEMBER_OF, MEMBER_OF_SIBLING
from genenv.domains.base import Domain, Invalid, Task, TaskShape, WarmStartKey, register, seed_round_trip_problem
from genenv.domains.jsontask import parse_json_object, stated_rate
from genenv.domains.toolcall import bfcl

PARAM_TYPES = {"string": (str,), "integer": (int,), "float": (float, int), "number": (float, int),
               "boolean": (bool,), "array": (list,), "tuple": (list,), "dict": (dict,), "object": (dict,),
               "any": (str, int, float, bool, list, dict)}
MAX_FUNCTIONS = 8
# the task shape's caps on what the grammar cannot otherwise end (BFCL's seeds: names up to 64 characters,
# descriptions up to 545, questions up to 712, 21 parameters): a constrained string stops at its cap
MAX_NAME, MAX_TEXT, MAX_PARAMETERS = 96, 1200, 32


def first_option(value):
    """One concrete value from BFCL's possible answers (a list of options, nested for dicts)."""
    if isinstance(value, dict):
        out = {}
        for key, options in value.items():
            chosen = _choose(options)
            if chosen is not _OMIT:
                out[key] = chosen
        return out
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return [first_option(v) for v in value]
    return value


_OMIT = object()


def _choose(options):
    if not isinstance(options, list):
        return first_option(options)
    concrete = [o for o in options if o != ""]
    if not concrete:
        return _OMIT
    return first_option(concrete[0])


def gold_calls(ground_truth: list[dict]) -> list[tuple[str, dict]]:
    """(function name, arguments) of one concrete correct answer."""
    calls = []
    for call in ground_truth:
        (name, arguments), = call.items()
        chosen = {k: _choose(v) for k, v in arguments.items()}
        calls.append((name, {k: v for k, v in chosen.items() if v is not _OMIT}))
    return calls


def render_calls(calls: list[tuple[str, dict]]) -> str:
    """BFCL's answer format for prompting models: ``[f(a=1, b='x'), g()]`` (Python literals)."""
    return "[" + ", ".join(f"{name}(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")"
                           for name, args in calls) + "]"


def _category_for(functions: list, calls: int) -> str:
    """The BFCL category name that selects the right checker branch."""
    if calls > 1:
        return "parallel_multiple" if len(functions) > 1 else "parallel"
    return "multiple" if len(functions) > 1 else "simple"


PARAMETERS_ORDER = ("type", "properties", "required")   # required after what it names (x-member-of-sibling)


def in_write_order(functions):
    """The function schemas with each ``parameters`` object's keys in one order (type, properties, required, then
    any others as given): BFCL's data writes required and properties either way round, and a grammar (issue 57,
    ``env.constrained``) accepts the keys in the order its schema lists them (required after the properties it
    names). Anything not of that form is kept
    as it is (``validate`` rejects it)."""
    if not isinstance(functions, list):
        return functions
    out = []
    for function in functions:
        params = function.get("parameters") if isinstance(function, dict) else None
        if isinstance(params, dict):
            ordered = {key: params[key] for key in PARAMETERS_ORDER if key in params}
            ordered.update((key, value) for key, value in params.items() if key not in ordered)
            function = {**function, "parameters": ordered}
        out.append(function)
    return out


def _task_from_entry(entry: dict) -> Task:
    calls = gold_calls(entry["ground_truth"])
    question = entry["question"][0][-1]["content"]
    # as parse_task writes it
    text = json.dumps({"functions": in_write_order(entry["function"]), "question": question.strip(),
                       "call": {"name": calls[0][0], "arguments": calls[0][1]}})
    return Task(text=text, prompt=question, answer=render_calls(calls), level=_level(entry["function"], calls),
                meta={"id": entry["id"], "functions": entry["function"], "ground_truth": entry["ground_truth"],
                      "category": entry["category"], "messages": entry["question"][0]})


def _level(functions: list, calls: list) -> int:
    """Difficulty bucket for plots: arguments of the gold call(s), plus one when the agent must choose among
    several functions (1..8)."""
    arguments = sum(len(args) for _, args in calls)
    return int(min(8, max(1, arguments + (1 if len(functions) > 1 else 0))))


@register("toolcall")
class ToolCallDomain(Domain):
    """BFCL-format tool calling: simulator writes JSON tasks, BFCL's AST checker scores the agent.

    Options: ``train_categories`` (seed tasks; default live_simple, live_multiple), ``eval_categories``
    (held-out; default simple_python, multiple; must be disjoint), ``single_call_only`` (True: tasks whose
    answer is one call), ``prompt_style`` ('bfcl': BFCL's own system prompt, as BFCL prompts chat models;
    'compact': functions JSON + question, for tiny test models), ``max_task_chars`` (keep only tasks whose
    JSON text is at most this long; for tiny models), ``alphabet_only`` (keep only tasks written entirely in
    ``alphabet``, printable ASCII: for tiny models, which cannot encode other characters)."""

    alphabet = string.printable  # for the tiny char-level models of tests; real models bring their tokenizer
    agent_max_new_tokens = 128
    env_max_new_tokens = 384
    warm_start_key = WarmStartKey(format_version=2)   # 2: task JSON in natural key order

    def __init__(self, train_categories: list[str] | None = None, eval_categories: list[str] | None = None,
                 single_call_only: bool = True, prompt_style: str = "bfcl", max_task_chars: int | None = None,
                 alphabet_only: bool = False):
        self.train_categories = list(train_categories or bfcl.TRAIN_CATEGORIES)
        self.eval_categories = list(eval_categories or ("simple_python", "multiple"))
        if set(self.train_categories) & set(self.eval_categories):
            raise TypeError("train_categories and eval_categories must be disjoint (nothing evaluated is trained on)")
        if prompt_style not in ("bfcl", "compact"):
            raise TypeError(f"prompt_style must be 'bfcl' (BFCL's system prompt) or 'compact', got {prompt_style!r}")
        self.single_call_only = single_call_only
        self.prompt_style = prompt_style
        self.max_task_chars = max_task_chars
        self.alphabet_only = alphabet_only
        self._training: list[Task] | None = None

    # -------------------------------------------------------------- data
    def _training_tasks(self) -> list[Task]:
        """Every task of the training categories that the domain accepts back as simulator output, read and
        converted once per domain object. A task it rejects is one the simulator could never write, and some
        can never be solved: of BFCL's 1,311 training tasks, 27 have more than ``MAX_FUNCTIONS`` functions, 26 a
        gold call BFCL's own checker rejects, 77 a gold value outside its parameter's type or enum (found by
        check-domain's seed_round_trip on more seeds than the tests read)."""
        if self._training is None:
            entries = [e for c in self.train_categories for e in bfcl.load_category(c)]
            if self.single_call_only:
                entries = [e for e in entries if len(e["ground_truth"]) == 1 and len(e["question"]) == 1]
            tasks = self._short_enough([_task_from_entry(e) for e in entries])
            self._training = [t for t in tasks if seed_round_trip_problem(self, t) is None]
        return self._training

    def _short_enough(self, tasks: list[Task]) -> list[Task]:
        """The tasks the options keep: at most ``max_task_chars`` long, and written in the alphabet if asked."""
        if self.max_task_chars:
            tasks = [t for t in tasks if len(t.text) <= self.max_task_chars]
        if self.alphabet_only:
            alphabet = set(self.alphabet)
            tasks = [t for t in tasks if set(t.text + t.prompt + (t.answer or "")) <= alphabet]
        return tasks

    def seed_tasks(self, rng, n):
        tasks = self._training_tasks()
        return [tasks[i] for i in rng.permutation(len(tasks))[:n]]

    def heldout_tasks(self, per_level):
        """The evaluation categories, in file order; ``per_level`` caps each category (BFCL's own split)."""
        out = []
        for category in self.eval_categories:
            tasks = [_task_from_entry(e) for e in bfcl.load_category(category) if len(e["question"]) == 1]
            out.extend(self._short_enough(tasks)[:per_level])
        return out

    def levels(self):
        return list(range(1, 9))

    def simulator_corpus(self, rng, n):
        """(seed, stats, task) pairs of real BFCL training tasks: the simulator learns the task format."""
        tasks = self.seed_tasks(rng, len(self._training_tasks()))
        corpus = []
        for _ in range(n):
            seed, target = tasks[int(rng.integers(len(tasks)))], tasks[int(rng.integers(len(tasks)))]
            stats = {"success_rate": None if rng.random() < 0.1 else float(rng.random())}
            corpus.append((seed, stats, Task(target.text, target.prompt, target.answer, target.level)))
        return corpus

    def reference_tasks(self, rng, n):
        tasks = self.seed_tasks(rng, len(self._training_tasks()))
        return [tasks[int(i)] for i in rng.integers(len(tasks), size=n)]

    # -------------------------------------------------------------- simulator side
    def simulator_prompt(self, seed, stats):
        known = stated_rate(stats)
        return ("Write one new function-calling task as a JSON object with keys functions, question, call "
                f"(call = {{name, arguments}}). The agent solved tasks like this one at rate {known}; aim for a "
                f"task it solves about half of the time.\nExample:\n{seed.text}\nNew task:\n")

    def task_shape(self):
        """Function schemas in BFCL's format (a dotted identifier name, an object of parameters each with a known
        type), a non-empty question and a call of a name with an object of arguments; names, texts and lists capped
        (``MAX_NAME``, ``MAX_TEXT``, ``MAX_FUNCTIONS``, ``MAX_PARAMETERS``; a parameter's own fields and the call's
        arguments stay open, as BFCL writes them); a function's required parameters are keys of its own properties
        (``x-member-of-sibling``, so properties come first), each once, and the call names one
        of the functions written (``x-member-of``). Left to ``validate``: the call's arguments
        matching that function's schema, BFCL's checker accepting the gold call."""
        parameter = {"type": "object", "required": ["type"], "properties": {"type": {"enum": sorted(PARAM_TYPES)}}}
        function = {"type": "object", "required": ["name", "parameters"], "properties": {
            "name": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$",
                     "maxLength": MAX_NAME},
            "description": {"type": "string", "maxLength": MAX_TEXT},
            "parameters": {"type": "object", "required": ["type", "properties"], "properties": {   # in_write_order's
                "type": {"enum": ["dict", "object"]},
                "properties": {"type": "object", "additionalProperties": parameter},
                "required": {"type": "array", "maxItems": MAX_PARAMETERS, "uniqueItems": True, "items": {
                    "type": "string", "maxLength": MAX_NAME, MEMBER_OF_SIBLING: "properties"}}}}}}
        return TaskShape(json_schema={
            "type": "object", "additionalProperties": False, "required": ["functions", "question", "call"],
            "properties": {
                "functions": {"type": "array", "items": function, "minItems": 1, "maxItems": MAX_FUNCTIONS},
                "question": {"type": "string", "minLength": 1, "maxLength": MAX_TEXT},
                "call": {"type": "object", "additionalProperties": False, "required": ["name", "arguments"],
                         "properties": {"name": {"type": "string", "minLength": 1, "maxLength": MAX_NAME,
                                                 MEMBER_OF: ["functions", ITEM, "name"]},
                                        "arguments": {"type": "object"}}}}}, max_chars=self.max_task_chars)

    def parse_task(self, text):
        data = parse_json_object(text, ("functions", "question", "call"))
        if isinstance(data, Invalid):
            return data
        functions, question, call = data["functions"], data["question"], data["call"]
        if not isinstance(functions, list) or not functions:
            return Invalid("functions must be a non-empty list", text)
        if len(functions) > MAX_FUNCTIONS:
            return Invalid(f"more than {MAX_FUNCTIONS} functions", text)
        if not isinstance(question, str) or not question.strip():
            return Invalid("question must be a non-empty string", text)
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not isinstance(
                call.get("arguments", {}), dict):
            return Invalid("call must be {name: string, arguments: object}", text)
        arguments = call.get("arguments", {})
        canonical = json.dumps({"functions": in_write_order(functions), "question": question.strip(),
                                "call": {"name": call["name"], "arguments": arguments}})
        return Task(canonical, question.strip(), None, 0,
                    meta={"functions": functions, "call": (call["name"], arguments)})

    def validate(self, task):
        if self.max_task_chars and len(task.text) > self.max_task_chars:   # the options keep what they kept of seeds
            return Invalid(f"task is {len(task.text)} characters, longer than max_task_chars {self.max_task_chars}",
                           task.text[:200])
        if self.alphabet_only and not self._short_enough([task]):
            return Invalid("task has characters outside the alphabet (alphabet_only)", task.text[:200])
        functions, (name, arguments) = task.meta.get("functions"), task.meta.get("call", (None, None))
        if functions is None or name is None:
            return Invalid("missing functions or call", task.text)
        by_name = {}
        for function in functions:
            reason = _schema_problem(function)
            if reason:
                return Invalid(reason, task.text)
            if function["name"] in by_name:
                return Invalid(f"duplicate function name {function['name']!r}", task.text)
            by_name[function["name"]] = function
        if name not in by_name:
            return Invalid(f"gold call names an unknown function {name!r}", task.text)
        reason = _call_problem(by_name[name], arguments)
        if reason:
            return Invalid(reason, task.text)
        ground_truth = [{name: {k: [v] for k, v in arguments.items()}}]
        for param in by_name[name]["parameters"].get("properties", {}):
            if param not in arguments:  # optional and not in the gold call: omitting it is right too
                default = by_name[name]["parameters"]["properties"][param].get("default")
                ground_truth[0][name][param] = [""] + ([default] if default is not None else [])
        calls = [(name, arguments)]
        category = _category_for(functions, 1)
        grounded = Task(task.text, task.prompt, render_calls(calls), _level(functions, calls),
                        meta={"functions": functions, "ground_truth": ground_truth, "category": category,
                              "messages": [{"role": "user", "content": task.prompt}], "id": "generated"})
        # the final word is BFCL's: its checker must accept the gold call against the task as written
        if self.score(grounded, grounded.answer) != 1.0:
            return Invalid("BFCL's checker rejects the gold call", task.text)
        return grounded

    # -------------------------------------------------------------- agent side
    def agent_context(self, history, observation):
        return observation

    def reset(self, task, seed=0):
        if self.prompt_style == "compact":  # for tiny char-level models: the functions and the question only
            return {"task": task}, json.dumps(task.meta["functions"], sort_keys=True) + "\n" + task.prompt + "\n"
        entry = {"id": task.meta.get("id", "generated"), "function": task.meta["functions"],
                 "question": [task.meta.get("messages") or [{"role": "user", "content": task.prompt}]]}
        return {"task": task}, bfcl.chat_messages(entry)

    def score(self, task, response):
        entry = {"function": task.meta["functions"], "ground_truth": task.meta["ground_truth"],
                 "category": task.meta.get("category", "simple")}
        return 1.0 if bfcl.check(entry, response)["valid"] else 0.0

    def difficulty(self, task):
        return float(task.level)


def _schema_type_problem(name: str, properties: dict, required) -> str | None:
    """A parameter type or a required name of the wrong JSON type, or None. Checked before either is looked up in a
    dict or a set: an object or a list there is unhashable, and the lookup raised TypeError (an outside fuzz found
    ``"required": [{}]``)."""
    for param, spec in properties.items():
        if isinstance(spec, dict) and "type" in spec and not isinstance(spec["type"], str):
            return f"{name}.{param}: type must be a string, got {type(spec['type']).__name__}"
    if isinstance(required, list) and not all(isinstance(r, str) for r in required):
        return f"{name}: required must be a list of parameter names"
    return None


def _schema_problem(function) -> str | None:
    if not isinstance(function, dict):
        return "a function must be an object"
    name = function.get("name")
    if not isinstance(name, str) or not name or not all(part.isidentifier() for part in name.split(".")):
        return f"bad function name {name!r}"
    params = function.get("parameters", {"type": "dict", "properties": {}})
    if not isinstance(params, dict) or params.get("type", "dict") not in ("dict", "object"):
        return f"{name}: parameters must be an object schema"
    properties = params.get("properties", {})
    if not isinstance(properties, dict):
        return f"{name}: properties must be an object"
    problem = _schema_type_problem(name, properties, params.get("required", []))
    if problem:
        return problem
    for param, spec in properties.items():
        if not isinstance(param, str) or not param.isidentifier():
            return f"{name}: bad parameter name {param!r}"
        if not isinstance(spec, dict) or spec.get("type") not in PARAM_TYPES:
            return f"{name}.{param}: unknown type {spec.get('type') if isinstance(spec, dict) else spec!r}"
        if "enum" in spec and not isinstance(spec["enum"], list):
            return f"{name}.{param}: enum must be a list"
    required = params.get("required", [])
    if not isinstance(required, list) or any(r not in properties for r in required):
        return f"{name}: required names a parameter that is not declared"
    function.setdefault("parameters", params)
    return None


def _call_problem(function: dict, arguments: dict) -> str | None:
    params = function["parameters"]
    properties = params.get("properties", {})
    for required in params.get("required", []):
        if required not in arguments:
            return f"gold call misses required parameter {required!r}"
    required = set(params.get("required", []))
    for key, value in arguments.items():
        if key not in properties:
            return f"gold call passes unknown parameter {key!r}"
        spec = properties[key]
        if value is None and key not in required:  # an explicit null for an optional parameter
            continue
        expected = PARAM_TYPES[spec["type"]]
        if isinstance(value, bool) and bool not in expected:
            return f"{key}: expected {spec['type']}, got boolean"
        if not isinstance(value, expected):
            return f"{key}: expected {spec['type']}, got {type(value).__name__}"
        if "enum" in spec and value not in spec["enum"]:
            return f"{key}: {value!r} is not one of its enum values"
    return None


__all__ = ["ToolCallDomain", "gold_calls", "render_calls", "first_option"]


"""BFCL's multi-turn categories, scored turn by turn as in the GenEnv paper ("BFCL long-context subset per turn").

A BFCL multi-turn entry is a conversation of user turns over stateful API back-ends (a file system, a trading
bot, a travel API, ...) with the ground-truth calls of every turn. Each turn is scored on its own:

1. Two copies of the entry's back-ends start from its initial configuration (``long_context`` categories load
   BFCL's long-context scenarios). The ground-truth calls of every earlier turn run on both, and those calls
   with their results form the chat history, so an earlier mistake never carries over.
2. The model sees BFCL's system prompt (the function docs), that history and the turn's user message. Each step
   its response goes through BFCL's decoder; decoded calls run on the model's back-ends and their results come
   back as ``tool`` messages; the turn ends when a response decodes to no calls (or fails to decode) or after
   ``max_steps`` steps.
3. The turn's ground-truth calls run on the other copy. BFCL's own ``state_checker`` (every public attribute
   of every back-end equal) and ``response_checker`` (every ground-truth result among the model's results,
   order free) decide, as BFCL's ``multi_turn_checker`` does after each turn; a turn whose model produced no
   call fails as ``multi_turn:empty_turn_model_response``.

Execution never evaluates text. BFCL's own executor builds a string and ``eval``s it; here calls come from
BFCL's decoder (guarded, see :func:`genenv.domains.toolcall.bfcl.unsafe_for_bfcl_decoder`) as (name, keyword
arguments), the name must be a public method of one of the entry's back-end instances, and the method is
called directly under a time limit. A prompt longer than the model's context window is not generated for;
the turn fails as ``prompt_exceeds_context`` and is counted separately.
"""

from __future__ import annotations

import copy
import importlib
import inspect
import json
from dataclasses import dataclass, field
from typing import Callable

from genenv.domains.toolcall import bfcl
from genenv.timeouts import time_limit

MULTI_TURN_CATEGORIES = ("multi_turn_base", "multi_turn_long_context")
CALL_TIMEOUT_S = 5.0


def _result_text(value) -> str:
    """A call's result as BFCL's executor renders it (so BFCL's response checker compares like with like)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        try:
            return json.dumps(value)
        except (TypeError, ValueError):
            return str(value)
    return str(value)


class Backends:
    """The API back-end instances of one BFCL entry, called by name: a registry, not an interpreter."""

    def __init__(self, entry: dict):
        from bfcl_eval.constants.executable_backend_config import CLASS_FILE_PATH_MAPPING, STATELESS_CLASSES  # noqa: PLC0415 (optional dependency)

        long_context = "long_context" in entry["id"]
        self.instances: dict[str, object] = {}
        self.methods: dict[str, Callable] = {}
        for class_name in entry["involved_classes"]:
            module = importlib.import_module(CLASS_FILE_PATH_MAPPING[class_name])
            instance = getattr(module, class_name)()
            if class_name not in STATELESS_CLASSES:
                instance._load_scenario(copy.deepcopy(entry["initial_config"].get(class_name, {})),
                                        long_context=long_context)
            self.instances[class_name] = instance
            for name, method in inspect.getmembers(instance, predicate=inspect.ismethod):
                if not name.startswith("_"):
                    self.methods[name] = method

    def execute(self, calls: list[dict], timeout_s: float = CALL_TIMEOUT_S) -> list[str]:
        """Run decoded calls ``[{name: {arg: value}}]`` in order; every call yields one result text."""
        results = []
        for call in calls:
            if not isinstance(call, dict) or len(call) != 1:
                results.append("Error during execution: not a function call")
                continue
            (name, arguments), = call.items()
            method = self.methods.get(name)
            if method is None:
                results.append(f"Error during execution: name '{name}' is not defined")
                continue
            if not isinstance(arguments, dict):
                results.append("Error during execution: arguments are not keyword arguments")
                continue
            try:
                with time_limit(timeout_s):
                    value = method(**copy.deepcopy(arguments))
                results.append(_result_text(value))
            except Exception as err:  # any failure of the call is its result, as in BFCL
                results.append(f"Error during execution: {err}")
        return results


def load_entries(category: str, limit: int | None = None) -> list[dict]:
    """Entries of one multi-turn category with BFCL's function docs and their ``ground_truth`` turns."""
    if category not in MULTI_TURN_CATEGORIES:
        raise ValueError(f"--categories: {category!r} is not a BFCL multi-turn category; choose from "
                         f"{', '.join(MULTI_TURN_CATEGORIES)}")
    bfcl.bfcl()
    from bfcl_eval import utils as bfcl_utils  # noqa: PLC0415 (optional dependency, imported when used)
    entries = bfcl_utils.load_dataset_entry(category)  # adds the function docs of the involved classes
    answers = {a["id"]: a["ground_truth"] for a in
               bfcl._read_jsonl(bfcl.data_dir() / "possible_answer" / f"{bfcl.VERSION_PREFIX}_{category}.json")}
    entries = [{**e, "ground_truth": answers[e["id"]], "category": category} for e in entries]
    return entries[:limit] if limit else entries


def decode_ground_truth(calls: list[str]) -> list[dict]:
    """A turn's ground-truth call strings as decoded calls (parsed, never evaluated)."""
    decoded = bfcl.decode("[" + ",".join(calls) + "]") if calls else []
    if decoded is None:
        raise ValueError(f"ground truth does not decode: {calls}")
    return decoded


@dataclass
class TurnState:
    """One turn being scored: its chat, its two back-end copies and what the model did so far."""
    entry: dict
    turn: int
    messages: list[dict]
    model_backends: Backends
    earlier_results: list[str]           # ground-truth results of earlier turns (BFCL counts all turns)
    responses: list[str] = field(default_factory=list)
    model_results: list[str] = field(default_factory=list)
    calls_made: int = 0
    done: bool = False
    error_type: str | None = None


def _user_messages(entry: dict, turn: int) -> list[dict]:
    """A turn's user messages; the first turn's carry BFCL's system prompt with the function docs."""
    messages = copy.deepcopy(entry["question"][turn])
    return bfcl.bfcl().system_prompt(messages, entry["function"], entry["id"]) if turn == 0 else messages


def turn_states(entry: dict) -> list[TurnState]:
    """A TurnState per turn that has ground-truth calls (BFCL's irrelevance turns have none and are skipped)."""
    states = []
    for turn, ground_truth in enumerate(entry["ground_truth"]):
        if not ground_truth:
            continue
        model_backends = Backends(entry)
        messages = []
        earlier = []
        for previous in range(turn):
            messages.extend(_user_messages(entry, previous))
            calls = decode_ground_truth(entry["ground_truth"][previous])
            if not calls:
                continue
            results = model_backends.execute(calls)
            earlier.extend(results)
            messages.append({"role": "assistant", "content": "[" + ", ".join(entry["ground_truth"][previous]) + "]"})
            messages.extend({"role": "tool", "content": r} for r in results)
        messages.extend(_user_messages(entry, turn))
        states.append(TurnState(entry, turn, messages, model_backends, earlier))
    return states


def step(state: TurnState, response: str | None, max_steps: int) -> None:
    """Feed one model response into a turn: decode, execute, extend the chat, or end the turn."""
    if response is None:  # the prompt did not fit the model's context
        state.done, state.error_type = True, "prompt_exceeds_context"
        return
    state.responses.append(response)
    decoded = bfcl.decode(response)
    if not decoded:
        state.done = True
        return
    results = state.model_backends.execute(decoded)
    state.calls_made += len(decoded)
    state.model_results.extend(results)
    state.messages.append({"role": "assistant", "content": response})
    state.messages.extend({"role": "tool", "content": r} for r in results)
    if len(state.responses) >= max_steps:
        state.done = True


def score(state: TurnState) -> dict:
    """BFCL's per-turn checks against a back-end copy that ran the ground truth up to this turn."""
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import response_checker, state_checker  # noqa: PLC0415 (optional dependency)

    if state.error_type == "prompt_exceeds_context":
        return {"valid": False, "error_type": state.error_type}
    if state.calls_made == 0:
        return {"valid": False, "error_type": "multi_turn:empty_turn_model_response"}
    truth = Backends(state.entry)
    for turn in range(state.turn):
        truth.execute(decode_ground_truth(state.entry["ground_truth"][turn]))
    truth_results = truth.execute(decode_ground_truth(state.entry["ground_truth"][state.turn]))
    checked = state_checker(state.model_backends.instances, truth.instances)
    if checked["valid"]:
        checked = response_checker(state.earlier_results + state.model_results, truth_results, state.turn)
    return {"valid": bool(checked["valid"]), "error_type": checked.get("error_type")}


def run_turns(entries: list[dict], respond: Callable[[list[list[dict]]], list[str | None]], max_steps: int = 5,
              progress: Callable[[int], None] | None = None) -> list[dict]:
    """Score every ground-truth turn of ``entries``.

    ``respond`` maps a batch of chats to one response each (``None``: the chat does not fit the model).
    All turns advance together, one step at a time, so a model answers many turns per batch.
    Returns one row per turn: id, turn, valid, error_type, the raw responses of each step.
    """
    states = [s for e in entries for s in turn_states(e)]
    while True:
        active = [s for s in states if not s.done]
        if not active:
            break
        for state, response in zip(active, respond([s.messages for s in active])):
            step(state, response, max_steps)
            if state.done and progress:
                progress(1)
    rows = []
    for state in states:
        verdict = score(state)
        rows.append({"id": state.entry["id"], "turn": state.turn, "valid": verdict["valid"],
                     "error_type": verdict["error_type"], "responses": state.responses})
    return rows


def count_turns(entries: list[dict]) -> int:
    return sum(1 for e in entries for gt in e["ground_truth"] if gt)


def result_file_rows(entries: list[dict], rows: list[dict]) -> list[dict]:
    """BFCL's multi-turn result format: per entry, per turn, the list of raw step responses."""
    by_turn = {(r["id"], r["turn"]): r["responses"] for r in rows}
    return [{"id": e["id"], "result": [by_turn.get((e["id"], t), []) for t in range(len(e["ground_truth"]))]}
            for e in entries]

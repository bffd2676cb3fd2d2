"""The simulator's side of domains whose tasks are one JSON object (toolcall, apibank, multihop, travel): reading
its untrusted text, and the agent's success rate as its prompt states it."""

from __future__ import annotations

import json
import sys

from genenv.domains.base import Invalid


def parse_json_object(text, keys: tuple[str, ...]) -> dict | Invalid:
    """A simulator's JSON task: the outermost ``{...}`` of untrusted text (code fences and a ``json`` tag
    tolerated), parsed (:func:`loads_untrusted`) and checked to be an object with every key of ``keys``; otherwise
    Invalid with the reason. Never raises."""
    if not isinstance(text, str):
        return Invalid("not text", repr(text))
    body = text.strip().strip("`")
    if body.startswith("json"):
        body = body[4:]
    start, end = body.find("{"), body.rfind("}")
    if start < 0 or end <= start:
        return Invalid("no JSON object", text)
    data = loads_untrusted(body[start:end + 1])
    if isinstance(data, Invalid):
        return Invalid(data.reason, text)
    if not isinstance(data, dict):
        return Invalid("JSON is not an object", text)
    missing = [k for k in keys if k not in data]
    if missing:
        return Invalid(f"missing key: {missing[0]}", text)
    return data


def loads_untrusted(body: str, **options):
    """``json.loads`` of untrusted text, or Invalid with the reason: malformed JSON, nesting deeper than the
    interpreter's recursion, or a number past Python's integer digit limit (``sys.get_int_max_str_digits``,
    4,300 digits by default, which ``json`` turns into a ValueError). Never raises."""
    try:
        return json.loads(body, **options)
    except (json.JSONDecodeError, RecursionError) as err:
        return Invalid(f"malformed JSON: {type(err).__name__}", body)
    except ValueError as err:   # an integer literal past the digit limit (a hook's own ValueError subclass passes)
        if type(err) is not ValueError:
            raise
        return Invalid(f"malformed JSON: a number past Python's {sys.get_int_max_str_digits()}-digit integer limit",
                       body)


def stated_rate(stats: dict) -> str:
    """The agent's recent success on the seed as the simulator's prompt says it: "0.4", or "unknown"."""
    rate = stats.get("success_rate")
    return "unknown" if rate is None else f"{rate:.1f}"

"""Scoring one predicted call against a gold API turn (SPEC.md 5.2), with the verdict's reason."""

from __future__ import annotations

from dataclasses import dataclass

from genenv.domains.apibank.calls import extract_call
from genenv.domains.apibank.tools import CallError, CheckCrash, ToolSession, Unavailable
from genenv.timeouts import CallTimeout, time_limit

CALL_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Verdict:
    correct: bool
    reason: str  # "correct", "no API call", "API name mismatch", "unavailable offline", "invalid call",
    #              "has exception", "output mismatch", "input mismatch", "check error"


def score_call(prediction: str, gold: dict, databases: dict, session: ToolSession | None = None) -> Verdict:
    """Is ``prediction`` (model text) the gold API turn's call? ``gold``: ``{"api_name", "result"}``; a fresh
    state of ``databases`` unless a ``session`` is given (level 3 keeps one)."""
    try:
        # the limit covers parsing as well as the call: both run on untrusted text
        with time_limit(CALL_TIMEOUT_S):
            call = extract_call(prediction)
            if call is None:
                return Verdict(False, "no API call")
            if call.name != gold["api_name"]:
                return Verdict(False, "API name mismatch")
            session = session or ToolSession(databases)
            result = session.execute(call.name, call.arguments)
    except Unavailable:
        return Verdict(False, "unavailable offline")
    except (CallError, CallTimeout):
        return Verdict(False, "invalid call")
    try:
        correct = session.tool(gold["api_name"]).check(result, gold["result"])
    except CheckCrash:
        return Verdict(False, "check error")
    if correct:
        return Verdict(True, "correct")
    if result["exception"] is not None:
        return Verdict(False, "has exception")
    return Verdict(False, "output mismatch" if result["output"] != gold["result"]["output"] else "input mismatch")

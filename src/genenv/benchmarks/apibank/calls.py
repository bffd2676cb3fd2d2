"""API-Bank's call syntax: finding and parsing ``API-Request: [Name(key='value', ...)]`` in model text.

Upstream-compatible (our SPEC.md of the benchmark, section 2.3): the first ``[Word(...)]`` on one line, the
parentheses' content running to the last ``)]`` of that line; arguments scanned left to right as ``key='...'``
or ``key="..."`` (the value stops at the next quote of either kind), ``key=[...]`` (to the last ``]``) or
``key=word``; every value is a string, and text matching none of the forms is ignored. Nothing is evaluated.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# the first "[Name(...)]" on one line; ".*" is greedy and "." stops at a newline
_CALL = re.compile(r"\[(\w+)\((.*)\)\]")
# at each position the first alternative that matches wins: quoted, list, word
_ARGUMENT = re.compile(r"(\w+)\s*=\s*(?:['\"](.+?)['\"]|(\[.*\])|(\w+))")


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: dict[str, str]


def extract_call(text: str) -> ParsedCall | None:
    """The call in ``text``, or None when it has none (upstream: "no API call", scored wrong)."""
    match = _CALL.search(text or "")
    if match is None:
        return None
    return ParsedCall(match.group(1), parse_arguments(match.group(2)))


def parse_arguments(text: str) -> dict[str, str]:
    arguments: dict[str, str] = {}
    for match in _ARGUMENT.finditer(text):
        key, quoted, listed, word = match.groups()
        arguments[key] = next(v for v in (quoted, listed, word) if v is not None)
    return arguments


def format_call(name: str, arguments: dict) -> str:
    """A call as the test files write it: ``API-Request: [Name(key='value', ...)]``."""
    inner = ", ".join(f"{key}='{value}'" for key, value in arguments.items())
    return f"API-Request: [{name}({inner})]"

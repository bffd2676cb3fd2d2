"""API-Bank's call syntax: finding and parsing ``API-Request: [Name(key='value', ...)]`` in model text.

Upstream-compatible (our SPEC.md of the benchmark, section 2.3): the first ``[Word(...)]`` on one line, the
parentheses' content running to the last ``)]`` of that line; arguments scanned left to right as ``key='...'``
or ``key="..."`` (the value stops at the next quote of either kind), ``key=[...]`` (to the last ``]``) or
``key=word``; every value is a string, and text matching none of the forms is ignored. Nothing is evaluated.
"""

from __future__ import annotations

from dataclasses import dataclass

_QUOTES = "'\""


def _is_word(char: str) -> bool:
    """A character of ``\\w`` in a Python ``str`` pattern (letters, digits and numerics of any script, ``_``)."""
    return char.isalnum() or char == "_"


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: dict[str, str]


def extract_call(text: str) -> ParsedCall | None:
    """The call in ``text``, or None when it has none (upstream: "no API call", scored wrong).

    The first match of upstream's ``\\[(\\w+)\\((.*)\\)\\]`` (``.`` stops at a newline), found in time linear in the
    text: a ``[`` followed by a word and ``(`` starts a call when ``)]`` occurs later on its line, and the
    arguments run to the last ``)]`` of that line (the regex, tried at every ``[``, took time quadratic in a long
    line: 5.6 s for 64k characters of ``[a(``)."""
    for line in (text or "").split("\n"):
        last_close = line.rfind(")]")
        start = line.find("[")
        while 0 <= start < last_close:
            end = start + 1
            while end < len(line) and _is_word(line[end]):
                end += 1
            if end > start + 1 and end < len(line) and line[end] == "(" and last_close >= end + 1:
                return ParsedCall(line[start + 1:end], parse_arguments(line[end + 1:last_close]))
            start = line.find("[", end)
    return None


def parse_arguments(text: str) -> dict[str, str]:
    """Upstream's arguments, ``re.finditer`` of ``(\\w+)\\s*=\\s*(?:['"](.+?)['"]|(\\[.*\\])|(\\w+))``, in linear time.

    A match can only start where a word starts (from inside a word the same word end fails the same way), and the
    key is the whole word; after ``=`` (spaces around it allowed) the value is, in this order: after a quote, at
    least one character up to the next quote of either kind on the line; from ``[`` to the line's last ``]``; a
    word. A key whose value matches none of them is skipped. The next quote, the end of the line and the line's
    last ``]`` are looked up in tables built once (the regex scanned ahead from every key and every position of
    a long word: 47 s for one 64k-character word)."""
    n = len(text)
    next_quote, next_newline, line_last_bracket = [n] * (n + 1), [n] * (n + 1), [-1] * (n + 1)
    for i in range(n - 1, -1, -1):
        next_quote[i] = i if text[i] in _QUOTES else next_quote[i + 1]
        next_newline[i] = i if text[i] == "\n" else next_newline[i + 1]
    last = -1
    for i in range(n):
        if text[i] == "\n":
            last = -1
        elif text[i] == "]":
            last = i
        line_last_bracket[i] = last
    for i in range(n - 2, -1, -1):   # the last "]" of the line holding i, seen from anywhere on that line
        if text[i] != "\n" and text[i + 1] != "\n":
            line_last_bracket[i] = line_last_bracket[i + 1]
    arguments: dict[str, str] = {}
    i = 0
    while i < n:
        if not _is_word(text[i]) or (i > 0 and _is_word(text[i - 1])):
            i += 1
            continue
        key_end = i
        while key_end < n and _is_word(text[key_end]):
            key_end += 1
        q = key_end
        while q < n and text[q].isspace():
            q += 1
        value, end = None, key_end
        if q < n and text[q] == "=":
            q += 1
            while q < n and text[q].isspace():
                q += 1
            if q < n and text[q] in _QUOTES:
                close = next_quote[q + 2] if q + 2 <= n else n
                if close < n and close < next_newline[q + 1]:
                    value, end = text[q + 1:close], close + 1
            if value is None and q < n and text[q] == "[" and line_last_bracket[q] > q:
                value, end = text[q:line_last_bracket[q] + 1], line_last_bracket[q] + 1
            if value is None and q < n and _is_word(text[q]):
                end = q
                while end < n and _is_word(text[end]):
                    end += 1
                value = text[q:end]
        if value is not None:
            arguments[text[i:key_end]] = value
            i = end
        else:
            i = key_end
    return arguments


def format_call(name: str, arguments: dict) -> str:
    """A call as the test files write it: ``API-Request: [Name(key='value', ...)]``."""
    inner = ", ".join(f"{key}='{value}'" for key, value in arguments.items())
    return f"API-Request: [{name}({inner})]"

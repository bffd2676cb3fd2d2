"""What a JSON schema's ``uniqueItems`` and JSON's unique object keys add to constrained sampling (issue 57).

llguidance compiles a schema to a grammar, and a grammar cannot say "not a string written earlier": it refuses a
schema with ``uniqueItems`` ("Unimplemented keys") and lets an object repeat a key its ``patternProperties``
allow. Household worlds written under the grammar were rejected mostly for that (a receptacle or an object named
twice, docs/constrained.md). This module is the rest of the check, small enough to run before every sampled token:

- :func:`unique_array_paths`: where the schema declares ``uniqueItems: true`` (as paths of property names, ``*``
  for a key its ``patternProperties`` / ``additionalProperties`` allow, ``[]`` for an array's item);
- :func:`without_unique_items`: the schema llguidance compiles (the keyword removed);
- :class:`UniqueStrings`: a JSON scanner over the bytes written so far whose state is an immutable tuple, so a
  candidate token is tried on it without copying (:meth:`UniqueStrings.feed` says whether the token would finish
  a string that repeats an object's earlier key, or an earlier item of an array declared unique). Only strings
  are compared (an array of numbers or objects declared unique is not checked here: ``genenv check-domain`` and
  the domain's ``validate`` still are).

The masks stay a function of the tokens written so far, so replaying them over a stored response gives the
sampler's masks (the update's log-probs are the sampler's, ``tests/test_json_unique.py``).
"""

from __future__ import annotations

import json

ANY_KEY = "*"
ITEM = "[]"
_NESTING = ("anyOf", "oneOf", "allOf")


def unique_array_paths(schema, path: tuple = ()) -> frozenset:
    """The paths of the arrays ``schema`` declares ``uniqueItems: true`` (each a tuple of property names,
    :data:`ANY_KEY` and :data:`ITEM`)."""
    if not isinstance(schema, dict):
        return frozenset()
    found = {path} if schema.get("uniqueItems") is True else set()
    for key in _NESTING:
        for branch in schema.get(key, []):
            found |= unique_array_paths(branch, path)
    for name, sub in schema.get("properties", {}).items():
        found |= unique_array_paths(sub, path + (name,))
    for sub in list(schema.get("patternProperties", {}).values()) + [schema.get("additionalProperties")]:
        found |= unique_array_paths(sub, path + (ANY_KEY,))
    for sub in [schema.get("items")] + list(schema.get("prefixItems", [])):
        found |= unique_array_paths(sub, path + (ITEM,))
    return frozenset(found)


def without_unique_items(schema):
    """``schema`` without its ``uniqueItems`` keywords (a property named so is kept)."""
    if isinstance(schema, list):
        return [without_unique_items(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key == "uniqueItems":
            continue
        if key in ("properties", "patternProperties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: without_unique_items(sub) for name, sub in value.items()}
        else:
            out[key] = without_unique_items(value)
    return out


def _matches(pattern: tuple, path: tuple) -> bool:
    return len(pattern) == len(path) and all(p == q or (p == ANY_KEY and q != ITEM) for p, q in zip(pattern, path))


def _string_value(raw: bytes) -> str:
    try:
        return json.loads(b'"' + raw + b'"')
    except (json.JSONDecodeError, UnicodeDecodeError):
        return raw.decode("utf-8", "replace")


# A scan state: (stack, string, escaped). stack: a tuple of frames, innermost last; a frame is
# (kind, path, seen, expecting_key, key): kind "o" (object) or "a" (array), seen the frozenset of the keys (object)
# or items (array) written so far, expecting_key whether the object's next string is a key, key the object's
# current key. string: None outside a string, else (raw bytes so far, role) with role "key", "item" or "value".
START = ((), None, False)


class UniqueStrings:
    """The scanner of one schema: which arrays hold unique strings (object keys always do)."""

    def __init__(self, schema):
        self.patterns = unique_array_paths(schema)
        self._unique: dict[tuple, bool] = {}

    def unique(self, path: tuple) -> bool:
        if path not in self._unique:
            self._unique[path] = any(_matches(p, path) for p in self.patterns)
        return self._unique[path]

    def watching(self, state) -> bool:
        """Whether a token could repeat a string here: the innermost container is an object or a unique array."""
        stack = state[0]
        return bool(stack) and (stack[-1][0] == "o" or self.unique(stack[-1][1]))

    def feed(self, state, data: bytes):
        """``(new state, repeated)``: the scan after ``data``, and the first string ``data`` finished that repeats
        its object's earlier key or its unique array's earlier item (None if none; the scan goes on past a repeat
        the sampler could not avoid)."""
        stack, string, escaped = state
        repeated = None
        for byte in data:
            if string is not None:
                raw, role = string
                if escaped:
                    string, escaped = (raw + bytes([byte]), role), False
                elif byte == 0x5C:        # backslash
                    string, escaped = (raw + b"\\", role), True
                elif byte == 0x22:        # the closing quote
                    string = None
                    if role == "value":
                        continue
                    value = _string_value(raw)
                    kind, path, seen, expecting, key = stack[-1]
                    if repeated is None and value in seen:
                        repeated = value
                    if role == "key":
                        stack = stack[:-1] + (("o", path, seen | {value}, False, value),)
                    else:
                        stack = stack[:-1] + (("a", path, seen | {value}, False, None),)
                else:
                    string = (raw + bytes([byte]), role)
                continue
            if byte == 0x22:              # an opening quote
                if stack and stack[-1][0] == "o":
                    role = "key" if stack[-1][3] else "value"
                elif stack and self.unique(stack[-1][1]):
                    role = "item"
                else:
                    role = "value"
                string = (b"", role)
            elif byte in (0x7B, 0x5B):    # { or [
                stack = stack + (("o" if byte == 0x7B else "a", self._child_path(stack), frozenset(),
                                  byte == 0x7B, None),)
            elif byte in (0x7D, 0x5D):    # } or ]
                stack = stack[:-1]
            elif byte == 0x2C and stack and stack[-1][0] == "o":     # , : the next key
                kind, path, seen, _, _ = stack[-1]
                stack = stack[:-1] + ((kind, path, seen, True, None),)
        return (stack, string, escaped), repeated

    @staticmethod
    def _child_path(stack) -> tuple:
        if not stack:
            return ()
        kind, path, _, _, key = stack[-1]
        return path + ((key if key is not None else ANY_KEY) if kind == "o" else ITEM,)

    def first_repeat(self, text: str) -> str | None:
        """None when ``text`` repeats no object key and no item of a unique array; else the first repeated string."""
        return self.feed(START, text.encode("utf-8"))[1]

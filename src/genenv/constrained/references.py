"""What a JSON schema's ``uniqueItems``, JSON's unique object keys and our ``x-member-of`` add to constrained
sampling (issue 57).

llguidance compiles a schema to a grammar, and a grammar cannot say "not a string written earlier": it refuses a
schema with ``uniqueItems`` ("Unimplemented keys") and lets an object repeat a key its ``patternProperties``
allow. Household worlds written under the grammar were rejected mostly for that (a receptacle or an object named
twice, docs/constrained.md). This module is the rest of the check, small enough to run before every sampled token:

- :func:`unique_array_paths`: where the schema declares ``uniqueItems: true`` (as paths of property names, ``*``
  for a key its ``patternProperties`` / ``additionalProperties`` allow, ``[]`` for an array's item);
- :func:`member_paths`: where a string must equal a string written earlier (the schema keyword :data:`MEMBER_OF`,
  ours: ``"x-member-of": ["receptacles"]`` on an object's values says each is one of the strings of the root's
  ``receptacles`` array; the household's objects stand in the world's receptacles), or the type of one
  (:data:`TYPE_OF`: ``"x-type-of": ["objects"]`` says the string is the type of one of the root ``objects``
  object's keys, a name's type being what comes before its last space: ``"apple"`` of ``"apple 1"``; the
  household's goal, written last, names the types of the world's objects and receptacles), or one of the strings
  of a property of its own object (:data:`MEMBER_OF_SIBLING`: ``"x-member-of-sibling": "properties"`` on the
  items of a function's ``required`` says each is one of the keys of the same ``parameters`` object's
  ``properties``, as written in that object: the strings of an earlier function's do not count);
- :func:`without_unique_items`: the schema llguidance compiles (those keywords removed);
- :class:`UniqueStrings`: a JSON scanner over the bytes written so far whose state is an immutable tuple, so a
  candidate token is tried on it without copying (:meth:`UniqueStrings.feed` says whether the token would finish
  a string that repeats an object's earlier key, or an earlier item of an array declared unique, or a byte that
  takes a member-of (or type-of) string off every member's spelling). Only strings
  are compared (an array of numbers or objects declared unique is not checked here: ``genenv check-domain`` and
  the domain's ``validate`` still are).

- :class:`ScanRefusal`: the same scan at the token level, the allowed tokens of a row it refuses.

The masks stay a function of the tokens written so far, so replaying them over a stored response gives the
sampler's masks (the update's log-probs are the sampler's, ``tests/test_json_unique.py``).
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import NamedTuple

import numpy as np

from genenv.constrained.bitmask import bits_of, words_of

ANY_KEY = "*"
ITEM = "[]"
KEY = "{}"            # an object's key, in the path of a key string (a referenced object's keys)
MEMBER_OF = "x-member-of"
TYPE_OF = "x-type-of"
MEMBER_OF_SIBLING = "x-member-of-sibling"
KEYWORDS = ("uniqueItems", MEMBER_OF, TYPE_OF, MEMBER_OF_SIBLING)   # what llguidance does not compile
_NESTING = ("anyOf", "oneOf", "allOf")


def _subschemas(schema, path: tuple = ()):
    """Every (path, subschema) of ``schema``, itself first: its branches (``anyOf`` ...) at the same path, its
    properties by name, its pattern or additional properties as :data:`ANY_KEY`, its items as :data:`ITEM`."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for key in _NESTING:
        for branch in schema.get(key, []):
            yield from _subschemas(branch, path)
    for name, sub in schema.get("properties", {}).items():
        yield from _subschemas(sub, path + (name,))
    for sub in list(schema.get("patternProperties", {}).values()) + [schema.get("additionalProperties")]:
        yield from _subschemas(sub, path + (ANY_KEY,))
    for sub in [schema.get("items")] + list(schema.get("prefixItems", [])):
        yield from _subschemas(sub, path + (ITEM,))


def unique_array_paths(schema) -> frozenset:
    """The paths of the arrays ``schema`` declares ``uniqueItems: true`` (each a tuple of property names,
    :data:`ANY_KEY` and :data:`ITEM`)."""
    return frozenset(path for path, sub in _subschemas(schema) if sub.get("uniqueItems") is True)


class Reference(NamedTuple):
    """What a member-of or type-of string must name: the path of the strings written earlier (an array's items,
    :data:`ITEM`, or an object's keys, :data:`KEY`), whether it names their type rather than their whole, and (a
    sibling's strings, :data:`MEMBER_OF_SIBLING`) the path of the object whose own strings alone count."""
    strings: tuple
    type_only: bool
    scope: tuple | None = None


def _is_array(sub) -> bool:
    return isinstance(sub, dict) and (sub.get("type") == "array" or "prefixItems" in sub)


def _referenced(schema, names) -> tuple:
    """The path of the strings a keyword's root names point at: the keys of an object, the items of an array (of
    its arrays' items, where its items are arrays: a list of facts ``[entity, relation, entity]``)."""
    sub = schema
    for at, name in enumerate(names):
        sub = sub.get("items") if name == ITEM else sub.get("properties", {}).get(name)
        if not isinstance(sub, dict):
            raise ValueError(f"a reference names {list(names[:at + 1])}, which the schema does not declare")
    if isinstance(sub, dict) and (sub.get("type") == "object" or "patternProperties" in sub):
        return tuple(names) + (KEY,)
    if isinstance(sub, dict) and sub.get("type") == "string":
        return tuple(names)                   # the strings at that path themselves (each function's name)
    path = tuple(names) + (ITEM,)
    while _is_array(items := sub.get("items")) or any(map(_is_array, sub.get("prefixItems", []))):
        sub = items if _is_array(items) else next(filter(_is_array, sub["prefixItems"]))
        path += (ITEM,)
    return path


def _own_object(path: tuple) -> tuple:
    """The path of the object a string at ``path`` lies in (past an array's items, then the property's name)."""
    while path and path[-1] == ITEM:
        path = path[:-1]
    return path[:-1]


def member_paths(schema) -> dict:
    """Where ``schema`` declares :data:`MEMBER_OF`, :data:`TYPE_OF` or :data:`MEMBER_OF_SIBLING`: {the string's path:
    its :class:`Reference`}. ValueError names a reference to a property the schema does not declare."""
    subs = list(_subschemas(schema))
    paths = {path: Reference(_referenced(schema, sub[keyword]), keyword == TYPE_OF)
             for path, sub in subs for keyword in (MEMBER_OF, TYPE_OF) if isinstance(sub.get(keyword), list)}
    for path, sub in subs:
        sibling = sub.get(MEMBER_OF_SIBLING)
        if isinstance(sibling, str):
            scope = _own_object(path)
            owner = next((s for p, s in subs if p == scope and sibling in s.get("properties", {})), None)
            if owner is None:
                raise ValueError(f"{MEMBER_OF_SIBLING} {sibling!r} at {list(path)}: its object declares no such "
                                 "property")
            paths[path] = Reference(scope + _referenced(owner, [sibling]), False, scope)
    return paths


def without_unique_items(schema):
    """``schema`` without the keywords llguidance does not compile (:data:`KEYWORDS`; a property named so is kept)."""
    if isinstance(schema, list):
        return [without_unique_items(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {}
    for key, value in schema.items():
        if key in KEYWORDS:
            continue
        if key in ("properties", "patternProperties", "$defs", "definitions") and isinstance(value, dict):
            out[key] = {name: without_unique_items(sub) for name, sub in value.items()}
        else:
            out[key] = without_unique_items(value)
    return out


def _matches(pattern: tuple, path: tuple) -> bool:
    return len(pattern) == len(path) and all(p == q or (p == ANY_KEY and q not in (ITEM, KEY))
                                             for p, q in zip(pattern, path))


def type_of(raw: bytes) -> bytes:
    """A name's type: what comes before its last space (``b"apple"`` of ``b"apple 1"``; a name without one is its
    own type)."""
    return raw.rsplit(b" ", 1)[0]


@lru_cache(maxsize=1024)
def _names(reference: Reference, written: frozenset) -> frozenset:
    """The spellings a string under ``reference`` may take: the referenced strings written so far, or their types
    (cached: the scan asks for each byte of a member-of string, and for each token tried there, with the same
    ``written``)."""
    return frozenset(type_of(raw) if reference.type_only else raw for path, raw in written
                     if path == reference.strings)


def _string_value(raw: bytes) -> str:
    try:
        return json.loads(b'"' + raw + b'"')
    except (json.JSONDecodeError, UnicodeDecodeError):
        return raw.decode("utf-8", "replace")


# A scan state: (stack, string, escaped, written). stack: a tuple of frames, innermost last; a frame is
# (kind, path, seen, expecting_key, key): kind "o" (object) or "a" (array), seen the frozenset of the keys (object)
# or items (array) written so far, expecting_key whether the object's next string is a key, key the object's
# current key. string: None outside a string, else (raw bytes so far, role, path) with role "key", "item" or
# "value" and path the string's own (a key's: its object's path and KEY). written: the frozenset of (path, raw
# bytes) of the finished strings that a member-of or type-of string may name.
START = ((), None, False, frozenset())


class UniqueStrings:
    """The scanner of one schema: which arrays hold unique strings (object keys always do)."""

    def __init__(self, schema):
        self.patterns = unique_array_paths(schema)
        self.members = member_paths(schema)
        self._unique: dict[tuple, bool] = {}
        self._member: dict[tuple, Reference | None] = {}
        self._named: dict[tuple, bool] = {}
        self.scopes = frozenset(ref.scope for ref in self.members.values() if ref.scope is not None)
        self._scoped: dict[tuple, bool] = {}

    def member_of(self, path: tuple) -> Reference | None:
        """What a string at ``path`` must name (:class:`Reference`), or None."""
        if path not in self._member:
            self._member[path] = next((ref for p, ref in self.members.items() if _matches(p, path)), None)
        return self._member[path]

    def named(self, path: tuple) -> bool:
        """Whether a member-of string may name the string at ``path`` (it is recorded)."""
        if path not in self._named:
            self._named[path] = any(_matches(ref.strings, path) for ref in self.members.values())
        return self._named[path]

    def inside_member(self, state) -> bool:
        """Whether the scan is inside a member-of string (every byte of the next token matters, not only a quote)."""
        string = state[1]
        return string is not None and self.member_of(string[2]) is not None

    def spellings_left(self, state) -> list | None:
        """Inside a member-of (or type-of) string, what is left of each member's spelling that the string so far
        starts (``b""`` for one it spells whole); None elsewhere, and after a backslash (the scan checks the escaped
        byte with the next one)."""
        string, escaped = state[1], state[2]
        ref = self.member_of(string[2]) if string is not None else None
        if ref is None or escaped:
            return None
        raw = string[0]
        return sorted(name[len(raw):] for name in _names(ref, state[3]) if name.startswith(raw))

    def scoped(self, path: tuple) -> bool:
        """Whether an object at ``path`` is the scope of a sibling's strings (its own strings alone count)."""
        if path not in self._scoped:
            self._scoped[path] = any(_matches(scope, path) for scope in self.scopes)
        return self._scoped[path]

    def unique(self, path: tuple) -> bool:
        if path not in self._unique:
            self._unique[path] = any(_matches(p, path) for p in self.patterns)
        return self._unique[path]

    def watching(self, state) -> bool:
        """Whether a token could repeat a string, or leave a member-of string, here: the innermost container is an
        object, a unique array or an array of member-of strings."""
        stack = state[0]
        return bool(stack) and (stack[-1][0] == "o" or self.unique(stack[-1][1])
                                or self.member_of(stack[-1][1] + (ITEM,)) is not None)

    def feed(self, state, data: bytes):
        """``(new state, refused)``: the scan after ``data``, and the first string ``data`` finished that repeats
        its object's earlier key or its unique array's earlier item, or that a member-of string took off every
        member (its bytes so far; None if none; the scan goes on past what the sampler could not avoid)."""
        stack, string, escaped, written = state
        refused = None
        for byte in data:
            if string is not None:
                raw, role, path = string
                ref = self.member_of(path)
                if byte != 0x22 or escaped:
                    escaped = not escaped and byte == 0x5C     # a backslash escapes the next byte
                    raw = raw + bytes([byte])
                    string = (raw, role, path)
                    if ref is not None and refused is None and not escaped and not any(
                            name.startswith(raw) for name in _names(ref, written)):
                        refused = _string_value(raw)          # off every member's spelling
                    continue
                string = None                                   # the closing quote
                if ref is not None and refused is None and raw not in _names(ref, written):
                    refused = _string_value(raw)
                if self.named(path):
                    written = written | {(path, raw)}
                if role == "value":
                    continue
                value = _string_value(raw)
                kind, frame_path, seen, expecting, key = stack[-1]
                if refused is None and value in seen:
                    refused = value
                if role == "key":
                    stack = stack[:-1] + (("o", frame_path, seen | {value}, False, value),)
                else:
                    stack = stack[:-1] + (("a", frame_path, seen | {value}, False, None),)
                continue
            if byte == 0x22:              # an opening quote
                if stack and stack[-1][0] == "o":
                    role = "key" if stack[-1][3] else "value"
                elif stack and self.unique(stack[-1][1]):
                    role = "item"
                else:
                    role = "value"
                string = (b"", role, self._child_path(stack) if role != "key" else stack[-1][1] + (KEY,))
            elif byte in (0x7B, 0x5B):    # { or [
                child = self._child_path(stack)
                stack = stack + (("o" if byte == 0x7B else "a", child, frozenset(), byte == 0x7B, None),)
                if byte == 0x7B and self.scoped(child):   # a sibling's strings count in their own object only
                    written = frozenset(entry for entry in written if entry[0][:len(child)] != child)
            elif byte in (0x7D, 0x5D):    # } or ]
                stack = stack[:-1]
            elif byte == 0x2C and stack and stack[-1][0] == "o":     # , : the next key
                kind, path, seen, _, _ = stack[-1]
                stack = stack[:-1] + ((kind, path, seen, True, None),)
        return (stack, string, escaped, written), refused

    @staticmethod
    def _child_path(stack) -> tuple:
        if not stack:
            return ()
        kind, path, _, _, key = stack[-1]
        return path + ((key if key is not None else ANY_KEY) if kind == "o" else ITEM,)

    def first_repeat(self, text: str) -> str | None:
        """None when ``text`` repeats no object key and no item of a unique array and every member-of string is a
        member; else the first string that fails (a member-of one: its bytes up to where it left every member)."""
        return self.feed(START, text.encode("utf-8"))[1]


# ----- at the token level: what a row's scan refuses of the grammar's mask ------------------------------------

class ScanRefusal:
    """For one tokenizer (``token_bytes``: each id's bytes), the allowed tokens a JSON shape's scan (``unique``)
    refuses at a row: those that would finish a string repeating an earlier one, or take a member-of string off
    every member (:meth:`refuse`)."""

    def __init__(self, unique: UniqueStrings, token_bytes: list[bytes], width: int):
        self.unique, self._token_bytes, self._bitmask_words = unique, token_bytes, width
        self._longest_token = max(map(len, token_bytes))
        # only a token holding a quote can finish a string, so those are the tokens tried against each row's scan
        self._quote_ids = np.array([i for i, b in enumerate(token_bytes) if b'"' in b], dtype=np.int64)
        self._all_ids = np.arange(len(token_bytes), dtype=np.int64)
        # inside a member-of string: a token with neither a quote nor a backslash is allowed exactly when the
        # string so far and its bytes start a member's spelling, so those are looked up by their bytes
        self._escape_ids = np.array([i for i, b in enumerate(token_bytes) if b'"' in b or b"\\" in b],
                                    dtype=np.int64)
        self._plain_ids: dict[bytes, list[int]] = {}
        for i, b in enumerate(token_bytes):
            if b and b'"' not in b and b"\\" not in b:
                self._plain_ids.setdefault(b, []).append(i)

    def refuse(self, bitmask: np.ndarray, row: int, scan) -> None:
        """Clear the bits of the allowed tokens that would finish a string repeating an earlier one, or take a
        member-of string off every member (a pure function of the row's scan, so a replay clears the same bits).
        Outside a member-of string only a token holding a quote can do either; inside one, a token without a quote
        or backslash is kept exactly when it starts what is left of a member's spelling (looked up, not scanned),
        and the others are tried on the scan."""
        words = bitmask[row].view(np.uint32)
        spellings = self.unique.spellings_left(scan)   # None outside a member-of string and after a backslash
        if spellings is not None:
            # the plain tokens that start what is left of a member's spelling, and the quoted or escaping ones
            # the scan accepts; every other token is refused
            on = [i for rest in spellings for k in range(1, min(len(rest), self._longest_token) + 1)
                  for i in self._plain_ids.get(rest[:k], ())]
            tried = self._escape_ids[bits_of(words, self._escape_ids)]
            on += [t for t in tried.tolist() if self.unique.feed(scan, self._token_bytes[t])[1] is None]
            words &= words_of(on, self._bitmask_words)
            return
        ids = self._all_ids if self.unique.inside_member(scan) else self._quote_ids
        for token in ids[bits_of(words, ids)].tolist():
            if self.unique.feed(scan, self._token_bytes[token])[1] is not None:
                words[token >> 5] &= np.uint32(~(1 << (token & 31)) & 0xFFFFFFFF)


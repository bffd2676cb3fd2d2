"""The grammar side of constrained sampling: a domain's task shape compiled by **llguidance** for a tokenizer.

One maintained library does the grammar work: llguidance (a dependency-free abi3 wheel; its numpy path, no
torch.compile). It was chosen over xgrammar by ``benchmarks/constrained_overhead.py`` (at commit 0c7cab3;
docs/results-log/constrained-library.md): both cost well under 1% of a SmolLM2 decoding step per token on this CPU
and a few percent of the tiny model's, and xgrammar declares triton, torch and transformers as requirements where
llguidance declares none.

- :func:`shape_grammar`: the shape's grammar (JSON laid out as the domains write it, or a regex);
  :func:`llguidance_tokenizer`: llguidance's view of a Hugging Face tokenizer (or of its vocabulary list);
- :func:`unpack_bitmask`: llguidance's int32 bitmasks as a boolean tensor;
- :func:`byte_tokenizer`, :func:`byte_bits`: the same grammar over single bytes (what the closing search and
  :func:`grammar_problem` walk);
- :func:`grammar_problem`, :func:`unbounded_places`: what ``genenv check-domain`` reads of a shape.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

import llguidance
import llguidance.hf
import llguidance.numpy as llnp
import numpy as np
import torch

from genenv.constrained.references import UniqueStrings, without_unique_items


def _json_as_written() -> dict:
    """JSON as the domains write it (json.dumps: ", " and ": " between items and keys, no other whitespace, non-ASCII
    characters as backslash-u escapes): llguidance's options, so the simulator spends no tokens on layout. The
    escapes of characters past the control ones need ``json_allow_general_unicode_escapes`` (llguidance 1.8 on);
    llguidance 1.7 (vLLM 0.32's) lacks the option, and there a constrained text writes such a character as itself
    (UTF-8 in the string: the same JSON value, :func:`as_sampler_writes`)."""
    layout = {"item_separator": ", ", "key_separator": ": ", "whitespace_flexible": False}
    escapes = {**layout, "json_allow_general_unicode_escapes": True}
    probe = llguidance.LLMatcher.grammar_from_json_schema(json.dumps({"type": "string", "x-guidance": escapes}))
    return escapes if llguidance.LLMatcher.validate_grammar(probe) == "" else layout


JSON_AS_WRITTEN = _json_as_written()
GENERAL_ESCAPES = "json_allow_general_unicode_escapes" in JSON_AS_WRITTEN
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|.)", re.S)


def as_sampler_writes(text: str) -> str:
    """A JSON text as the constrained sampler writes the same value: itself where the grammar takes backslash-u
    escapes of any character (:data:`GENERAL_ESCAPES`); else with each escape of a character past the control ones
    written as the character itself (a surrogate pair as the one character it encodes)."""
    if GENERAL_ESCAPES:
        return text

    def unescape(match: re.Match) -> str:
        code = None if match.group(1) is None else int(match.group(1), 16)
        return match.group(0) if code is None or code < 0x20 else chr(code)

    written = _ESCAPE.sub(unescape, text)
    try:   # join surrogate pairs
        return written.encode("utf-16", "surrogatepass").decode("utf-16")
    except UnicodeDecodeError:   # a lone surrogate: as it was (the grammar refuses it)
        return text


def shape_grammar(shape) -> str:
    """llguidance's grammar of a task shape: its JSON schema laid out as :data:`JSON_AS_WRITTEN`, or its regex.
    (``uniqueItems``, which llguidance does not implement, is checked beside it:
    :mod:`genenv.constrained.references`.)"""
    if shape.json_schema is not None:
        schema = without_unique_items(shape.json_schema)
        return llguidance.LLMatcher.grammar_from_json_schema(json.dumps({**schema, "x-guidance": JSON_AS_WRITTEN}))
    return llguidance.LLMatcher.grammar_from_regex(shape.regex)


class VocabularyList:
    """A vocabulary as llguidance's ``TokenizerWrapper`` reads it, for a tokenizer whose decoder llguidance's own
    reader does not take (the tiny character-level one): each id's bytes (special tokens empty), the special ids,
    the EOS and BOS ids and the encoder."""

    def __init__(self, hf_tokenizer):
        vocab = sorted(hf_tokenizer.get_vocab().items(), key=lambda kv: kv[1])
        special = set(hf_tokenizer.all_special_ids)
        self.tokens = [b"" if i in special else text.encode("utf-8") for text, i in vocab]
        self.special_token_ids = sorted(special)
        self.eos_token_id, self.bos_token_id = hf_tokenizer.eos_token_id, hf_tokenizer.bos_token_id
        self._hf = hf_tokenizer

    def __call__(self, text):
        text = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
        return self._hf.encode(text, add_special_tokens=False)


def llguidance_tokenizer(hf_tokenizer, eos_token_id: int | None = None):
    """llguidance's tokenizer for a Hugging Face one: read from its JSON when llguidance can, else from its
    vocabulary list (:class:`VocabularyList`). ``eos_token_id``: the id that ends a sequence (the policy's)."""
    try:
        return llguidance.hf.from_tokenizer(hf_tokenizer, eos_token=eos_token_id)
    except ValueError:
        vocabulary = VocabularyList(hf_tokenizer)
        if eos_token_id is not None:
            vocabulary.eos_token_id = eos_token_id
        return llguidance.LLTokenizer(llguidance.TokenizerWrapper(vocabulary))


def unpack_bitmask(bitmask: np.ndarray, vocab_size: int, fill: bool = False) -> torch.Tensor:
    """[B, W] int32 bitmasks (bit t % 32 of word t // 32: token t allowed) as a [B, vocab_size] boolean tensor. Ids
    past the bitmask's width (a model whose logits are wider than its tokenizer's vocabulary) are not allowed, or,
    with ``fill``, allowed in a row that allows every token of the bitmask (a free row stays free)."""
    bits = np.unpackbits(np.ascontiguousarray(bitmask).view(np.uint8), axis=1, bitorder="little").astype(bool)
    if bits.shape[1] >= vocab_size:
        return torch.from_numpy(bits[:, :vocab_size])
    extra = np.zeros((bits.shape[0], vocab_size - bits.shape[1]), dtype=bool)
    if fill:
        extra[bits.all(axis=1)] = True
    return torch.from_numpy(np.concatenate([bits, extra], axis=1))


def byte_bits(matcher) -> np.ndarray:
    """The bytes a matcher over :func:`byte_tokenizer`'s vocabulary allows next, one 0/1 per byte (and its EOS,
    256)."""
    mask = np.zeros((1, 9), dtype=np.int32)   # the 256 bytes and the byte vocabulary's EOS
    llnp.fill_next_token_bitmask(matcher, mask, 0)
    return np.unpackbits(mask[0].view(np.uint8), bitorder="little")


class _ByteVocabulary:
    """A vocabulary of the 256 bytes and an EOS token (id 256), for checking a text against a shape independently of
    any model's tokenizer (:func:`grammar_problem`)."""

    tokens = [bytes([i]) for i in range(256)] + [b""]
    special_token_ids = [256]
    eos_token_id = 256
    bos_token_id = None

    def __call__(self, text):
        return list(text.encode("utf-8") if isinstance(text, str) else text)


@lru_cache(maxsize=1)
def byte_tokenizer():
    """llguidance's tokenizer of :class:`_ByteVocabulary` (built once: the closing search and
    :func:`grammar_problem` share it)."""
    return llguidance.LLTokenizer(llguidance.TokenizerWrapper(_ByteVocabulary()))


_BYTE_CONSTRAINTS: dict = {}


def grammar_problem(shape, text: str) -> str | None:
    """None when a constrained sampler could write ``text`` exactly, byte by byte, and then end it (the grammar's
    JSON layout is :data:`JSON_AS_WRITTEN`, keys in the schema's order; non-ASCII :func:`as_sampler_writes` it);
    else where the grammar refuses it. What
    ``genenv check-domain`` adds to the schema check: a domain's task text may satisfy its schema and still not be
    writable under ``env.constrained`` (another key order or whitespace)."""
    key = json.dumps([shape.json_schema, shape.regex], sort_keys=True)
    if key not in _BYTE_CONSTRAINTS:
        tokenizer = byte_tokenizer()
        try:
            unique = UniqueStrings(shape.json_schema) if shape.json_schema is not None else None
        except ValueError as error:      # a reference to a property the schema does not declare
            return f"the shape does not compile: {error}"
        _BYTE_CONSTRAINTS[key] = (tokenizer, shape_grammar(shape), unique)
    tokenizer, grammar, unique = _BYTE_CONSTRAINTS[key]
    matcher = llguidance.LLMatcher(tokenizer, grammar, log_level=0)
    if matcher.is_error():
        return f"the shape does not compile: {matcher.get_error()[:200]}"
    data = (as_sampler_writes(text) if shape.json_schema is not None else text).encode("utf-8")
    for at, byte in enumerate(data):
        if matcher.is_stopped() or not matcher.consume_token(byte):
            near = data[max(0, at - 30):at + 10]
            return f"the constrained sampler cannot write it: refused at character {at} ({near!r})"
    if not (matcher.is_stopped() or matcher.is_accepting()):
        return "the constrained sampler cannot end it there: the shape is not complete"
    if unique is not None:
        repeated = unique.first_repeat(text)
        if repeated is not None:
            return (f"the constrained sampler cannot write it: {json.dumps(repeated)} repeats an earlier key of its "
                    "object or an earlier item of an array declared uniqueItems, or is not (the start of) an item of "
                    "the array its x-member-of names (or of a type of the strings its x-type-of names)")
    return None


UNBOUNDED_REPEAT = re.compile(r"(?<!\\)(?:[*+]|\{\d*,\})")   # *, + or {n,} not escaped


def shape_unbounded_places(shape) -> list[str]:
    """:func:`unbounded_places` of a task shape's JSON schema, or of its regex (an unbounded repeat in it)."""
    if shape.json_schema is not None:
        return unbounded_places(shape.json_schema)
    return ["the regex: an unbounded repeat"] if UNBOUNDED_REPEAT.search(shape.regex) else []


def unbounded_places(schema, path: str = "") -> list[str]:
    """Where a JSON schema lets a text grow without end (what ``genenv check-domain`` notes): a string without
    ``maxLength``, ``enum`` or ``const`` (a ``pattern`` alone bounds it only without ``*``, ``+`` or ``{n,}``), an
    array without ``maxItems`` (or closed ``prefixItems``), an object whose keys are open (``additionalProperties``
    not false: llguidance cannot cap a key's length) or that takes ``patternProperties`` without ``maxProperties``,
    a number without ``minimum`` and ``maximum``, a value of any type. The grammar fixes the form, not the length:
    a text the sampler writes at such a place runs on until the budget makes it close
    (:meth:`TokenConstraint.closing`)."""
    where = path or "the top"
    if schema is True or schema == {}:
        return [f"{where}: any value"]
    if not isinstance(schema, dict) or "enum" in schema or "const" in schema:
        return []
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return [place for i, branch in enumerate(schema[key])
                    for place in unbounded_places(branch, f"{path}/{key}[{i}]")]
    kind = schema.get("type")
    if kind == "string":
        pattern = schema.get("pattern")
        bounded = "maxLength" in schema or (pattern is not None and not UNBOUNDED_REPEAT.search(pattern))
        return [] if bounded else [f"{where}: a string without maxLength"]
    if kind == "array":
        closed = schema.get("items") is False and "prefixItems" in schema
        places = [] if "maxItems" in schema or closed else [f"{where}: an array without maxItems"]
        for i, item in enumerate(schema.get("prefixItems", [])):
            places += unbounded_places(item, f"{path}[{i}]")
        if schema.get("items") not in (None, False):
            places += unbounded_places(schema["items"], f"{path}[]")
        return places
    if kind == "object":
        places = []
        extra = schema.get("additionalProperties", True)
        if extra is not False:
            places.append(f"{where}: an object with open keys (additionalProperties)")
            if isinstance(extra, dict):
                places += unbounded_places(extra, f"{path}/*")
        if schema.get("patternProperties") and "maxProperties" not in schema:
            places.append(f"{where}: patternProperties without maxProperties")
        for name, sub in schema.get("patternProperties", {}).items():
            if UNBOUNDED_REPEAT.search(name):
                places.append(f"{path}/{name}: a key pattern without a length")
            places += unbounded_places(sub, f"{path}/{name}")
        for name, sub in schema.get("properties", {}).items():
            places += unbounded_places(sub, f"{path}/{name}")
        return places
    if kind in ("integer", "number"):
        return [] if "minimum" in schema and "maximum" in schema else [f"{where}: a number without minimum and maximum"]
    if kind in ("boolean", "null"):
        return []
    return [f"{where}: a value of any type"]

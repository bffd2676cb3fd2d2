"""Constrained sampling (issue 57): the simulator writes only text of its domain's declared shape
(:meth:`genenv.domains.base.Domain.task_shape`: a JSON schema or a regex), and its updates score the tokens under the
same constrained distribution.

One maintained library does the grammar work: **llguidance** (a dependency-free abi3 wheel; its numpy path, no
torch.compile). It was chosen over xgrammar by ``benchmarks/constrained_overhead.py`` (at commit 0c7cab3;
docs/constrained.md): both cost well under 1% of a SmolLM2 decoding step per token on this CPU and a few percent
of the tiny model's, and xgrammar declares triton, torch and transformers as requirements where llguidance
declares none.

- :class:`TokenConstraint`: a shape compiled for one tokenizer. ``start(rows)`` gives one matcher per sequence;
  ``allowed(matchers)`` the [B, V] boolean mask of each one's next tokens (a finished or broken matcher allows every
  token: its row's output is no longer read, or it is rejected by the domain as before); ``advance`` moves them on
  by the drawn tokens.
- :meth:`TokenConstraint.replay`: the masks a sampler saw before each token of a stored response, so an update's
  log-probs (``Policy.token_logprobs``) and its KL terms are the constrained distribution's, the same numbers the
  sampler drew from (``tests/test_constrained.py``).
- A ``budget`` (the simulator's ``max_new_tokens``): near its end a sequence writes a short way the grammar lets
  its text close (:meth:`TokenConstraint.closing`), so a text is finished before it is cut off. The grammar
  bounds each value, not their sum; without this a text the schema allows could run past the budget (malformed).

The grammar constrains the *form* only: a task in the shape that the domain rejects (a gold call that fails, an
unreachable goal) is still invalid with its reason.
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

from genenv.config import ConfigError
from genenv.json_unique import START, UniqueStrings, without_unique_items

# JSON as the domains write it (json.dumps: ", " and ": " between items and keys, no other whitespace, non-ASCII
# characters as backslash-u escapes): llguidance's options, so the simulator spends no tokens on layout
JSON_AS_WRITTEN = {"item_separator": ", ", "key_separator": ": ", "whitespace_flexible": False,
                   "json_allow_general_unicode_escapes": True}


def shape_grammar(shape) -> str:
    """llguidance's grammar of a task shape: its JSON schema laid out as :data:`JSON_AS_WRITTEN`, or its regex.
    (``uniqueItems``, which llguidance does not implement, is checked beside it: :mod:`genenv.json_unique`.)"""
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


class Matcher:
    """One sequence's place in the grammar: llguidance's matcher, whether the sequence has ended, (a JSON shape) the
    scan of its strings so far (:class:`genenv.json_unique.UniqueStrings`) and, under a budget, the tokens drawn
    and the same grammar's matcher over the text's bytes (what :meth:`TokenConstraint.closing` searches from)."""

    __slots__ = ("matcher", "done", "scan", "drawn", "written", "bytes")

    def __init__(self, matcher, scan=None, byte_matcher=None):
        self.matcher, self.done, self.scan = matcher, False, scan
        self.drawn, self.written, self.bytes = 0, 0, byte_matcher


# Closing under a budget: the closing text is searched for once this few tokens are left, and written once it
# needs all but CLOSING_MARGIN of them (before that, a token that opens what could not close is refused)
CLOSING_WINDOW = 128
CLOSING_MARGIN = 4
CLOSING_BYTES_A_TOKEN = 6   # the closing search gives up past this many bytes for each token left
CLOSING_BYTE_WINDOW = 256   # under max_chars: searched once this few characters are left
# the bytes the closing search tries first: end an object, an array (inside a string: end the string); then the
# shortest values
OPENING_BYTES = b',{["'     # the quote outside a string: a key (with its value) or a string value
CLOSING_ORDER = b'}]"01' + bytes(range(ord("a"), ord("z") + 1)) + bytes(range(ord("A"), ord("Z") + 1)) + b"_"


def _byte_bits(matcher) -> np.ndarray:
    """The bytes a matcher over :class:`_ByteVocabulary` allows next, one 0/1 per byte (and its EOS, 256)."""
    mask = np.zeros((1, 9), dtype=np.int32)   # the 256 bytes and the byte vocabulary's EOS
    llnp.fill_next_token_bitmask(matcher, mask, 0)
    return np.unpackbits(mask[0].view(np.uint8), bitorder="little")


class TokenConstraint:
    """A domain's task shape compiled for one tokenizer; ``vocab_size`` is the model's logits width."""

    def __init__(self, shape, hf_tokenizer, vocab_size: int, eos_token_id: int, domain_name: str = "domain",
                 budget: int | None = None):
        self._args = (shape, hf_tokenizer, vocab_size, eos_token_id, domain_name, budget)
        self.eos_token_id, self.vocab_size, self.budget = eos_token_id, vocab_size, budget
        self.max_bytes = shape.max_chars if budget is not None else None
        self.tokenizer = llguidance_tokenizer(hf_tokenizer, eos_token_id)
        self.grammar = shape_grammar(shape)
        ok, problem = self.validate()
        if not ok:
            raise ConfigError(f"env.constrained: the task shape domain {domain_name!r} declares does not compile "
                              f"(llguidance): {problem}")
        self._bitmask_words = (self.tokenizer.vocab_size + 31) // 32
        # JSON: no string may repeat its object's earlier key or its unique array's earlier item. Only a token
        # holding a quote can finish a string, so those are the tokens tried against each row's scan.
        try:
            self.unique = UniqueStrings(shape.json_schema) if shape.json_schema is not None else None
        except ValueError as error:
            raise ConfigError(f"env.constrained: the task shape domain {domain_name!r} declares: {error}") from None
        if self.unique is not None or budget is not None:
            self._token_bytes = [self.tokenizer.decode_bytes([i]) for i in range(self.tokenizer.vocab_size)]
            self._longest_token = max(map(len, self._token_bytes))
        if budget is not None:
            # the closing search runs on the grammar compiled for single bytes, and tries only the bytes that are
            # tokens of their own (so a closing text can always be written one token a byte)
            self._byte_tokenizer = byte_tokenizer()
            # the characters a token's bytes take in the domain's text, as max_chars counts them: a JSON domain
            # writes its text with json.dumps, where a non-ASCII character is an escape (up to 3 a byte)
            escape = 3 if shape.json_schema is not None else 1
            self._widths = [len(b) + (escape - 1) * sum(byte >= 0x80 for byte in b) for b in self._token_bytes]
            self._byte_ids: dict[int, int] = {}
            for i, b in enumerate(self._token_bytes):
                if len(b) == 1:
                    self._byte_ids.setdefault(b[0], i)
            order = [b for b in CLOSING_ORDER if b in self._byte_ids]
            order += [b for b in range(256) if b not in order and b in self._byte_ids]
            inside = [b for b in order if b == 0x22] + [b for b in order if chr(b).isalnum() or b == 0x5F]
            inside += [b for b in order if b not in inside]
            self._closing_order = (np.array(order), np.array(inside))   # (outside a string, inside one: the quote,
            # then a letter or digit as the content a string's minLength or pattern asks for)
        if self.unique is not None:
            self._quote_ids = np.array([i for i, b in enumerate(self._token_bytes) if b'"' in b], dtype=np.int64)
            self._all_ids = np.arange(len(self._token_bytes), dtype=np.int64)
            # inside a member-of string: a token with neither a quote nor a backslash is allowed exactly when the
            # string so far and its bytes start a member's spelling, so those are looked up by their bytes
            self._escape_ids = np.array([i for i, b in enumerate(self._token_bytes) if b'"' in b or b"\\" in b],
                                        dtype=np.int64)
            self._plain_ids: dict[bytes, list[int]] = {}
            for i, b in enumerate(self._token_bytes):
                if b and b'"' not in b and b"\\" not in b:
                    self._plain_ids.setdefault(b, []).append(i)

    def __getstate__(self) -> dict:
        """Pickled as what built it (llguidance's objects do not pickle): a Ray worker's copy compiles its own."""
        return {"args": self._args}

    def __setstate__(self, state: dict) -> None:
        self.__init__(*state["args"])

    def validate(self) -> tuple[bool, str]:
        is_error, messages = llguidance.LLMatcher.validate_grammar_with_warnings(self.grammar, self.tokenizer)
        return (not is_error), "; ".join(messages)

    def start(self, rows: int) -> list:
        """One fresh matcher per sequence (:class:`Matcher`)."""
        scan = START if self.unique is not None else None
        return [Matcher(llguidance.LLMatcher(self.tokenizer, self.grammar, log_level=0), scan,
                        None if self.budget is None else llguidance.LLMatcher(self._byte_tokenizer, self.grammar,
                                                                              log_level=0))
                for _ in range(rows)]

    def bitmask(self, matchers: list) -> np.ndarray:
        """[B, W] int32: each sequence's next allowed tokens as llguidance's bitmask. A text that is complete (the
        grammar allows nothing more) allows only the EOS token; a sequence that has drawn its EOS token, or whose
        matcher failed or allows nothing, allows every token (its output is no longer read, or the domain rejects
        it as before). A JSON shape's tokens that would finish a repeated key or unique item, or take a member-of
        string off every member, are not allowed (:meth:`_refuse_by_scan`), unless the grammar allows nothing else
        there (a string that can only end as a repeat or a stray: it is written, well-formed, and the domain
        rejects it with its reason)."""
        bitmask = np.zeros((len(matchers), self._bitmask_words), dtype=np.int32)
        eos_word, eos_bit = divmod(self.eos_token_id, 32)
        for row, m in enumerate(matchers):
            if m.done or m.matcher.is_error():
                bitmask[row] = -1
            elif m.matcher.is_stopped():
                bitmask[row, eos_word] = np.array([1 << eos_bit], dtype=np.uint32).view(np.int32)[0]
            else:
                llnp.fill_next_token_bitmask(m.matcher, bitmask, row)
                if self.unique is not None and self.unique.watching(m.scan):
                    grammar_row = bitmask[row].copy()
                    self._refuse_by_scan(bitmask, row, m.scan)
                    if not bitmask[row].any():   # only a repeat finishes the string: the domain rejects it
                        bitmask[row] = grammar_row
                if self.budget is not None:
                    self._close(bitmask, row, m)
                if not bitmask[row].any():
                    bitmask[row] = -1
        return bitmask

    def closing(self, m: Matcher) -> bytes | None:
        """The text that closes ``m``'s, a short way (:meth:`_closing_from`), or None when none does within
        :data:`CLOSING_BYTES_A_TOKEN` bytes a token left. ``b""``: the text may end here. A pure function of the text
        so far. (Past ``max_chars`` it still closes the text: too long, but well-formed.)"""
        if m.bytes is None or m.bytes.is_error():
            return None
        return self._closing_from(m.bytes.deep_copy(), m.scan, self._limit(m))

    def _limit(self, m: Matcher) -> int:
        """The longest closing text ``m`` could still write in the tokens left, in bytes."""
        return (self.budget - m.drawn) * CLOSING_BYTES_A_TOKEN

    def _tokens(self, text: bytes) -> list[int]:
        """``text`` in tokens, longest first (llguidance's greedy tokenizer; one token a byte where the bytes are
        not UTF-8): each a token that starts what is left, so a sampler that takes them writes ``text``."""
        try:
            return self.tokenizer.greedy_tokenize(text.decode("utf-8"))
        except UnicodeDecodeError:
            return [self._byte_ids[byte] for byte in text]

    def _closing_from(self, matcher, scan, limit: int) -> bytes | None:
        """What closes the text of byte ``matcher`` (consumed as it goes) and ``scan``: at each byte the first of
        :data:`CLOSING_ORDER` that the grammar and the scan allow (then any other byte that is a token of its own;
        inside a string, or without a scan, the quote first); None past ``limit`` bytes, or where no byte is
        allowed."""
        out = bytearray()
        while not (matcher.is_stopped() or matcher.is_accepting()):
            if len(out) >= limit:
                return None
            forced = matcher.compute_ff_bytes()   # a key's name, an enum's tail, a separator: no choice to make
            if forced:
                for byte in forced:
                    matcher.consume_token(byte)
                out += forced
                if scan is not None:
                    scan = self.unique.feed(scan, forced)[0]
                continue
            byte = self._closing_byte(_byte_bits(matcher), scan)
            if byte is None:
                return None
            matcher.consume_token(byte)
            out.append(byte)
            if scan is not None:
                scan = self.unique.feed(scan, bytes([byte]))[0]
        return bytes(out)

    def _closing_byte(self, bits: np.ndarray, scan) -> int | None:
        """The next byte of a closing text, of those ``bits`` (the byte grammar's mask, :func:`_byte_bits`) allow:
        inside a member-of string the next byte of the shortest member it can still spell (the quote once it spells
        one whole), else the first of the closing order the scan accepts (none accepted: the first the grammar
        allows, as the sampler keeps the grammar's mask where the scan leaves nothing)."""
        spellings = None if scan is None else self.unique.spellings_left(scan)
        if spellings:
            rest = min(spellings, key=lambda r: (len(r), r))
            byte = rest[0] if rest else 0x22
            if bits[byte]:
                return byte
        order = self._closing_order[scan is None or scan[1] is not None]
        grammar = order[bits[order].astype(bool)].tolist()
        if scan is None or spellings == []:
            return grammar[0] if grammar else None
        return next((byte for byte in grammar if self.unique.feed(scan, bytes([byte]))[1] is None),
                    grammar[0] if grammar else None)

    def _growths(self, m: Matcher, closing: bytes, need: int) -> dict[int, tuple[int, int]]:
        """For each byte that opens something (``,`` ``{`` ``[`` and, outside a string, ``"``: an item or a key with
        its value, an object with its required keys) the grammar allows now: how much longer the closing text gets
        after it, in tokens and in bytes (as much as is left, where none closes it within the tokens left)."""
        base = m.bytes.deep_copy()
        bits = _byte_bits(base)
        limit = self._limit(m)
        growths = {}
        inside_string = m.scan is not None and m.scan[1] is not None
        for byte in OPENING_BYTES:
            if not bits[byte] or (byte == 0x22 and inside_string):   # there the quote ends the string
                continue
            matcher, scan = base.deep_copy(), m.scan
            matcher.consume_token(byte)
            if scan is not None:
                scan = self.unique.feed(scan, bytes([byte]))[0]
            after = self._closing_from(matcher, scan, limit)
            growths[byte] = ((self.budget - m.drawn, limit) if after is None else
                             (1 + len(self._tokens(after)) - need, 1 + len(after) - len(closing)))
        return growths

    def _close(self, bitmask: np.ndarray, row: int, m: Matcher) -> None:
        """Under a budget, near its end (:data:`CLOSING_WINDOW` tokens, or :data:`CLOSING_BYTE_WINDOW` characters of
        ``max_chars``): once the closing text's tokens leave fewer than :data:`CLOSING_MARGIN` of the tokens left
        spare, or its bytes fewer than as many characters of ``max_chars`` (a token can add a byte to it: the quote
        of a string it opens), only its first token stays allowed (the EOS token once the text may end). Before that,
        a token that opens something whose closing would not fit (:meth:`_growths`) is refused, and, while fewer
        characters are spare than the longest token has, one longer than those."""
        left = self.budget - m.drawn
        room = None if self.max_bytes is None else self.max_bytes - m.written
        if left > CLOSING_WINDOW and (room is None or room > CLOSING_BYTE_WINDOW):
            return
        closing = self.closing(m)
        if closing is None:
            return
        tokens = self._tokens(closing)
        spare_tokens = left - len(tokens) - CLOSING_MARGIN
        spare_bytes = None if room is None else room - len(closing) - CLOSING_MARGIN   # a quote opened: one more
        words = bitmask[row].view(np.uint32)
        token = tokens[0] if tokens else self.eos_token_id
        first = self._words([token] if self._bits(words, np.array([token], dtype=np.int64))[0] else [])
        if spare_tokens <= 0 or (spare_bytes is not None and spare_bytes <= 0):
            if first.any():      # else (a first token the grammar does not allow here) the grammar's mask stays
                words[:] = first
            return
        keep = words.copy()
        if m.scan is not None:   # JSON: what a token can open
            for byte, (more_tokens, more_bytes) in self._growths(m, closing, len(tokens)).items():
                if more_tokens >= spare_tokens or (spare_bytes is not None and more_bytes >= spare_bytes):
                    keep &= ~self._opening(byte, inside_string=m.scan[1] is not None)
        if spare_bytes is not None and spare_bytes < self._longest_token:
            keep &= self._no_longer_than(spare_bytes)
        keep |= first
        if keep.any():
            words[:] = keep

    def _opening(self, byte: int, inside_string: bool) -> np.ndarray:
        """The bitmask words (uint32) of the tokens that would write ``byte`` outside a string: inside one, those
        where it follows a quote; outside, every token holding it."""
        cache = self.__dict__.setdefault("_openers", {})
        if (byte, inside_string) not in cache:
            mark = bytes([byte])
            cache[(byte, inside_string)] = self._words([i for i, b in enumerate(self._token_bytes) if mark in b and (
                not inside_string or (b'"' in b and b.rindex(mark) > b.index(b'"')))])
        return cache[(byte, inside_string)]

    def _no_longer_than(self, size: int) -> np.ndarray:
        """The bitmask words (uint32) of the tokens of at most ``size`` bytes (the EOS token among them)."""
        cache = self.__dict__.setdefault("_short", {})
        if size not in cache:
            cache[size] = self._words([i for i, b in enumerate(self._token_bytes) if len(b) <= size])
        return cache[size]

    def _refuse_by_scan(self, bitmask: np.ndarray, row: int, scan) -> None:
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
            tried = self._escape_ids[self._bits(words, self._escape_ids)]
            on += [t for t in tried.tolist() if self.unique.feed(scan, self._token_bytes[t])[1] is None]
            words &= self._words(on)
            return
        ids = self._all_ids if self.unique.inside_member(scan) else self._quote_ids
        for token in ids[self._bits(words, ids)].tolist():
            if self.unique.feed(scan, self._token_bytes[token])[1] is not None:
                words[token >> 5] &= np.uint32(~(1 << (token & 31)) & 0xFFFFFFFF)

    def _words(self, ids) -> np.ndarray:
        """The bitmask words (uint32) that allow exactly the tokens ``ids``."""
        ids = np.asarray(ids, dtype=np.int64)
        words = np.zeros(self._bitmask_words, dtype=np.uint32)
        np.bitwise_or.at(words, ids >> 5, np.left_shift(np.uint32(1), (ids & 31).astype(np.uint32)))
        return words

    @staticmethod
    def _bits(words: np.ndarray, ids: np.ndarray) -> np.ndarray:
        """Which of ``ids`` a bitmask row (as uint32 words) allows."""
        return ((words[ids >> 5] >> (ids & 31).astype(np.uint32)) & 1).astype(bool)

    def allowed(self, matchers: list) -> torch.Tensor:
        """[B, vocab_size] boolean: the tokens each sequence may take next (:meth:`bitmask`)."""
        return unpack_bitmask(self.bitmask(matchers), self.vocab_size, fill=True)

    def advance(self, matchers: list, tokens) -> None:
        """Each sequence takes its drawn token (the EOS token ends it)."""
        for m, token in zip(matchers, tokens):
            if m.done:
                continue
            m.drawn += 1
            if int(token) == self.eos_token_id:
                m.done = True
            elif not (m.matcher.is_stopped() or m.matcher.is_error()):
                m.matcher.consume_token(int(token))
                if m.scan is not None:
                    m.scan = self.unique.feed(m.scan, self._token_bytes[int(token)])[0]
                if m.bytes is not None and not m.bytes.is_error():
                    for byte in self._token_bytes[int(token)]:
                        m.bytes.consume_token(byte)
                    m.written += self._widths[int(token)]

    def replay(self, tokens: list[int]) -> np.ndarray:
        """[len(tokens), W] int32 bitmasks: what the sampler saw before each token of a stored response."""
        matcher = self.start(1)
        masks = []
        for token in tokens:
            masks.append(self.bitmask(matcher)[0])
            self.advance(matcher, [token])
        return np.stack(masks) if masks else np.zeros((0, self._bitmask_words), dtype=np.int32)

    def response_masks(self, response_ids: torch.Tensor, response_mask: torch.Tensor) -> torch.Tensor:
        """[B, R, vocab_size] boolean masks of a padded batch of responses (padding positions: every token
        allowed). A response's masks are replayed once and kept (the last ``REPLAYS_KEPT``)."""
        batch, width = response_ids.shape
        bitmask = np.full((batch, width, self._bitmask_words), -1, dtype=np.int32)
        lengths = response_mask.sum(-1).long().tolist()
        for row, length in enumerate(lengths):
            if length:
                bitmask[row, :length] = self._cached_replay(tuple(response_ids[row, :length].tolist()))
        return unpack_bitmask(bitmask.reshape(batch * width, -1), self.vocab_size, fill=True).view(batch, width, -1)

    REPLAYS_KEPT = 1024

    def _cached_replay(self, tokens: tuple) -> np.ndarray:
        cache = self.__dict__.setdefault("_replays", {})
        if tokens not in cache:
            if len(cache) >= self.REPLAYS_KEPT:
                cache.pop(next(iter(cache)))
            cache[tokens] = self.replay(list(tokens))
        return cache[tokens]


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
    JSON layout is :data:`JSON_AS_WRITTEN`, keys in the schema's order); else where the grammar refuses it. What
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
    data = text.encode("utf-8")
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

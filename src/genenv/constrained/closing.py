"""Closing under the budget: near the end of the simulator's ``max_new_tokens`` (and of a shape's ``max_chars``) a
constrained text writes a short way its grammar lets it close, so it is finished before it is cut off. The grammar
bounds each value, not their sum; without this a text the schema allows could run past the budget, malformed.

:class:`Closing` searches that text on the grammar compiled for single bytes (:func:`genenv.constrained.grammar.
byte_bits`: forced bytes taken whole, inside a member-of string the shortest member's spelling, elsewhere the first
allowed byte of :data:`CLOSING_ORDER`) and narrows a row's mask: a token that opens what could not close in the room
left is refused, and once the closing needs all but :data:`CLOSING_MARGIN` of the tokens left only its first token
stays allowed. A pure function of the text so far, so a replay gives the sampler's masks.
"""

from __future__ import annotations

import numpy as np

from genenv.constrained.bitmask import bits_of, words_of
from genenv.constrained.grammar import byte_bits, byte_tokenizer

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


class Closing:
    """What closes a sequence's text under ``budget`` tokens (and ``max_bytes`` characters), for one tokenizer
    (``token_bytes``: each id's bytes) and, for a JSON shape, its strings' scan (``unique``)."""

    def __init__(self, tokenizer, token_bytes: list[bytes], eos_token_id: int, budget: int, max_bytes: int | None,
                 unique, json_text: bool, width: int):
        self.tokenizer, self.eos_token_id, self.budget, self.max_bytes = tokenizer, eos_token_id, budget, max_bytes
        self.unique, self._token_bytes, self._bitmask_words = unique, token_bytes, width
        self._longest_token = max(map(len, token_bytes))
        # the closing search runs on the grammar compiled for single bytes, and tries only the bytes that are
        # tokens of their own (so a closing text can always be written one token a byte)
        self.byte_tokenizer = byte_tokenizer()
        # the characters a token's bytes take in the domain's text, as max_chars counts them: a JSON domain
        # writes its text with json.dumps, where a non-ASCII character is an escape (up to 3 a byte)
        escape = 3 if json_text else 1
        self.widths = [len(b) + (escape - 1) * sum(byte >= 0x80 for byte in b) for b in token_bytes]
        self._byte_ids: dict[int, int] = {}
        for i, b in enumerate(token_bytes):
            if len(b) == 1:
                self._byte_ids.setdefault(b[0], i)
        order = [b for b in CLOSING_ORDER if b in self._byte_ids]
        order += [b for b in range(256) if b not in order and b in self._byte_ids]
        inside = [b for b in order if b == 0x22] + [b for b in order if chr(b).isalnum() or b == 0x5F]
        inside += [b for b in order if b not in inside]
        self._closing_order = (np.array(order), np.array(inside))   # (outside a string, inside one: the quote,
        # then a letter or digit as the content a string's minLength or pattern asks for)

    def closing(self, m) -> bytes | None:
        """The text that closes ``m``'s, a short way (:meth:`_closing_from`), or None when none does within
        :data:`CLOSING_BYTES_A_TOKEN` bytes a token left. ``b""``: the text may end here. A pure function of the text
        so far. (Past ``max_chars`` it still closes the text: too long, but well-formed.)"""
        if m.bytes is None or m.bytes.is_error():
            return None
        return self._closing_from(m.bytes.deep_copy(), m.scan, self._limit(m))

    def _limit(self, m) -> int:
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
            byte = self._closing_byte(byte_bits(matcher), scan)
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

    def _growths(self, m, closing: bytes, need: int) -> dict[int, tuple[int, int]]:
        """For each byte that opens something (``,`` ``{`` ``[`` and, outside a string, ``"``: an item or a key with
        its value, an object with its required keys) the grammar allows now: how much longer the closing text gets
        after it, in tokens and in bytes (as much as is left, where none closes it within the tokens left)."""
        base = m.bytes.deep_copy()
        bits = byte_bits(base)
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

    def close(self, bitmask: np.ndarray, row: int, m) -> None:
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
        first = self._words_of([token] if bits_of(words, np.array([token], dtype=np.int64))[0] else [])
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
            cache[(byte, inside_string)] = self._words_of([i for i, b in enumerate(self._token_bytes) if mark in b and (
                not inside_string or (b'"' in b and b.rindex(mark) > b.index(b'"')))])
        return cache[(byte, inside_string)]

    def _no_longer_than(self, size: int) -> np.ndarray:
        """The bitmask words (uint32) of the tokens of at most ``size`` bytes (the EOS token among them)."""
        cache = self.__dict__.setdefault("_short", {})
        if size not in cache:
            cache[size] = self._words_of([i for i, b in enumerate(self._token_bytes) if len(b) <= size])
        return cache[size]

    def _words_of(self, ids) -> np.ndarray:
        return words_of(ids, self._bitmask_words)

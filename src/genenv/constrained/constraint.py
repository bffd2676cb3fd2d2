"""The simulator's token masks: a domain's task shape compiled for one tokenizer (:class:`TokenConstraint`), its
three mechanisms each a module of this package, composed here row by row:

1. the grammar (:mod:`genenv.constrained.grammar`, llguidance): the tokens the shape allows next;
2. the references and repeats scan (:mod:`genenv.constrained.references`): of those, the ones that would repeat an
   earlier key or unique item, or leave a member-of string off every member, are refused;
3. the closing under the budget (:mod:`genenv.constrained.closing`): near the end of ``max_new_tokens`` only a
   short way to close the text stays allowed.

``start(rows)`` gives one :class:`Matcher` per sequence, ``allowed(matchers)`` the [B, V] boolean mask of each
one's next tokens (a finished or broken matcher allows every token: its output is no longer read, or the domain
rejects it as before), ``advance`` moves them on by the drawn tokens, and :meth:`TokenConstraint.replay` gives the
masks a sampler saw before each token of a stored response, so an update's log-probs and KL terms are the
constrained distribution's, the numbers the sampler drew from.
"""

from __future__ import annotations

import llguidance
import llguidance.numpy as llnp
import numpy as np
import torch

from genenv.config import ConfigError
from genenv.constrained.closing import Closing
from genenv.constrained.grammar import byte_tokenizer, llguidance_tokenizer, shape_grammar, unpack_bitmask
from genenv.constrained.references import START, ScanRefusal, UniqueStrings


class Matcher:
    """One sequence's place in the grammar: llguidance's matcher, whether the sequence has ended, (a JSON shape) the
    scan of its strings so far (:class:`~genenv.constrained.references.UniqueStrings`) and, under a budget, the
    tokens drawn and the same grammar's matcher over the text's bytes (what
    :class:`~genenv.constrained.closing.Closing` searches from)."""

    __slots__ = ("matcher", "done", "scan", "drawn", "written", "bytes")

    def __init__(self, matcher, scan=None, byte_matcher=None):
        self.matcher, self.done, self.scan = matcher, False, scan
        self.drawn, self.written, self.bytes = 0, 0, byte_matcher


class TokenConstraint:
    """A domain's task shape compiled for one tokenizer; ``vocab_size`` is the model's logits width; ``budget`` (the
    simulator's ``max_new_tokens``): a text closes before it runs out (:class:`~genenv.constrained.closing.Closing`,
    and within the shape's ``max_chars``)."""

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
        # JSON: no string may repeat its object's earlier key or its unique array's earlier item
        try:
            self.unique = UniqueStrings(shape.json_schema) if shape.json_schema is not None else None
        except ValueError as error:
            raise ConfigError(f"env.constrained: the task shape domain {domain_name!r} declares: {error}") from None
        self.refusal = self.closer = None
        if self.unique is not None or budget is not None:
            self._token_bytes = [self.tokenizer.decode_bytes([i]) for i in range(self.tokenizer.vocab_size)]
        if self.unique is not None:
            self.refusal = ScanRefusal(self.unique, self._token_bytes, self._bitmask_words)
        if budget is not None:
            self.closer = Closing(self.tokenizer, self._token_bytes, eos_token_id, budget, self.max_bytes, self.unique,
                                  shape.json_schema is not None, self._bitmask_words)

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
                        None if self.budget is None else llguidance.LLMatcher(byte_tokenizer(), self.grammar,
                                                                              log_level=0))
                for _ in range(rows)]

    def bitmask(self, matchers: list) -> np.ndarray:
        """[B, W] int32: each sequence's next allowed tokens as llguidance's bitmask. A text that is complete (the
        grammar allows nothing more) allows only the EOS token; a sequence that has drawn its EOS token, or whose
        matcher failed or allows nothing, allows every token (its output is no longer read, or the domain rejects
        it as before). A JSON shape's tokens that would finish a repeated key or unique item, or take a member-of
        string off every member, are not allowed (:class:`~genenv.constrained.references.ScanRefusal`), unless the
        grammar allows nothing else there (a string that can only end as a repeat or a stray: it is written,
        well-formed, and the domain rejects it with its reason); under a budget the closing narrows the rest."""
        bitmask = np.zeros((len(matchers), self._bitmask_words), dtype=np.int32)
        eos_word, eos_bit = divmod(self.eos_token_id, 32)
        for row, m in enumerate(matchers):
            if m.done or m.matcher.is_error():
                bitmask[row] = -1
            elif m.matcher.is_stopped():
                bitmask[row, eos_word] = np.array([1 << eos_bit], dtype=np.uint32).view(np.int32)[0]
            else:
                llnp.fill_next_token_bitmask(m.matcher, bitmask, row)
                if self.refusal is not None and self.unique.watching(m.scan):
                    grammar_row = bitmask[row].copy()
                    self.refusal.refuse(bitmask, row, m.scan)
                    if not bitmask[row].any():   # only a repeat finishes the string: the domain rejects it
                        bitmask[row] = grammar_row
                if self.closer is not None:
                    self.closer.close(bitmask, row, m)
                if not bitmask[row].any():
                    bitmask[row] = -1
        return bitmask

    def closing(self, m: Matcher) -> bytes | None:
        """The text that closes ``m``'s under the budget (:meth:`genenv.constrained.closing.Closing.closing`)."""
        return None if self.closer is None else self.closer.closing(m)

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
                    m.written += self.closer.widths[int(token)]

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

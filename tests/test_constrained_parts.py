"""The constrained package's three mechanisms, each on its own (issue 76, item 3): the bitmask words by hand, the
references scan refusing tokens of a toy vocabulary, the closing search on a schema, and the constraint composing
them as the sum of its parts."""

import numpy as np
import pytest

from genenv.constrained.bitmask import bits_of, words_of
from genenv.constrained.references import START, ScanRefusal, UniqueStrings
from genenv.domains.base import TaskShape

KEYS = {"type": "object", "additionalProperties": False, "maxProperties": 3,
        "patternProperties": {"^[ab]$": {"type": "integer", "minimum": 0, "maximum": 9}}}


def test_bitmask_words_by_hand():
    """Token t is bit t % 32 of word t // 32."""
    words = words_of([0, 3, 33, 63], 2)
    assert words.tolist() == [0b1001, (1 << 1) | (1 << 31)]
    assert bits_of(words, np.array([0, 1, 3, 32, 33, 63])).tolist() == [True, False, True, False, True, True]
    assert words_of([], 3).tolist() == [0, 0, 0]


def test_the_scan_refuses_the_token_that_would_repeat_a_key_and_nothing_else():
    """After '{"a": 1, ' the key "a" may not come again: of a toy vocabulary, the tokens '"a"' and 'a"' (inside the
    string just opened) are refused, '"b"' stays, and a token without a quote is never looked at."""
    unique = UniqueStrings(KEYS)
    tokens = [b'"a"', b'"b"', b"1", b", ", b'a"', b'b"', b'"']
    refusal = ScanRefusal(unique, tokens, 1)
    scan = unique.feed(START, b'{"a": 1, ')[0]
    assert unique.watching(scan)
    row = np.full((1, 1), -1, dtype=np.int32)
    refusal.refuse(row, 0, scan)
    allowed = bits_of(row[0].view(np.uint32), np.arange(len(tokens)))
    assert allowed.tolist() == [False, True, True, True, True, True, True]
    inside = unique.feed(scan, b'"')[0]   # the quote opened: 'a"' would end the string as "a", a repeat
    row = np.full((1, 1), -1, dtype=np.int32)
    refusal.refuse(row, 0, inside)
    assert bits_of(row[0].view(np.uint32), np.arange(len(tokens))).tolist() == [True, True, True, True, False,
                                                                                  True, True]


@pytest.fixture(scope="module")
def tiny_json():
    from genenv.models.tiny import build_tiny_tokenizer
    return build_tiny_tokenizer('{}":, 0123456789ab')


def test_the_closing_alone_closes_a_text_a_short_way(tiny_json):
    """:class:`Closing` built on its own gives the closing text of a JSON prefix: '{"a": 1' closes with '}' (the
    shortest), and an opened key string is finished, given its value and closed; what TokenConstraint asks of it."""
    from genenv.constrained import TokenConstraint
    from genenv.constrained.closing import Closing
    shape = TaskShape(json_schema=KEYS)
    constraint = TokenConstraint(shape, tiny_json, len(tiny_json), tiny_json.eos_token_id, "test", budget=64)
    closer = Closing(constraint.tokenizer, constraint._token_bytes, tiny_json.eos_token_id, 64, None,
                     UniqueStrings(KEYS), True, constraint._bitmask_words)

    def closing_after(text):
        matchers = constraint.start(1)
        for token in tiny_json.encode(text, add_special_tokens=False):   # (one token a sequence a step)
            constraint.advance(matchers, [token])
        return closer.closing(matchers[0]), constraint.closing(matchers[0])
    assert closing_after('{"a": 1') == (b"}", b"}")
    alone, composed = closing_after('{"a": 1, "b')
    assert alone == composed == b'": 0}'   # the key string ends, the shortest value, the object closes
    assert closing_after('{"a": 1, "b": 2}') == (b"", b"")


def test_the_constraint_is_its_parts(tiny_json):
    """TokenConstraint's mask is the grammar's, less what the scan refuses, then narrowed by the closing: without a
    budget it has no closing, a regex shape has no scan."""
    from genenv.constrained import TokenConstraint
    json_free = TokenConstraint(TaskShape(json_schema=KEYS), tiny_json, len(tiny_json), tiny_json.eos_token_id)
    assert json_free.refusal is not None and json_free.closer is None and json_free.closing(None) is None
    regex = TokenConstraint(TaskShape(regex="[ab]{1,3}"), tiny_json, len(tiny_json), tiny_json.eos_token_id,
                            budget=8)
    assert regex.refusal is None and regex.closer is not None

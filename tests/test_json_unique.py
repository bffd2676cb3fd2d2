"""uniqueItems and unique keys under constrained sampling (genenv.constrained.references): the schema paths and the
scanner by hand, a sampler that never repeats where the schema says unique (and does without it), the update's
log-probs equal to the sampler's with those masks, and check-domain's view."""

import json

import pytest
import torch

from genenv.config import TinyModelConfig
from genenv.constrained import TokenConstraint, grammar_problem
from genenv.constrained.references import (
    ANY_KEY,
    ITEM,
    KEY,
    MEMBER_OF,
    MEMBER_OF_SIBLING,
    START,
    TYPE_OF,
    Reference,
    UniqueStrings,
    member_paths,
    unique_array_paths,
    without_unique_items,
)
from genenv.domains.base import TaskShape

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["a"], "properties": {
    "a": {"type": "array", "items": {"type": "string", "pattern": "^[xy]1?$"}, "minItems": 2, "maxItems": 3,
          "uniqueItems": True},
    "b": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 3},
    "m": {"type": "object", "maxProperties": 3, "additionalProperties": False,
          "patternProperties": {"^[xyz]$": {"type": "array", "items": {"enum": ["x", "y"]}, "maxItems": 2,
                                            "uniqueItems": True}}}}}


def test_unique_paths_and_the_schema_llguidance_compiles_by_hand():
    assert unique_array_paths(SCHEMA) == {("a",), ("m", ANY_KEY)}
    assert unique_array_paths({"anyOf": [{"type": "array", "uniqueItems": True}], "items": {
        "type": "array", "uniqueItems": True}}) == {(), (ITEM,)}
    stripped = without_unique_items(SCHEMA)
    assert "uniqueItems" not in stripped["properties"]["a"]
    assert "uniqueItems" not in stripped["properties"]["m"]["patternProperties"]["^[xyz]$"]
    named = {"type": "object", "properties": {"uniqueItems": {"type": "string"}}}
    assert without_unique_items(named) == named   # a property of that name stays
    assert "uniqueItems" in SCHEMA["properties"]["a"]   # not changed in place


def test_the_scanner_finds_repeated_keys_and_unique_items_only():
    unique = UniqueStrings(SCHEMA)
    assert unique.first_repeat('{"a": ["x", "y"], "b": ["x", "x"]}') is None        # b is not declared unique
    assert unique.first_repeat('{"a": ["x", "y", "x"]}') == "x"
    assert unique.first_repeat('{"a": ["x"], "m": {"x": ["y"], "y": ["y"]}}') is None   # each array its own
    assert unique.first_repeat('{"a": ["x"], "m": {"x": ["y", "y"]}}') == "y"
    assert unique.first_repeat('{"a": ["x"], "m": {"x": ["y"], "x": []}}') == "x"      # a key twice
    assert unique.first_repeat('{"a": ["x"], "a": ["y"]}') == "a"
    assert unique.first_repeat('{"a": ["\\u0078", "x"]}') == "x"                       # escapes decoded
    assert unique.first_repeat('{"a": ["x\\"", "x"]}') is None                          # an escaped quote
    assert unique.first_repeat('{"a": ["x\\"", "x\\""]}') == 'x"'
    assert unique.first_repeat('{"m": {"x": [], "y": ["x"]}, "a": ["y", "x"]}') is None  # values are not keys
    # a state is a value: trying a token on it changes nothing; one token can finish a string and open the next
    state, repeated = unique.feed(START, b'{"a": ["x')
    assert unique.watching(state) and repeated is None
    assert unique.feed(state, b'", "x')[1] is None and unique.feed(state, b'", "x"')[1] == "x"
    assert unique.feed(state, b'"')[0] != state and unique.feed(state, b'"')[1] is None
    assert not unique.watching(unique.feed(START, b'{"b": ["x", ')[0])


@pytest.fixture(scope="module")
def sampler():
    from genenv.models.tiny import build_tiny_policy
    alphabet = sorted(set('{}[]":, abmxyz1'))
    policy = build_tiny_policy(TinyModelConfig(hidden_size=16, intermediate_size=32, num_layers=1, num_heads=2,
                                               max_positions=96), alphabet, seed=3)
    vocab = int(policy.model.get_output_embeddings().weight.shape[0])
    def constraint(schema):
        return TokenConstraint(TaskShape(json_schema=schema), policy.tokenizer, vocab, policy.eos_token_id, "test")
    return policy, constraint


def _written(policy, constraint, n=48):
    return policy.generate(["ab"], n=n, max_new_tokens=80, temperature=1.0, seed=7, constraint=constraint)[0]


def test_a_constrained_sampler_repeats_nothing_the_schema_declares_unique(sampler):
    """Where a repeated string could still go on (a's pattern: "x" can become "x1"), the closing quote that would
    repeat it is refused; where it cannot ("x1", m's enum items), the repeat is written, well-formed, for the
    domain to reject. Nothing written is malformed."""
    import json
    policy, constraint = sampler
    unique = UniqueStrings(SCHEMA)
    with_it = [g for g in _written(policy, constraint(SCHEMA)) if g.finished]
    without = [g for g in _written(policy, constraint(without_unique_items(SCHEMA))) if g.finished]
    assert len(with_it) > 30 and len(without) > 30
    worlds = [json.loads(g.text) for g in with_it]   # every one well-formed
    def avoidable(world):   # "x" or "y" twice in a: the quote was refused, "x1" was open
        return sum(world["a"].count(v) > 1 for v in ("x", "y"))
    assert sum(avoidable(w) for w in worlds) == 0
    assert sum(avoidable(json.loads(g.text)) for g in without) >= 5
    repeats = sum(unique.first_repeat(g.text) is not None for g in with_it)
    assert repeats < sum(unique.first_repeat(g.text) is not None for g in without)
    # b, which is not declared unique, still repeats under the constraint
    assert any(len(set(w.get("b", []))) < len(w.get("b", [])) for w in worlds)


def _allowed_after(policy, shape, text: str) -> set[str]:
    """The characters ``shape`` allows after ``text`` (each of whose own characters it must allow)."""
    matchers = shape.start(1)
    for token in policy.tokenizer.encode(text, add_special_tokens=False):
        assert shape.allowed(matchers)[0, token], text
        shape.advance(matchers, [token])
    return {policy.tokenizer.decode([t]) for t in shape.allowed(matchers)[0].nonzero().flatten().tolist()}


def test_the_masks_by_hand(sampler):
    policy, constraint = sampler
    shape = constraint(SCHEMA)
    def allowed_after(text):
        return _allowed_after(policy, shape, text)
    assert allowed_after('{"a": ["x') == {'"', "1"}
    assert allowed_after('{"a": ["x", "x') == {"1"}                  # the quote would repeat "x"
    assert allowed_after('{"a": ["x", "x1", "x') == {"1"}
    assert allowed_after('{"a": ["x", "x1", "x1') == {'"'}           # only a repeat ends it: written
    assert allowed_after('{"a": ["x", "y"], "m": {"x": ["y", "y') == {'"'}   # an enum, the same
    assert allowed_after('{"a": ["x", "y"], "m": {"x": [], "y": [], "x') == {'"'}   # a one-letter key


def _update_logprobs(policy, constraint, gens) -> torch.Tensor:
    """The log-probs the update computes for ``gens`` under ``constraint`` (its masks replayed)."""
    batch = policy.build_batch([g.prompt_ids for g in gens], [g.token_ids for g in gens])
    with torch.no_grad():
        return policy.token_logprobs(batch, constraint=constraint)[0]


def test_the_updates_log_probs_are_the_samplers_with_the_repeat_masks(sampler):
    policy, constraint = sampler
    unique_constraint = constraint(SCHEMA)
    gens = _written(policy, unique_constraint, n=16)
    logp = _update_logprobs(policy, unique_constraint, gens)
    grammar_only = _update_logprobs(policy, constraint(without_unique_items(SCHEMA)), gens)
    for row, g in enumerate(gens):
        assert logp[row, :len(g.token_ids)].tolist() == pytest.approx(g.logprobs, abs=1e-5)
    assert (logp > grammar_only + 1e-4).any()   # the repeat masks took part: fewer tokens, more mass each


def test_check_domain_names_a_repeat_the_sampler_cannot_write():
    shape = TaskShape(json_schema=SCHEMA)
    assert grammar_problem(shape, '{"a": ["x", "y"], "b": ["x", "x"]}') is None
    assert '"x" repeats an earlier' in grammar_problem(shape, '{"a": ["x", "x"]}')
    from genenv.domain_check import shape_problem
    assert "non-unique" in shape_problem(shape, '{"a": ["x", "x"]}')   # jsonschema's own uniqueItems first


# ======================================================================== x-member-of: one of the earlier items

MEMBER = {"type": "object", "additionalProperties": False, "required": ["b", "m"], "properties": {
    "b": {"type": "array", "items": {"type": "string", "pattern": "^[xyz]1?$"}, "minItems": 1, "maxItems": 2,
          "uniqueItems": True},
    "m": {"type": "object", "maxProperties": 2, "additionalProperties": False,
          "patternProperties": {"^[xyz]$": {"type": "string", "pattern": "^[xyz]1?$", MEMBER_OF: ["b"]}}}}}


def test_member_paths_and_the_scanner_by_hand():
    assert member_paths(MEMBER) == {("m", ANY_KEY): Reference(("b", ITEM), False)}
    assert MEMBER_OF not in without_unique_items(MEMBER)["properties"]["m"]["patternProperties"]["^[xyz]$"]
    scan = UniqueStrings(MEMBER)
    assert scan.first_repeat('{"b": ["x", "y1"], "m": {"x": "y1", "y": "x"}}') is None
    assert scan.first_repeat('{"b": ["x", "y1"], "m": {"x": "y"}}') == "y"       # a start of y1, not y1
    assert scan.first_repeat('{"b": ["x"], "m": {"x": "x1"}}') == "x1"           # past every member
    assert scan.first_repeat('{"b": ["x"], "m": {"x": "z"}}') == "z"             # no member starts so
    assert scan.first_repeat('{"b": ["x"], "m": {}}') is None
    state = scan.feed(START, b'{"b": ["x", "y1"], "m": {"z": "')[0]
    assert scan.inside_member(state) and not scan.inside_member(scan.feed(START, b'{"b": ["')[0])


def test_the_member_masks_by_hand(sampler):
    policy, constraint = sampler
    shape = constraint(MEMBER)
    def allowed_after(text):
        return _allowed_after(policy, shape, text)
    assert allowed_after('{"b": ["x", "y1"], "m": {"z": "') == {"x", "y"}       # the grammar allows x, y, z
    assert allowed_after('{"b": ["x", "y1"], "m": {"z": "x') == {'"'}          # x1 is not one of b's
    assert allowed_after('{"b": ["x", "y1"], "m": {"z": "y') == {"1"}          # y is not, y1 is
    assert allowed_after('{"b": ["z"], "m": {"z": "') == {"z"}


# ======================================================================== x-type-of: the type of an earlier key

TYPED = {"type": "object", "additionalProperties": False, "required": ["m", "a"], "properties": {
    "m": {"type": "object", "minProperties": 1, "maxProperties": 2, "additionalProperties": False,
          "patternProperties": {"^(x|xy|z) 1$": {"enum": ["a"]}}},
    "a": {"type": "object", "additionalProperties": False, "required": ["b"], "properties": {
        "b": {"enum": ["x", "xy", "y", "z"], TYPE_OF: ["m"]}}}}}


def test_type_paths_and_the_scanner_by_hand():
    assert member_paths(TYPED) == {("a", "b"): Reference(("m", KEY), True)}
    assert member_paths({"type": "object", "properties": {"a": {"type": "array"}, "b": {TYPE_OF: ["a"]}}}) == {
        ("b",): Reference(("a", ITEM), True)}                              # an array's items
    assert TYPE_OF not in without_unique_items(TYPED)["properties"]["a"]["properties"]["b"]
    scan = UniqueStrings(TYPED)
    assert scan.first_repeat('{"m": {"xy 1": "a"}, "a": {"b": "xy"}}') is None
    assert scan.first_repeat('{"m": {"xy 1": "a", "z 1": "a"}, "a": {"b": "z"}}') is None
    assert scan.first_repeat('{"m": {"xy 1": "a"}, "a": {"b": "x"}}') == "x"       # a start of xy, not xy
    assert scan.first_repeat('{"m": {"x 1": "a"}, "a": {"b": "xy"}}') == "xy"      # past every type
    assert scan.first_repeat('{"m": {"z 1": "a"}, "a": {"b": "y"}}') == "y"
    assert scan.first_repeat('{"m": {"z 1": "a"}, "a": {"b": "z 1"}}') == "z "     # a name is not its type
    # a key names only the object it is a key of: "m"'s values and "a"'s keys are not recorded
    assert scan.feed(START, b'{"m": {"z 1": "a"}, "a": {')[0][3] == frozenset({(("m", KEY), b"z 1")})


def test_the_type_masks_by_hand(sampler):
    policy, constraint = sampler
    shape = constraint(TYPED)
    def allowed_after(text):
        return _allowed_after(policy, shape, text)
    assert allowed_after('{"m": {"xy 1": "a", "z 1": "a"}, "a": {"b": "') == {"x", "z"}   # not y
    assert allowed_after('{"m": {"xy 1": "a", "z 1": "a"}, "a": {"b": "x') == {"y"}      # x is no type here
    assert allowed_after('{"m": {"x 1": "a", "xy 1": "a"}, "a": {"b": "x') == {"y", '"'}


def _member_strays(text: str) -> int:
    """MEMBER's values of m that are not items of b."""
    world = json.loads(text)
    return sum(value not in world["b"] for value in world["m"].values())


def _type_strays(text: str) -> int:
    """TYPED's a.b when it is not the type of one of m's keys."""
    task = json.loads(text)
    return int(task["a"]["b"] not in {key.rsplit(" ", 1)[0] for key in task["m"]})


# ================================================= x-member-of-sibling: a string of a property of its own object

SIBLING = {"type": "object", "additionalProperties": False, "required": ["a"], "properties": {
    "a": {"type": "array", "minItems": 1, "maxItems": 2, "items": {
        "type": "object", "additionalProperties": False, "required": ["m", "b"], "properties": {
            "m": {"type": "object", "minProperties": 1, "maxProperties": 2, "additionalProperties": False,
                  "patternProperties": {"^[xyz]$": {"enum": ["a"]}}},
            "b": {"type": "array", "maxItems": 2, "items": {"type": "string", "pattern": "^[xyz]$",
                                                           MEMBER_OF_SIBLING: "m"}}}}}}}


def test_sibling_paths_and_the_scanner_by_hand():
    """Each b item is a key of its own object's m: another item's keys do not count; a path through an array's
    items names the strings there (a call naming one of the functions written)."""
    assert member_paths(SIBLING) == {("a", ITEM, "b", ITEM): Reference(("a", ITEM, "m", KEY), False, ("a", ITEM))}
    assert MEMBER_OF_SIBLING not in without_unique_items(SIBLING)["properties"]["a"]["items"]["properties"]["b"][
        "items"]
    scan = UniqueStrings(SIBLING)
    assert scan.first_repeat('{"a": [{"m": {"x": "a"}, "b": ["x"]}, {"m": {"y": "a", "z": "a"}, "b": ["z"]}]}') is None
    assert scan.first_repeat('{"a": [{"m": {"x": "a"}, "b": ["x"]}, {"m": {"y": "a"}, "b": ["x"]}]}') == "x"
    assert scan.first_repeat('{"a": [{"m": {"x": "a"}, "b": ["y"]}]}') == "y"
    called = {"type": "object", "properties": {
        "a": {"type": "array", "items": {"type": "object", "properties": {"n": {"type": "string"}}}},
        "c": {"type": "string", MEMBER_OF: ["a", ITEM, "n"]}}}
    assert member_paths(called) == {("c",): Reference(("a", ITEM, "n"), False)}
    assert UniqueStrings(called).first_repeat('{"a": [{"n": "ab"}, {"n": "m"}], "c": "m"}') is None
    assert UniqueStrings(called).first_repeat('{"a": [{"n": "ab"}, {"n": "m"}], "c": "a"}') == "a"


def _sibling_strays(text: str) -> int:
    """SIBLING's b items that are not keys of their own m."""
    return sum(name not in item["m"] for item in json.loads(text)["a"] for name in item["b"])


@pytest.mark.parametrize("schema, strays, stray_text", [
    (MEMBER, _member_strays, '{"b": ["x"], "m": {"x": "z"}}'),
    (TYPED, _type_strays, '{"m": {"z 1": "a"}, "a": {"b": "x"}}'),
    (SIBLING, _sibling_strays, '{"a": [{"m": {"x": "a"}, "b": ["y"]}]}')],
    ids=["x-member-of", "x-type-of", "x-member-of-sibling"])
def test_a_constrained_sampler_names_only_earlier_strings_and_the_update_replays_it(sampler, schema, strays,
                                                                                     stray_text):
    """With the keyword no finished text names a stray; without it (the grammar alone) at least 5 of 48 do; the
    update's log-probs replay the sampler's; check-domain's view names the keyword's failure."""
    policy, constraint = sampler
    member_constraint = constraint(schema)
    with_it = [g for g in _written(policy, member_constraint) if g.finished]
    without = [g for g in _written(policy, constraint(without_unique_items(schema))) if g.finished]
    assert len(with_it) > 30 and len(without) > 30
    assert sum(strays(g.text) for g in with_it) == 0 and sum(strays(g.text) for g in without) >= 5
    gens = with_it[:12]
    logp = _update_logprobs(policy, member_constraint, gens)
    for row, g in enumerate(gens):
        assert logp[row, :len(g.token_ids)].tolist() == pytest.approx(g.logprobs, abs=1e-5)
    assert "not (the start of) an item" in grammar_problem(TaskShape(json_schema=schema), stray_text)


def test_a_reference_into_an_array_of_arrays_names_their_items():
    """``x-member-of: ["f"]`` where f's items are arrays ([entity, relation, entity]): the strings named are the
    inner items (the multihop domain's start entity is one of its facts' names)."""
    facts = {"type": "object", "properties": {
        "f": {"type": "array", "items": {"type": "array", "prefixItems": [{"type": "string"}, {"enum": ["r"]},
                                                                           {"type": "string"}], "items": False}},
        "s": {"type": "string", MEMBER_OF: ["f"]}}}
    assert member_paths(facts) == {("s",): Reference(("f", ITEM, ITEM), False)}
    scan = UniqueStrings(facts)
    assert scan.first_repeat('{"f": [["ab", "r", "c"]], "s": "c"}') is None
    assert scan.first_repeat('{"f": [["ab", "r", "c"]], "s": "a"}') == "a"
    assert scan.first_repeat('{"f": [["ab", "r", "c"]], "s": "x"}') == "x"


@pytest.mark.parametrize("name", ["household", "multihop"])
def test_the_member_masks_looked_up_equal_those_the_scan_gives_every_token(name):
    """Inside a member-of or type-of string the mask keeps a plain token by looking its bytes up in what is left of
    the members' spellings (not scanning the vocabulary): at every such position of the seed texts, on the tiny
    word-level tokenizer, that mask equals the grammar's with every token the scan refuses cleared."""
    import llguidance.numpy as llnp
    import numpy as np

    from genenv.domains import make_domain
    from genenv.models.tiny import build_tiny_tokenizer
    domain = make_domain(name)
    tokenizer = build_tiny_tokenizer(domain.alphabet, domain.tiny_words)
    shape = TokenConstraint(domain.task_shape(), tokenizer, len(tokenizer), tokenizer.eos_token_id, name)
    checked = 0
    for task in domain.seed_tasks(np.random.default_rng(0), 4):
        matchers = shape.start(1)
        for token in tokenizer.encode(task.text, add_special_tokens=False):
            m = matchers[0]
            if shape.unique.spellings_left(m.scan) is not None:
                grammar = np.zeros((1, shape._bitmask_words), dtype=np.int32)
                llnp.fill_next_token_bitmask(m.matcher, grammar, 0)
                scanned = grammar[0].view(np.uint32).copy()
                for t in range(len(shape._token_bytes)):
                    if (scanned[t >> 5] >> np.uint32(t & 31)) & 1 and shape.unique.feed(
                            m.scan, shape._token_bytes[t])[1] is not None:
                        scanned[t >> 5] &= np.uint32(~(1 << (t & 31)) & 0xFFFFFFFF)
                if not scanned.any():
                    scanned = grammar[0].view(np.uint32)
                assert (shape.bitmask(matchers)[0].view(np.uint32) == scanned).all()
                checked += 1
            shape.advance(matchers, [token])
    assert checked > 20

"""Constrained sampling (env.constrained, genenv.constrained): the masks by hand, a tiny simulator that writes only
its domain's shape, the update's log-probs equal to the sampler's under the same masks, keyed sampling unchanged,
and a run that uses it."""

import pickle
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from genenv.config import ConfigError, TinyModelConfig, load_config
from genenv.constrained import TokenConstraint, grammar_problem, unpack_bitmask
from genenv.domains import make_domain
from genenv.seeding import grid_keys


def test_unpack_bitmask_by_hand():
    bitmask = np.array([[0b101], [-1]], dtype=np.int32)   # tokens 0 and 2; every token of the word
    mask = unpack_bitmask(bitmask, 5)
    assert mask.tolist() == [[True, False, True, False, False], [True] * 5]
    wider = unpack_bitmask(bitmask, 34)   # logits wider than the bitmask: extra ids banned, unless the row is free
    assert wider[0, 32:].tolist() == [False, False] and wider[1, 32:].tolist() == [False, False]
    assert unpack_bitmask(bitmask, 34, fill=True)[1, 32:].tolist() == [True, True]
    assert unpack_bitmask(np.array([[-(2**31)]], dtype=np.int32), 32)[0].nonzero().tolist() == [[31]]   # the sign bit


@pytest.fixture(scope="module")
def tiny():
    """An untrained tiny simulator for addition (width 2) and the domain's constraint for it."""
    from genenv.models.tiny import build_tiny_policy
    domain = make_domain("addition", width=2)
    policy = build_tiny_policy(TinyModelConfig(hidden_size=16, intermediate_size=32, num_layers=1, num_heads=2,
                                               max_positions=64), domain.alphabet, seed=5, words=domain.tiny_words)
    vocab = int(policy.model.get_output_embeddings().weight.shape[0])
    constraint = TokenConstraint(domain.task_shape(), policy.tokenizer, vocab, policy.eos_token_id, "addition")
    return domain, policy, constraint


def _generate(policy, constraint, prompts, n=6, seed=11, keys=None, greedy=False):
    return policy.generate(prompts, n=n, max_new_tokens=12, temperature=1.0, seed=seed, keys=keys, greedy=greedy,
                           constraint=constraint)


def test_a_constrained_simulator_writes_only_the_shape(tiny):
    domain, policy, constraint = tiny
    prompts = ["12+34", "56+78"]
    shape = re.compile(domain.task_shape().regex)
    constrained = [g for gens in _generate(policy, constraint, prompts) for g in gens]
    free = [g for gens in _generate(policy, None, prompts) for g in gens]
    assert all(g.finished and shape.fullmatch(g.text) for g in constrained)
    assert all(domain.parse_task(g.text).__class__.__name__ == "Task" for g in constrained)
    assert sum(bool(shape.fullmatch(g.text)) for g in free) < len(free) // 2   # the untrained model alone rarely does
    greedy = _generate(policy, constraint, prompts, n=1, greedy=True)
    assert all(shape.fullmatch(gens[0].text) for gens in greedy) and greedy[0][0].logprobs == []


def test_the_updates_log_probs_are_the_samplers_under_the_same_masks(tiny):
    domain, policy, constraint = tiny
    gens = [g for group in _generate(policy, constraint, ["12+34", "9+9"]) for g in group]
    batch = policy.build_batch([g.prompt_ids for g in gens], [g.token_ids for g in gens])
    with torch.no_grad():
        logp, entropy = policy.token_logprobs(batch, with_entropy=True, constraint=constraint)
    with torch.no_grad():
        free_logp, _ = policy.token_logprobs(batch)
    for row, g in enumerate(gens):
        n = len(g.token_ids)
        assert logp[row, :n].tolist() == pytest.approx(g.logprobs, abs=1e-5)
        assert (logp[row, :n] >= free_logp[row, :n] - 1e-6).all()   # renormalised over fewer tokens
    assert (logp[:, :4] > free_logp[:, :4] + 1e-3).any()   # the masks change the numbers
    assert torch.isfinite(entropy).all()
    # gradients flow through the allowed tokens only
    try:
        loss = -policy.token_logprobs(batch, constraint=constraint)[0].sum()
        loss.backward()
        assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.trainable_parameters())
    finally:
        policy.model.zero_grad()


def test_a_sequence_samples_the_same_tokens_in_any_batch_under_the_constraint(tiny):
    domain, policy, constraint = tiny
    prompts = ["12+34", "56+78", "1+1"]
    whole = [g.token_ids for gens in _generate(policy, constraint, prompts, n=3) for g in gens]
    keys = grid_keys(1, 1, 3)   # prompt 1's sequences alone, with the keys they had in the whole
    alone = [g.token_ids for g in _generate(policy, constraint, [prompts[1]], n=3, keys=keys)[0]]
    assert alone == whole[3:6]


OPEN = {"type": "object", "required": ["a", "b"], "properties": {   # its keys open: a text can run on and on
    "a": {"type": "array", "items": {"type": "string", "maxLength": 6}, "maxItems": 9}, "b": {"enum": ["xy", "zz"]}}}


@pytest.fixture(scope="module")
def json_tiny():
    """An untrained tiny simulator over JSON's characters, and a constraint of a schema for it under a budget."""
    from genenv.domains.base import TaskShape
    from genenv.models.tiny import build_tiny_policy
    policy = build_tiny_policy(TinyModelConfig(hidden_size=16, intermediate_size=32, num_layers=1, num_heads=2,
                                               max_positions=96), sorted(set('{}[]":, abmxyz1')), seed=3)
    vocab = int(policy.model.get_output_embeddings().weight.shape[0])
    def constraint(budget, schema=OPEN, max_chars=None):
        return TokenConstraint(TaskShape(json_schema=schema, max_chars=max_chars), policy.tokenizer, vocab,
                               policy.eos_token_id, "test", budget=budget)
    return policy, constraint


def _closing(policy, constraint, text):
    matchers = constraint.start(1)
    for token in policy.tokenizer.encode(text, add_special_tokens=False):
        constraint.advance(matchers, [token])
    return constraint.closing(matchers[0])


def test_the_closing_text_by_hand(json_tiny):
    """The short way a text closes: end its string, its array, the required keys left with their first values
    (b's enum: "xy"), its object; a key just opened gets the shortest key and value; a finished text needs
    nothing; a closing longer than the tokens left is None."""
    policy, constraint = json_tiny
    shape = constraint(40)
    assert _closing(policy, shape, '{"a": ["xa') == b'"], "b": "xy"}'
    assert _closing(policy, shape, '{"a": [') == b'], "b": "xy"}'
    assert _closing(policy, shape, '{"a": [], "b": "zz"') == b"}"
    assert _closing(policy, shape, '{"a": [], "b": "zz", "') == b'": ""}'
    assert _closing(policy, shape, '{"a": [], "b": "zz"}') == b""
    assert _closing(policy, constraint(12), '{"a": ["xa') is None     # 14 bytes, 2 tokens left


def test_under_a_budget_every_text_closes_and_the_update_replays_it(json_tiny):
    """Without a budget most texts of an untrained simulator run past max_new_tokens (open keys) and are cut off;
    with it every one closes, in the grammar, and the update's log-probs (its masks replayed under the same
    budget) are the sampler's; so under a shape's ``max_chars``."""
    import json

    from genenv.domains.base import TaskShape
    policy, constraint = json_tiny
    def written(shape):
        return policy.generate(["ab"], n=32, max_new_tokens=30, temperature=1.0, seed=7, constraint=shape)[0]
    def closed(text):
        try:
            json.loads(text)
        except json.JSONDecodeError:
            return False
        return grammar_problem(TaskShape(json_schema=OPEN), text) is None
    without, under = written(constraint(None)), written(constraint(30))
    assert sum(map(closed, (g.text for g in without))) < len(without) // 2
    assert all(closed(g.text) for g in under)
    batch = policy.build_batch([g.prompt_ids for g in under], [g.token_ids for g in under])
    with torch.no_grad():
        logp = policy.token_logprobs(batch, constraint=constraint(30))[0]
    for row, g in enumerate(under):
        assert logp[row, :len(g.token_ids)].tolist() == pytest.approx(g.logprobs, abs=1e-5)
    # a shape's max_chars: every text closes within it too, where without it most run past
    capped = written(constraint(60, max_chars=24))
    assert sum(len(g.text) <= 24 for g in written(constraint(60))) < len(capped) // 2
    assert all(closed(g.text) and len(g.text) <= 24 for g in capped)
    # a cap no text of the shape fits (the shortest is 20 characters): each still closes, too long but well-formed
    assert all(closed(g.text) for g in written(constraint(30, max_chars=5)))


def test_a_constraint_pickles_for_a_worker_and_a_bad_shape_is_one_clear_error(tiny):
    domain, policy, constraint = tiny
    copy = pickle.loads(pickle.dumps(constraint))
    matchers = copy.start(1)
    assert copy.allowed(matchers).tolist() == constraint.allowed(constraint.start(1)).tolist()
    from genenv.domains.base import TaskShape
    with pytest.raises(ConfigError, match="domain 'broken' declares does not compile"):
        TokenConstraint(TaskShape(regex="[0-9"), policy.tokenizer, constraint.vocab_size, policy.eos_token_id,
                        "broken")
    for reference in ({"x-member-of": ["b"]}, {"x-member-of-sibling": "b"}):   # a property nobody declares
        shape = TaskShape(json_schema={"type": "object", "properties": {"a": {"type": "string", **reference}}})
        with pytest.raises(ConfigError, match="domain 'wrong' declares: .*does not declare|no such property"):
            TokenConstraint(shape, policy.tokenizer, constraint.vocab_size, policy.eos_token_id, "wrong")
        assert grammar_problem(shape, '{"a": "x"}').startswith("the shape does not compile")   # check-domain's view


def test_a_domain_without_a_shape_cannot_be_constrained(tiny, monkeypatch):
    from genenv.players import simulator_constraint
    domain, policy, _ = tiny
    cfg = load_config("smoke", ["env.constrained=true"])
    built = simulator_constraint(cfg, domain, policy)   # its budget: the longest task the simulator writes
    assert built.budget == min(cfg.env.max_new_tokens, domain.env_max_new_tokens) and built.budget is not None
    assert simulator_constraint(load_config("smoke"), domain, policy) is None
    monkeypatch.setattr(type(domain), "task_shape", lambda self: None)
    from genenv.preflight import survey  # refused by the preflight, before the warm starts
    assert [p for p in survey(cfg).problems if p.startswith("env.constrained")] == [
        "env.constrained: domain 'addition' declares no task shape (Domain.task_shape); declare one "
        "(docs/domains.md) or set env.constrained=false"]


def test_a_constrained_run_writes_only_the_shape_and_resumes_the_same(tmp_path):
    from genenv.coevolve import run
    from genenv.io import read_jsonl
    overrides = ["threads=1", "env.constrained=true"]
    a = run(load_config("smoke", [*overrides, "epochs=3"]), run_dir=tmp_path / "a", log=lambda m: None)
    b = run(load_config("smoke", [*overrides, "epochs=2"]), run_dir=tmp_path / "b", log=lambda m: None)
    b = run(load_config("smoke", [*overrides, "epochs=3"]), run_dir=tmp_path / "b", resume=True, log=lambda m: None)
    domain = make_domain(load_config("smoke").domain.name, **load_config("smoke").domain.options)
    shape = re.compile(domain.task_shape().regex)
    for epoch in range(3):
        rows = read_jsonl(a / "samples" / f"epoch_{epoch}.jsonl")
        written = [r["generated"] for r in rows if r["source"] == "simulator"]
        assert written and all(shape.fullmatch(text) for text in written)
    ra, rb = read_jsonl(a / "metrics.jsonl"), read_jsonl(b / "metrics.jsonl")
    assert [r["valid"] for r in ra] == [r["valid"] for r in rb]
    assert all(set(r["invalid_reasons"]) <= {"equals a dev task", "equals a held-out task"} for r in ra)
    assert [r["env_loss"] for r in ra] == [r["env_loss"] for r in rb]


ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]
SHAPED = {"addition": {}, "multihop": {}, "household": {}, "toolcall": {}, "reasoning_gym": {},
          "travel": {"data": str(ROOT / "tests" / "data" / "travel-world"), "max_candidates": 2},
          "apibank": {"data": str(ROOT.parent / "shared" / "data" / "api-bank")}}


@pytest.mark.parametrize("name", list(SHAPED))
def test_every_built_in_domains_seed_tasks_are_written_under_its_constraint(name):
    """Each seed task, tokenised as the tiny simulator writes it and followed by EOS, is a path the masks allow
    (so a warm-started simulator can still write what it was taught): the grammar's JSON layout is json.dumps's."""
    from genenv.models.tiny import build_tiny_tokenizer
    if name == "apibank" and not __import__("pathlib").Path(SHAPED[name]["data"]).exists():
        pytest.skip("API-Bank data not in ../shared/data/api-bank (the benchmark data is not in the repository)")
    if name == "reasoning_gym":
        pytest.importorskip("reasoning_gym", reason="reasoning-gym is not installed (`make install` adds it)")
    domain = make_domain(name, **SHAPED[name])
    tokenizer = build_tiny_tokenizer(domain.alphabet, domain.tiny_words)
    constraint = TokenConstraint(domain.task_shape(), tokenizer, len(tokenizer), tokenizer.eos_token_id, name)
    for task in domain.seed_tasks(np.random.default_rng(0), 24):
        matcher = constraint.start(1)
        for token in tokenizer.encode(task.text, add_special_tokens=False) + [tokenizer.eos_token_id]:
            assert constraint.allowed(matcher)[0, token], (task.text, tokenizer.decode([token]))
            constraint.advance(matcher, [token])
        assert matcher[0].done


def test_check_domain_flags_a_text_the_constrained_sampler_cannot_write():
    """grammar_problem (what check-domain's task_shape property adds to the schema check): the JSON laid out as
    json.dumps writes it, keys in the schema's order, non-ASCII as escapes; a regex matched whole, then ended."""
    from genenv.domain_check import shape_problem
    from genenv.domains.base import TaskShape
    schema = TaskShape(json_schema={"type": "object", "required": ["a", "b"],
                                    "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}})
    assert grammar_problem(schema, '{"a": 1, "b": "Divin\\u00f3polis"}') is None
    assert "refused at character 2" in grammar_problem(schema, '{"b": "x", "a": 1}')   # another key order
    assert "refused at character 5" in grammar_problem(schema, '{"a":1, "b": "x"}')    # json.dumps's separators
    assert "not complete" in grammar_problem(schema, '{"a": 1')
    assert shape_problem(schema, '{"b": "x", "a": 1}').startswith("the constrained sampler cannot write it")
    regex = TaskShape(regex=r"[0-9]{2}\+[0-9]{2}")
    assert grammar_problem(regex, "12+34") is None and "not complete" in grammar_problem(regex, "12+3")


def test_unbounded_places_by_hand():
    """Where a schema lets a constrained text grow without end: uncapped strings, arrays and numbers, open keys,
    patternProperties without maxProperties, any value; caps, enums, consts and closed tuples bound it."""
    from genenv.constrained import unbounded_places
    bounded = {"type": "object", "additionalProperties": False, "properties": {
        "a": {"type": "string", "maxLength": 5}, "b": {"enum": ["x", "y"]}, "c": {"const": 1},
        "d": {"type": "array", "items": {"type": "string", "pattern": "^[a-z]{1,3}$"}, "maxItems": 2},
        "e": {"type": "array", "prefixItems": [{"type": "boolean"}, {"type": "null"}], "items": False},
        "f": {"type": "integer", "minimum": 0, "maximum": 9},
        "g": {"anyOf": [{"type": "string", "maxLength": 1}, {"type": "integer", "minimum": 0, "maximum": 1}]},
        "h": {"type": "object", "additionalProperties": False, "maxProperties": 2,
              "patternProperties": {"^k[0-9]$": {"type": "boolean"}}}}}
    assert unbounded_places(bounded) == []
    assert unbounded_places({"type": "string"}) == ["the top: a string without maxLength"]
    assert unbounded_places({"type": "string", "pattern": "^[a-z]+$"}) == ["the top: a string without maxLength"]
    assert unbounded_places({"type": "string", "pattern": "^[a-z]+$", "maxLength": 4}) == []
    assert unbounded_places({"type": "object", "properties": {"n": {"type": "number"}, "l": {"type": "array"}}}) == [
        "the top: an object with open keys (additionalProperties)",
        "/n: a number without minimum and maximum", "/l: an array without maxItems"]
    assert unbounded_places({"type": "object", "additionalProperties": False,
                             "patternProperties": {"^k[0-9]$": {"type": "boolean"}}}) == [
        "the top: patternProperties without maxProperties"]
    assert unbounded_places({}) == ["the top: any value"]
    assert unbounded_places({"anyOf": [{"type": "string"}, {"enum": [1]}]}) == ["/anyOf[0]: a string without maxLength"]


@pytest.mark.parametrize("name", ["household", "multihop", "apibank", "toolcall"])
def test_the_built_in_json_shapes_cap_every_string_and_list(name):
    """Every string and list of the built-in JSON shapes has a cap (so a constrained simulator's text ends), except
    toolcall's open objects (a parameter's fields and the call's arguments, as BFCL writes them), which
    check-domain notes."""
    from genenv.constrained import unbounded_places
    from genenv.domain_check import check_domain
    if name == "apibank" and not __import__("pathlib").Path(SHAPED[name]["data"]).exists():
        pytest.skip("API-Bank data not in ../shared/data/api-bank (the benchmark data is not in the repository)")
    domain = make_domain(name, **SHAPED[name])
    places = unbounded_places(domain.task_shape().json_schema)
    assert all("open keys" in place for place in places)
    assert bool(places) == (name == "toolcall")
    notes = check_domain(domain, examples=10, tasks=4).notes
    assert len(notes) == (name == "toolcall") and all("no length cap" in note for note in notes)


def test_the_presets_that_turn_it_on_are_those_the_rule_chose():
    """docs/constrained.md's rule decides each preset: smollm2-apibank on (its pilot), household on, default off;
    every preset that turns it on names a domain with a shape the grammar compiles for it (a preset cannot ship a
    run that stops at start)."""
    from genenv.config import load_config, preset_names
    from genenv.domains import make_domain
    chosen = {name for name in preset_names() if load_config(name).env.constrained}
    assert {"smollm2-apibank", "household"} <= chosen and "default" not in chosen
    hand_made = {"data": str(Path(__file__).parent / "data" / "apibank")}   # the preset's data is the user's
    for name in chosen:
        cfg = load_config(name)
        options = {**cfg.domain.options, **(hand_made if cfg.domain.name == "apibank" else {})}
        shape = make_domain(cfg.domain.name, **options).task_shape()
        assert shape is not None, name
        assert "does not compile" not in grammar_problem(shape, ""), name   # compiles; "" is not a whole task

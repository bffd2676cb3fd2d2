"""The multihop domain: grounding of simulator worlds, the search/answer episode, the reward switch."""

import json

import numpy as np
import pytest

from genenv.domains import make_domain
from genenv.domains.multihop.bamboogle import token_f1
from genenv.domains.multihop.domain import question_text

FACTS = [["Ulla Voss", "born_in", "Kardon"], ["Kardon", "city_in", "Mirrel"], ["Mirrel", "leader_of", "Tor Ban"],
         ["Ixa Lo", "born_in", "Pelt"]]


def _world(facts=FACTS, start="Ulla Voss", path=("born_in", "city_in"), answer="Mirrel"):
    return json.dumps({"facts": facts, "start": start, "path": list(path), "answer": answer})


def test_a_grounded_world_and_its_question():
    domain = make_domain("multihop")
    task = domain.parse_and_validate(_world())
    assert task.answer == "Mirrel" and task.level == 2
    assert task.prompt == "Question: In which country is the city where Ulla Voss was born?\n"
    assert question_text("Mirrel", ["leader_of"]) == "Who is the leader of Mirrel?"
    three = domain.parse_and_validate(_world(path=("born_in", "city_in", "leader_of"), answer="Tor Ban"))
    assert three.level == 3 and three.answer == "Tor Ban"


@pytest.mark.parametrize("facts,path,answer,reason", [
    (FACTS, ("born_in", "mayor_of"), "x", "missing link at hop 2: no mayor_of fact for 'Kardon'"),
    (FACTS + [["Ulla Voss", "born_in", "Pelt"]], ("born_in", "city_in"), "Mirrel",
     "ambiguous hop 1: 'Ulla Voss' has 2 born_in facts"),
    (FACTS, ("born_in", "city_in"), "Tor Ban", "the chain does not end at the answer"),
    (FACTS + [["Ulla Voss", "works_for", "Mirrel"]], ("born_in", "city_in"), "Mirrel",
     "'Mirrel' is both a country and a company"),
    ([["Ann Bo", "married_to", "Cy Do"], ["Cy Do", "married_to", "Ann Bo"]], ("married_to", "married_to"), "Ann Bo",
     "the chain revisits 'Ann Bo' (a cycle)"),
    ([["Ann Bo", "works_for", "Acme Labs"], ["Acme Labs", "founded_by", "Cy Do"], ["Ann Bo", "married_to", "Cy Do"]],
     ("works_for", "founded_by"), "Cy Do", "one fact links the start to the answer (a one-hop shortcut)"),
    (FACTS, ("born_in",), "Kardon", "path must be a list of 2-4 relations"),
    ([["Ulla Voss", "teleports_to", "Kardon"]], ("born_in", "city_in"), "Mirrel", "unknown relation 'teleports_to'"),
    (FACTS + [FACTS[0]], ("born_in", "city_in"), "Mirrel", "a fact is repeated"),
])
def test_grounding_rejects_ill_posed_worlds_with_a_reason(facts, path, answer, reason):
    start = facts[0][0]
    result = make_domain("multihop").parse_and_validate(_world(facts, start, path, answer))
    assert type(result).__name__ == "Invalid" and result.reason == reason


def test_grounding_never_raises_on_arbitrary_text():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    domain = make_domain("multihop")
    values = st.recursive(st.none() | st.integers() | st.text(max_size=12),
                          lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner,
                                                                                        max_size=3), max_leaves=15)
    worlds = st.fixed_dictionaries({"facts": values, "start": values, "path": values, "answer": values})

    @settings(max_examples=200, deadline=None)
    @given(st.one_of(st.text(max_size=200), worlds.map(json.dumps)))
    def check(text):
        assert type(domain.parse_and_validate(text)).__name__ in ("Task", "Invalid")
    check()


def test_an_episode_searches_then_answers():
    domain = make_domain("multihop", search_top_k=1)
    task = domain.parse_and_validate(_world())
    state, observation = domain.reset(task)
    result = domain.step(state, "search: where was Ulla Voss born")
    assert result.observation == "Found: Ulla Voss was born in Kardon." and not result.terminated
    result = domain.step(result.state, "search: Kardon city")
    assert result.observation == "Found: Kardon is a city in Mirrel."
    done = domain.step(result.state, "answer: the Mirrel.")
    assert (done.reward, done.terminated, done.truncated) == (1.0, True, False)


def test_the_turn_limit_truncates_and_bad_actions_are_told_the_protocol():
    domain = make_domain("multihop", max_steps=2)
    state, _ = domain.reset(domain.parse_and_validate(_world()))
    first = domain.step(state, "hello")
    assert "search: <words>" in first.observation and not first.truncated
    second = domain.step(first.state, "search: Kardon")
    assert second.truncated and not second.terminated and second.reward == 0.0


def test_reward_is_exact_match_or_token_f1():
    task = make_domain("multihop").parse_and_validate(_world(
        facts=[["Ann Bo", "works_for", "Acme Labs"], ["Acme Labs", "based_in", "New Kardon"]],
        start="Ann Bo", path=("works_for", "based_in"), answer="New Kardon"))
    assert make_domain("multihop").score(task, "answer: Kardon") == 0.0
    f1 = make_domain("multihop", reward="f1")
    assert f1.score(task, "answer: Kardon") == pytest.approx(2 / 3)   # a part of the answer: partial credit
    assert f1.score(task, "answer: the New Kardon.") == 1.0
    # issue 93, item 4: a hedge (a wrong and the right answer together) earns no more than the wrong one alone; the
    # official token F1 (the Bamboogle evaluation's) pays it 0.67 and 0.8
    assert f1.score(task, "answer: Acme New Kardon") == f1.score(task, "answer: Acme") == 0.0
    assert f1.score(task, "answer: W G") == 0.0 and token_f1("W G", "G") == pytest.approx(2 / 3)
    assert f1.score(task, "answer: Kardon Kardon") == 0.0   # a token repeated past the reference's count
    with pytest.raises(Exception, match="reward must be"):
        make_domain("multihop", reward="bleu")


def test_procedural_worlds_are_grounded_and_the_expert_solves_them():
    domain = make_domain("multihop")
    rng = np.random.default_rng(0)
    for level in domain.levels():
        for _ in range(20):
            task = domain.random_task(rng, level)
            assert task.level == level and domain.parse_and_validate(task.text).answer == task.answer
            state, _ = domain.reset(task)
            for _, _, action in domain.expert_steps(task):
                result = domain.step(state, action)
                state = result.state
            assert result.terminated and result.reward == 1.0


def test_multihop_smoke_preset_runs(tmp_path):
    from genenv.coevolve import run
    from genenv.config import load_config
    from genenv.io import read_jsonl

    out = run(load_config("multihop-smoke", ["threads=1"]), run_dir=tmp_path / "mh", log=lambda m: None)
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["epoch"] for r in rows] == [0, 1] and all(r["heldout_success"] is not None for r in rows)
    assert all(r["rollouts"] > 0 for r in rows)


@pytest.mark.parametrize("name", ["The", "{}", "+", "A ."])
def test_an_answer_empty_after_normalisation_is_rejected_and_never_earns(name):
    """A world whose answer normalises to nothing (issue 38: 'The', '{}', '+') was accepted, and on it `answer:`
    scored 1.0. Grounding rejects it with a reason; the scorer gives nothing to an empty side."""
    from genenv.domains import Task
    facts = [["Ulla Voss", "born_in", "Kardon"], ["Kardon", "city_in", name]]
    result = make_domain("multihop").parse_and_validate(_world(facts, "Ulla Voss", ("born_in", "city_in"), name))
    assert type(result).__name__ == "Invalid" and "empty after the scorer's normalisation" in result.reason
    for reward in ("em", "f1"):
        domain = make_domain("multihop", reward=reward)
        forged = Task("t", "Question?\n", name, 2)
        assert [domain.score(forged, r) for r in ("answer:", "answer: ?", "", name)] == [0.0] * 4
        real = Task("t", "Question?\n", "Mirrel", 2)
        assert domain.score(real, "answer: ?") == 0.0 and domain.score(real, "answer: Mirrel") == 1.0

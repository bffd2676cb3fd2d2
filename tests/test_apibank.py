"""API-Bank: the call parser, the simulated APIs and the scorer (our SPEC.md of the benchmark).

Hand-made databases in the official format live in tests/data/apibank; the replay of every gold call of the
official test files runs when the data is present (``GENENV_APIBANK_DATA`` or ../shared/data/api-bank)."""

import collections
import json
import os
from pathlib import Path

import pytest

from genenv.domains.apibank.calls import extract_call, format_call, parse_arguments
from genenv.domains.apibank.scoring import score_call
from genenv.domains.apibank.tools import REGISTRY, CallError, ToolSession, calculate, load_databases

FIXTURE = Path(__file__).parent / "data" / "apibank" / "init_database"
OFFICIAL = Path(os.environ.get("GENENV_APIBANK_DATA", Path(__file__).resolve().parents[2] / "shared/data/api-bank"))


@pytest.fixture(scope="module")
def databases():
    return load_databases(FIXTURE)


# ============================================================================ parser

def test_parser_reads_the_test_files_syntax():
    call = extract_call("API-Request: [AddAgenda(token='tk1a', content=\"Meet John\", time='2023-09-12 14:00:00')]")
    assert call.name == "AddAgenda"
    assert call.arguments == {"token": "tk1a", "content": "Meet John", "time": "2023-09-12 14:00:00"}


def test_parser_keeps_upstream_quirks():
    # an apostrophe ends a value; a quoted list gives "["; an unquoted list runs to the last "]"; words as strings
    assert parse_arguments("content='Mom's day'") == {"content": "Mom"}
    assert parse_arguments("attendees='['Mary', 'Peter']'")["attendees"] == "["
    assert parse_arguments("devices=[{'name': 'a'}], on=True, n = 3") == {"devices": "[{'name': 'a'}]", "on": "True",
                                                                         "n": "3"}
    # the first call of the text; on its line the parentheses run to the last ")]", so B's argument leaks in
    call = extract_call("no call here\nAPI-Request: [A(x='1')] then [B(y='2')]\n[C(z='3')]")
    assert call.name == "A" and call.arguments == {"x": "1", "y": "2"}


@pytest.mark.parametrize("text", ["", "no call", "[AddAgenda token='x']", "API-Request: [Add Agenda(x='1')]",
                                  "[AddAgenda(\ntoken='x')]", None])
def test_parser_finds_no_call_in_malformed_text(text):
    assert extract_call(text) is None


def test_hostile_calls_are_strings_and_never_run(databases, monkeypatch):
    def forbidden(*args, **kwargs):
        raise AssertionError("evaluated")
    monkeypatch.setattr("builtins.eval", forbidden)
    monkeypatch.setattr("builtins.exec", forbidden)
    call = extract_call("[Calculator(formula='__import__(\"os\").system(\"touch /tmp/pwned\")')]")
    assert call.name == "Calculator" and isinstance(call.arguments["formula"], str)
    result = ToolSession(databases).execute(call.name, call.arguments)
    assert result["output"] is None and result["exception"]
    assert extract_call("[__import__(x=os)]").name == "__import__"
    with pytest.raises(CallError):
        ToolSession(databases).execute("__import__", {})


def test_format_call_round_trips():
    text = format_call("QueryStock", {"stock_code": "ZYXW", "date": "2021-06-01"})
    assert text == "API-Request: [QueryStock(stock_code='ZYXW', date='2021-06-01')]"
    assert extract_call(text).arguments == {"stock_code": "ZYXW", "date": "2021-06-01"}


# ============================================================================ executor

def test_calls_are_typed_and_validated(databases):
    session = ToolSession(databases)
    with pytest.raises(CallError, match="invalid parameter name"):
        session.execute("QueryBalance", {"token": "tk1ada0000fixture1", "user": "x"})
    with pytest.raises(CallError, match="missing"):
        session.execute("GetUserToken", {"username": "AdaTest"})
    with pytest.raises(CallError, match="invalid parameter type"):
        session.execute("BookHotel", {"hotel_name": "H", "check_in_time": "2023-01-01", "check_out_time": "2023-01-02",
                                      "room_count": "-1", "adult_count": "1", "child_count": "0"})
    with pytest.raises(CallError, match="invalid tool name"):
        session.execute("NoSuchApi", {})
    bad_token = session.execute("QueryBalance", {"token": "nope"})
    assert bad_token == {"api_name": "QueryBalance", "input": {"token": "nope"}, "output": None,
                         "exception": "token is incorrect"}


def test_login_token_flow(databases):
    session = ToolSession(databases)
    token = session.execute("GetUserToken", {"username": "AdaTest", "password": "ada-pw-1"})["output"]["token"]
    assert session.execute("QueryBalance", {"token": token})["output"] == 1234.5
    assert session.execute("GetUserToken", {"username": "AdaTest", "password": "x"})["exception"]


def test_each_session_has_its_own_state(databases):
    first, second = ToolSession(databases), ToolSession(databases)
    call = {"token": "tk1ada0000fixture1", "content": "Dentist", "time": "2023-05-01 09:00:00", "location": "clinic"}
    assert first.execute("AddAgenda", call)["output"] == "success"
    query = {**call, "location": ""}
    assert first.execute("QueryAgenda", query)["output"]["content"] == "Dentist"
    assert second.execute("QueryAgenda", query)["exception"] == "no agenda about Dentist"
    assert "3" not in databases["Agenda"]  # the loaded databases are never mutated


@pytest.mark.parametrize("formula,value", [("1+2*3", 7.0), ("(1+2)*3", 9.0), ("8/2/2", 2.0), ("10-4-3", 3.0),
                                           ("2*(3+4)-(6/3)", 12.0), (" 7 * 6 ", 42.0)])
def test_calculator_hand_values(formula, value):
    assert calculate(formula) == value


@pytest.mark.parametrize("formula", ["1/0", "2*(3", "1.5+2", "12", "+", "2**3", "((1+2)*3)", "os.system"])
def test_calculator_rejects_what_upstream_rejects(databases, formula):
    result = ToolSession(databases).execute("Calculator", {"formula": formula})
    assert result["output"] is None and result["exception"]


def test_network_apis_are_unavailable_not_dropped(databases):
    assert score_call("API-Request: [Dictionary(keyword='apple')]",
                      {"api_name": "Dictionary", "result": {}}, databases).reason == "unavailable offline"
    assert {"Dictionary", "Translate", "ToolSearcher", "SearchEngine"} <= {n for n, c in REGISTRY.items()
                                                                          if c.needs_network}


# ============================================================================ scorer

def _gold(session, name, arguments):
    return {"api_name": name, "result": session.execute(name, arguments)}


def test_scorer_verdicts(databases):
    gold = _gold(ToolSession(databases), "QueryStock", {"stock_code": "ZYXW", "date": "2021-06-01"})
    assert score_call("API-Request: [QueryStock(stock_code=' zyxw', date='2021-6-1')]", gold, databases).correct
    assert score_call("API-Request: [QueryStock(stock_code='ZYXW', date='2021-06-02')]", gold,
                      databases).reason == "output mismatch"
    assert score_call("API-Request: [QueryStock(stock_code='MSFT', date='2021-06-01')]", gold,
                      databases).reason == "has exception"
    assert score_call("API-Request: [Wiki(keyword='ZYXW')]", gold, databases).reason == "API name mismatch"
    assert score_call("I think the price is 41.5", gold, databases).reason == "no API call"
    assert score_call("[QueryStock(code='ZYXW')]", gold, databases).reason == "invalid call"


def test_agenda_check_accepts_a_close_content(databases):
    call = {"token": "tk1ada0000fixture1", "content": "Lunch with the team", "time": "2023-05-01 12:00:00",
            "location": "cafe"}
    gold = _gold(ToolSession(databases), "AddAgenda", call)
    close = format_call("AddAgenda", {**call, "content": "Lunch with team"})  # Jaccard 3/4 > 0.5
    far = format_call("AddAgenda", {**call, "content": "Team lunch"})
    assert score_call(close, gold, databases).correct and not score_call(far, gold, databases).correct


# ============================================================================ the official test files

def _official_items(level: int):
    from genenv.domains.apibank.evaluator import load_api_items
    if not (OFFICIAL / "test-data").exists():
        print(f"API-Bank data not found at {OFFICIAL} (set GENENV_APIBANK_DATA): skipping")
        pytest.skip(f"API-Bank data not found at {OFFICIAL}")
    return [(item, item["gold"]) for item in load_api_items(OFFICIAL, level)]


def test_gold_calls_replayed_score_what_the_spec_measured():
    """SPEC.md 5.6: the gold calls through the upstream pipeline score 337 of 399 on level 1 and 80 of the 90
    non-ToolSearcher items on level 2, for reasons it lists one by one; ours must fail exactly those."""
    databases = load_databases(OFFICIAL / "init_database") if OFFICIAL.exists() else None
    for level, correct, failures in (
        (1, 337, {("RecordHealthData", "has exception"): 19, ("ModifyMeeting", "input mismatch"): 5,
                  ("AddMeeting", "input mismatch"): 3, ("QueryMeeting", "input mismatch"): 3,
                  ("TimedSwitch", "invalid call"): 3, ("CancelTimedSwitch", "invalid call"): 5,
                  ("ForgotPassword", "has exception"): 4, ("GetUserToken", "has exception"): 2,
                  ("RegisterUser", "has exception"): 1, ("QueryRegistration", "has exception"): 1,
                  ("QueryScene", "output mismatch"): 5, ("DeleteMeeting", "check error"): 1,
                  ("Dictionary", "unavailable offline"): 5, ("Translate", "unavailable offline"): 4,
                  ("SearchEngine", "unavailable offline"): 1}),
        (2, 80, {("RecordHealthData", "has exception"): 3, ("AddMeeting", "input mismatch"): 2,
                 ("QueryMeeting", "input mismatch"): 2, ("ModifyMeeting", "input mismatch"): 1,
                 ("DeleteMeeting", "check error"): 2, ("ToolSearcher", "unavailable offline"): 45})):
        verdicts = [(gold["api_name"], score_call(item["expected_output"], gold, databases))
                    for item, gold in _official_items(level)]
        assert sum(v.correct for _, v in verdicts) == correct, level
        assert collections.Counter((name, v.reason) for name, v in verdicts if not v.correct) == failures, level


# ============================================================================ genenv eval --benchmark api-bank

FIXTURE_DATA = FIXTURE.parent  # a hand-made dialogue and its two API and two response items, official format


def test_evaluate_level_scores_calls_and_responses():
    from genenv.domains.apibank.evaluator import evaluate_level, load_api_items

    items = load_api_items(FIXTURE_DATA, 1)
    assert [it["gold"]["api_name"] for it in items] == ["QueryStock", "QueryBalance"]

    def respond(prompts):  # the gold call for the first API item, a wrong one for the second; replies
        texts = [p[1]["content"] for p in prompts]
        return ["API-Request: [QueryStock(stock_code='ZYXW', date='2021-06-01')]" if "Generate API Request" in t
                and "balance" not in t else "API-Request: [QueryBalance(token='wrong')]" if "Generate API" in t
                else "The price of ZYXW was 41.5." for t in texts]
    result = evaluate_level(FIXTURE_DATA, 1, respond)
    assert result["gold_ceiling"]["correct"] == 2 and result["correct"] == 1
    assert result["errors"] == {"has exception": 1}
    assert result["response_items"] == 2 and 0.0 < result["rouge_l"] < 1.0
    assert [r["correct"] for r in result["items"] if r["kind"] == "api"] == [True, False]


def test_api_items_can_be_answered_apart_from_the_response_items():
    """respond_call (genenv eval's answers that stop after the call line) answers the API items alone."""
    from genenv.domains.apibank.evaluator import evaluate_level

    asked = []

    def respond_call(prompts):
        asked.append(len(prompts))
        return ["API-Request: [QueryStock(stock_code='ZYXW', date='2021-06-01')]"] * len(prompts)

    result = evaluate_level(FIXTURE_DATA, 1, lambda prompts: ["The price of ZYXW was 41.5."] * len(prompts),
                            respond_call=respond_call)
    assert asked == [2] and result["correct"] == 1 and result["errors"] == {"API name mismatch": 1}
    assert result["rouge_l"] > 0


def test_an_answer_stopped_after_its_call_line_gets_the_whole_answers_verdict():
    """genenv eval's stop for API items (StopAfterLine with extract_call), applied character by character: the
    answer it keeps parses to the call the whole answer parses to, and it is shorter wherever a finished line holds a
    call and text follows."""
    from genenv.eval_driver import StopAfterLine

    class Chars:   # one token per character of the texts below
        tokenizer = [chr(c) for c in range(128)]

        @staticmethod
        def decode_many(sequences):
            return ["".join(map(chr, ids)) for ids in sequences]

    stop = StopAfterLine(Chars(), lambda lines: extract_call(lines) is not None)
    answers = [
        "API-Request: [QueryStock(stock_code='ZYXW', date='2021-06-01')]\nThe stock price is [Other(x='1')]\n",
        "Let me check.\nAPI-Request: [QueryBalance(token='a')] and [B(y='2')]\nmore text",
        "[A(x='1')] (then [B(y='2')] later)]\n[C(z='3')]",     # the line's last ')]' ends the arguments
        "[A(x='1'\n[B(y='2')]\nmore",                          # a call cut by a newline is none
        "no call at all\nnor here",
        "[A(x='1')]",                                          # no finished line: decoded to the end
        "",
    ]
    shorter = 0
    for answer in answers:
        ids = [ord(c) for c in answer]
        kept = next((ids[:n] for n in range(1, len(ids) + 1) if stop(ids[:n])), ids)
        assert extract_call("".join(map(chr, kept))) == extract_call(answer), answer
        shorter += len(kept) < len(ids)
    assert shorter == 4


def test_rouge_l_hand_values():
    from genenv.domains.apibank.evaluator import rouge_l
    assert rouge_l("the cat sat", "the cat sat") == 1.0
    assert rouge_l("", "the cat") == 0.0 and rouge_l("...", "the cat") == 0.0
    # reference tokens {the, cat, sat, down} (m=4), prediction {the, cat} (n=2), LCS 2: R=0.5, P=1, F=2/3
    assert rouge_l("the cat", "the cat sat down") == pytest.approx(0.6667, abs=1e-4)


def test_eval_command_end_to_end_with_a_tiny_model(tiny_policy, tmp_path):
    from genenv.domains.apibank.benchmark_eval import eval_apibank

    lines = []
    scores = eval_apibank("tiny", FIXTURE_DATA, [1, 3], tmp_path, max_new_tokens=8, policy=tiny_policy,
                          log=lines.append)
    level = scores["levels"]["1"]
    assert level["api_items"] == 2 and level["gold_ceiling"]["correct"] == 2 and level["correct"] == 0
    level3 = scores["levels"]["3"]
    assert (level3["scorable_steps"], level3["gold_ceiling"]["correct"], level3["correct"]) == (5, 4, 0)
    assert "task accuracy is not scored" in lines[1]
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [(r["level"], r["kind"]) for r in rows] == [(1, "api")] * 2 + [(1, "response")] * 2 + \
        [(3, "api")] * 5 + [(3, "response")] * 2
    assert json.loads((tmp_path / "scores.json").read_text())["levels"]["1"]["correct"] == 0


# ============================================================================ the apibank co-evolution domain

def _domain(data=FIXTURE_DATA, **options):
    from genenv.domains import make_domain
    return make_domain("apibank", data=str(data), **options)


def _task_json(name, arguments, request="Please do it.", apis=None, history=()):
    return json.dumps({"apis": apis or [name], "history": list(history), "request": request,
                       "call": {"name": name, "arguments": arguments}})


def test_domain_seed_tasks_are_grounded_and_scored_by_the_apis_check():
    import numpy as np
    domain = _domain()
    seeds = domain.seed_tasks(np.random.default_rng(0), 30)
    assert len(seeds) == 30 and len({t.text for t in seeds}) == 30
    for task in seeds:
        assert domain.score(task, task.answer) == 1.0  # the gold call passes its own check
        assert domain.score(task, "API-Request: [GetToday()]" if "GetToday" not in task.answer else "no call") == 0.0
        again = domain.parse_and_validate(task.text)  # what the simulator would write, grounded again
        assert again.text == task.text and again.answer == task.answer and again.level == task.level


def test_domain_levels_follow_the_token_flow():
    domain = _domain()
    said = domain.parse_and_validate(_task_json("QueryBalance", {"token": "tk1ada0000fixture1"},
                                                apis=["QueryBalance", "GetUserToken"],
                                                history=["User: My token is tk1ada0000fixture1."]))
    carried = domain.parse_and_validate(_task_json(
        "QueryBalance", {"token": "tk1ada0000fixture1"}, apis=["QueryBalance", "GetUserToken"],
        history=["User: I am AdaTest, password ada-pw-1.",
                 "API-Request: [GetUserToken(username='AdaTest', password='ada-pw-1')]"
                 "->{'token': 'tk1ada0000fixture1'}"]))
    stock = domain.parse_and_validate(_task_json("QueryStock", {"stock_code": "ZYXW", "date": "2021-06-02"}))
    assert (stock.level, said.level, carried.level) == (1, 2, 3)
    assert stock.meta["gold"]["result"]["output"] == 43.25


@pytest.mark.parametrize("text,reason", [
    ("no json", "no JSON object"),
    ("{\"apis\": [\"QueryStock\"]", "no JSON object"),
    ("{\"apis\": [\"QueryStock\"], \"history\": []}", "missing key: request"),
    (_task_json("Dictionary", {"keyword": "apple"}), "Dictionary is unavailable offline"),
    (_task_json("Teleport", {"where": "moon"}), "unknown API 'Teleport'"),
    (_task_json("QueryStock", {"stock_code": "ZYXW"}), "missing required parameter 'date'"),
    (_task_json("QueryStock", {"stock_code": "ZYXW", "date": "2021-06-01", "x": "1"}),
     "QueryStock has no parameter 'x'"),
    (_task_json("QueryStock", {"stock_code": "ZZZ", "date": "2021-06-01"}),
     "gold call fails on a fresh state: Stock ZZZ not found"),
    (_task_json("QueryStock", {"stock_code": "ZYXW", "date": "2021-06-01"}, request=" "),
     "request must be a non-empty string"),
    (_task_json("QueryStock", {"stock_code": "ZYXW", "date": "2021-06-01"}, apis=["Calculator"]),
     "the gold call names an API that is not listed"),
    (_task_json("QueryStock", {"stock_code": 7, "date": "2021-06-01"}), "arguments must map names to strings"),
    (_task_json("Calculator", {"formula": "__import__('os').system('id')"}),
     "gold call fails on a fresh state: invalid character in formula"),
])
def test_domain_rejects_bad_simulator_output_with_a_reason(text, reason):
    result = _domain().parse_and_validate(text)
    assert type(result).__name__ == "Invalid" and result.reason == reason


def test_domain_rejects_a_copy_of_an_official_item():
    copy_of_item = _task_json("QueryStock", {"stock_code": "ZYXW", "date": "2021-06-01"},
                              request="What was the price of ZYXW on June 1st, 2021?")
    assert _domain().parse_and_validate(copy_of_item).reason == "equals an official test item"


def test_domain_never_crashes_on_arbitrary_text():
    from hypothesis import given, settings
    from hypothesis import strategies as st

    domain = _domain()
    values = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=20),
                          lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                                        max_size=4), max_leaves=12)
    keys = st.fixed_dictionaries({"apis": values, "history": values, "request": values, "call": values})

    @settings(max_examples=150, deadline=None)
    @given(st.one_of(st.text(max_size=200), keys.map(json.dumps)))
    def check(text):
        result = domain.parse_and_validate(text)
        assert type(result).__name__ in ("Task", "Invalid")
    check()


def test_domain_heldout_is_the_official_items_and_seeds_never_equal_one():
    import numpy as np

    from genenv.domains.apibank.domain import official_key
    for data in (FIXTURE_DATA, OFFICIAL):
        if not (data / "test-data").exists():
            print(f"API-Bank data not found at {data}: checking the fixture only")
            continue
        domain = _domain(data)
        heldout = domain.heldout_tasks(1000)
        assert len(heldout) == len(domain.official_items())
        assert all(t.answer.startswith("API-Request: [") for t in heldout)
        seeds = domain.seed_tasks(np.random.default_rng(0), 200) + domain.dev_tasks(10)
        held = {t.text for t in heldout}
        for task in seeds:
            data_json = json.loads(task.text)
            assert task.text not in held
            assert official_key(data_json["request"], data_json["call"]["name"],
                                data_json["call"]["arguments"]) not in domain.official_keys()
    if (OFFICIAL / "test-data").exists():  # the held-out set's own ceiling: the offline gold calls, as in eval
        heldout = _domain(OFFICIAL).heldout_tasks(1000)
        assert (len(heldout), sum(_domain(OFFICIAL).score(t, t.answer) for t in heldout)) == (389, 337)


def test_apibank_smoke_preset_runs(tmp_path):
    from genenv.coevolve import run
    from genenv.config import load_config
    from genenv.io import read_jsonl

    cfg = load_config("apibank-smoke", ["threads=1", f"domain.options.data={FIXTURE_DATA}"])
    out = run(cfg, run_dir=tmp_path / "api", log=lambda m: None)
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["epoch"] for r in rows] == [0, 1]
    assert all(r["generated"] == 4 and r["heldout_success"] is not None for r in rows)
    assert sum(r["valid"] for r in rows) + sum(sum(r["invalid_reasons"].values()) for r in rows) == 8


def test_eval_command_rejects_bad_data_and_levels_with_one_line(tmp_path, capsys):
    from genenv.cli import main
    assert main(["eval", "--benchmark", "api-bank", "--model", "tiny", "--data", str(tmp_path)]) == 2
    assert "has no init_database/" in capsys.readouterr().err
    assert main(["eval", "--benchmark", "api-bank", "--model", "tiny", "--data", str(FIXTURE_DATA), "--levels",
                 "4"]) == 2
    assert "--levels: 4 is not an API-Bank level" in capsys.readouterr().err
    assert main(["eval", "--benchmark", "api-bank", "--model", "tiny", "--levels", "one"]) == 2


# ============================================================================ level 3

def test_level3_gold_calls_replayed_score_what_the_spec_measured():
    """SPEC.md 5.6: 121 of the 131 non-ToolSearcher gold steps pass upstream (AddMeeting 5 and
    MovieRecommendations 5 fail: their list parameters arrive as strings); the 114 ToolSearcher steps need a
    retrieval model and are counted apart."""
    from genenv.domains.apibank.level3 import evaluate_level3
    if not (OFFICIAL / "test-data" / "level-3.json").exists():
        print(f"API-Bank data not found at {OFFICIAL} (set GENENV_APIBANK_DATA): skipping")
        pytest.skip(f"API-Bank data not found at {OFFICIAL}")
    result = evaluate_level3(OFFICIAL, None)
    assert (result["tasks"], result["steps"], result["scorable_steps"]) == (50, 245, 131)
    assert result["unavailable_offline_steps"] == 114 and result["sample_accuracy"] is None
    assert result["gold_ceiling"]["correct"] == 121
    assert result["gold_ceiling"]["failures"] == {"AddMeeting: input mismatch": 5,
                                                  "MovieRecommendations: has exception": 5}


def _level3_world():
    from genenv.domains.apibank.level3 import World, load_level3
    tasks, items, _ = load_level3(FIXTURE_DATA)
    return World(tasks), items


def test_level3_world_is_rebuilt_from_the_gold_chains():
    world, items = _level3_world()
    assert world.inputs["TaxCalculator"] == {"salary": "float"}
    assert world.inputs["AddMeeting"]["attendees"] == "list(str)"
    assert len(items) == 10 and [it["gold"]["api_name"] for it in items][:2] == ["ToolSearcher", "Geocoding"]
    session = world.session()
    assert session.execute("Geocoding", {"address": "Harbor Tower"})["output"] == {"latitude": 12.5,
                                                                                  "longitude": 45.25}
    unknown = session.execute("Geocoding", {"address": "Elsewhere"})
    assert unknown["output"] is None and "no entry" in unknown["exception"]


@pytest.mark.parametrize("salary, after", [("4200", 3360.0), ("999", 999.0), ("1000", 900.0), ("5000", 3500.0),
                                           ("0", 0.0)])
def test_level3_tax_bands_hand_values(salary, after):
    world, _ = _level3_world()
    assert world.session().execute("TaxCalculator", {"salary": salary})["output"] == {"salary_after_tax": after}


def test_level3_flight_search_fails_on_a_route_searched_before():
    """SPEC.md 4: FlightSearch turns the returned flights' dates into strings in place, so a later search with
    the same source and destination fails in the same file; a fresh session starts clean."""
    world, _ = _level3_world()
    session = world.session()
    args = {"source": "Port Avel", "destination": "Lindmoor", "travel_dates": "2022-03-04"}
    assert session.execute("FlightSearch", args)["exception"] is None
    assert "earlier search" in session.execute("FlightSearch", args)["exception"]
    assert world.session().execute("FlightSearch", args)["exception"] is None


def test_level3_step_verdicts():
    from genenv.domains.apibank.level3 import score_step
    world, items = _level3_world()
    gold = {it["gold"]["api_name"]: it["gold"] for it in items}
    session = world.session()
    assert score_step("API-Request: [Geocoding(address='Harbor Tower')]", gold["Geocoding"], session).correct
    cases = [("no call here", "Geocoding", "no API call"),
             ("API-Request: [ToolSearcher(keywords='weather')]", "Geocoding", "API name mismatch"),
             ("API-Request: [Geocoding(address='Harbor Tower')]", "GetWeatherForCoordinates", "API name mismatch"),
             ("API-Request: [GetWeatherForCoordinates(latitude='1.0', longitude='2.0')]", "GetWeatherForCoordinates",
              "invalid call"),
             ("API-Request: [Geocoding(place='Harbor Tower')]", "Geocoding", "invalid call"),
             ("API-Request: [Geocoding(address='Elsewhere')]", "Geocoding", "has exception"),
             ("API-Request: [Teleport(to='Mars')]", "Geocoding", "invalid call"),
             ("API-Request: [TaxCalculator(salary='4300')]", "TaxCalculator", "output mismatch"),
             ("API-Request: [ToolSearcher(keywords='Geocoding')]", "ToolSearcher", "unavailable offline")]
    for text, name, reason in cases:
        verdict = score_step(text, gold[name], session)
        assert (verdict.correct, verdict.reason) == (False, reason), text
    # AddMeeting compares the topic by word overlap (Jaccard > 0.5): a close topic passes if the rest is equal
    meeting = gold["AddMeeting"]
    close = {**meeting, "output": {**meeting["output"], "input": {**meeting["output"]["input"],
                                                                  "attendees": "Ada, Bo"}}}
    text = ("API-Request: [AddMeeting(meeting_topic='Planning', start_time='2022-03-05 10:00:00', "
            "end_time='2022-03-05 11:00:00', location='Room 4', attendees='Ada, Bo')]")
    assert score_step(text, close, session).correct
    assert not score_step(text.replace("'Planning'", "'Budget review'"), close, session).correct


def test_level3_evaluation_scores_steps_in_one_state_and_replies_without_speakers():
    from genenv.domains.apibank.level3 import evaluate_level3, strip_speakers

    assert strip_speakers("AI: It is warm. User: thanks AI:") == "It is warm.  thanks"
    answers = {"Geocoding": "API-Request: [Geocoding(address='Harbor Tower')]",
               "GetWeatherForCoordinates": "API-Request: [GetWeatherForCoordinates(latitude='12.5', longitude='45')]",
               "TaxCalculator": "API-Request: [TaxCalculator(salary='4200.0')]",
               "FlightSearch": "API-Request: [FlightSearch(source='Port Avel', destination='Lindmoor', "
                               "travel_dates='2022-03-04')]",
               "AddMeeting": "I booked it."}
    seen = []

    def respond(prompts):
        seen.append(len(prompts))
        texts = [p[1]["content"] for p in prompts]
        if "Generate AI Response" in texts[0]:
            return ["AI: At Harbor Tower it is 18.5 degrees.", ""]
        last = [t.strip().splitlines()[-2] for t in texts]  # the last gold step before the question
        return [answers[next(name for name in answers if f"'name': '{name}'" in line)] for line in last]

    result = evaluate_level3(FIXTURE_DATA, respond, rouge=lambda p, r: float(p == r))
    assert seen == [5, 2]  # ToolSearcher steps are not asked: they cannot be scored offline
    assert (result["correct"], result["scorable_steps"], result["unavailable_offline_steps"]) == (3, 5, 5)
    # (12.5, 45) is no known place: the call itself fails, as upstream's TypeError; "I booked it." has no call
    assert result["errors"] == {"invalid call": 1, "no API call": 1}
    assert result["gold_ceiling"]["correct"] == 4 and result["tasks_with_every_scorable_step_correct"] == 0
    assert result["rouge_l"] == 0.5  # the first reply equals the gold once "AI:" is stripped; the second is empty
    assert result["sample_accuracy"] is None
    assert evaluate_level3(FIXTURE_DATA, None, limit=1)["scorable_steps"] == 2


# ---------------------------------------------------------------- issue 38: parsing in linear time, digits

_SPEC_CALL = __import__("re").compile(r"\[(\w+)\((.*)\)\]")
_SPEC_ARGUMENT = __import__("re").compile(r"(\w+)\s*=\s*(?:['\"](.+?)['\"]|(\[.*\])|(\w+))")


def _spec_extract(text):
    """SPEC.md 2.3 written as its regular expressions (quadratic on long lines: the oracle for short texts)."""
    match = _SPEC_CALL.search(text)
    if match is None:
        return None
    arguments = {}
    for m in _SPEC_ARGUMENT.finditer(match.group(2)):
        key, quoted, listed, word = m.groups()
        arguments[key] = next(v for v in (quoted, listed, word) if v is not None)
    return match.group(1), arguments


def _spec_arguments(text):
    arguments = {}
    for m in _SPEC_ARGUMENT.finditer(text):
        key, quoted, listed, word = m.groups()
        arguments[key] = next(v for v in (quoted, listed, word) if v is not None)
    return arguments


def test_the_linear_parser_agrees_with_the_specs_regular_expressions():
    """50,000 random texts over the characters the syntax cares about (and a superscript digit, a non-breaking
    space, a newline): the same call and arguments as SPEC.md's regular expressions."""
    import numpy as np
    alphabet = list("[]()='\"_ ,\n\xa0\u00b9ab1") + ["API-Request: ", "key", " = "]
    rng = np.random.default_rng(0)
    for _ in range(50_000):
        text = "".join(alphabet[i] for i in rng.integers(len(alphabet), size=int(rng.integers(0, 30))))
        parsed = extract_call(text)
        assert (None if parsed is None else (parsed.name, parsed.arguments)) == _spec_extract(text), repr(text)
        assert parse_arguments(text) == _spec_arguments(text), repr(text)


def test_long_responses_parse_to_what_the_spec_says():
    """Inputs on which the regexes took minutes (benchmarks/apibank_parsing.py times both): 200k characters each,
    parsed to the values SPEC.md 2.3 gives, by hand."""
    word = "a" * 200_000
    parsed = extract_call(f"API-Request: [F({word})]")
    assert parsed.name == "F" and parsed.arguments == {}
    assert extract_call("[F(" + "k='" * 70_000 + ")]").arguments == {"k": "k="}
    assert extract_call("[a(" * 70_000) is None
    assert parse_arguments("x=[" * 70_000) == {}
    assert parse_arguments("x=[" * 70_000 + "]") == {"x": "[" + "x=[" * 69_999 + "]"}
    assert parse_arguments(word + "=" + word) == {word: word}


def test_digits_python_cannot_convert_are_a_wrong_call_not_a_crash(databases):
    """'¹' passes str.isdigit() but int() raises: a wrong call with its reason (it ended a run before). Digits of
    other scripts that Python converts stay what the original scores them: correct values."""
    from genenv.domains.apibank.tools import convert
    for declared in ("int", "float"):
        with pytest.raises(CallError, match="invalid parameter type room_count"):
            convert("\u00b9", declared, "room_count")
    assert convert("\u0663", "int", "n") == 3 and convert("1\u0663.5", "float", "x") == 13.5


def test_the_task_shape_holds_every_task_the_domain_writes_and_excludes_what_a_grammar_can():
    """API-Bank's schema (issue 57): every seed and simulator-corpus task has it; it excludes the rejections a
    grammar can exclude before a token is sampled (an invented or unoffered API, a parameter the API does not
    declare, a required one missing, a value that is not a string or is past its cap, malformed JSON, a history line
    without its speaker, a value outside its parameter's shape: a stock the database lacks, a date in another
    format) and leaves to validate what needs the domain's state."""
    import numpy as np

    from genenv.domain_check import shape_problem
    domain = _domain()
    shape = domain.task_shape()
    rng = np.random.default_rng(0)
    tasks = domain.seed_tasks(rng, 60) + [task for _, _, task in domain.simulator_corpus(rng, 60)]
    assert [t.text for t in tasks if shape_problem(shape, t.text)] == []
    name = "QueryStock"
    assert shape_problem(shape, _task_json(name, {"stock_code": "ZYXW", "date": "2021-06-01"})) is None
    for text in (_task_json("MadeUpAPI", {}), _task_json(name, {"stock_code": "AAPL", "date": "2021-06-01"}),
                 _task_json(name, {"stock_code": "ZYXW", "date": "June 1st"}),
                 _task_json(name, {"stock_code": "ZYXW", "date": "2021-06-01", "x": "1"}),
                 _task_json(name, {"date": "2021-06-01"}), _task_json(name, {"stock_code": 7, "date": "2021-06-01"}),
                 _task_json(name, {"stock_code": "ZYXW", "date": "2021-06-01"})[:-2],
                 _task_json(name, {"stock_code": "ZYXW", "date": "2021-06-01"}, history=["Bob: hi"]),
                 _task_json(name, {"stock_code": "A" * 401, "date": "2021-06-01"})):
        assert shape_problem(shape, text), text
        assert isinstance(domain.parse_and_validate(text), type(domain.parse_and_validate("")))   # Invalid too
    offered = set(domain.offered_apis())
    assert name in offered and not any(REGISTRY[n].needs_network for n in offered)
    # what needs the domain's state passes the shape and is left to validate: the call fails on a fresh state
    failing = _task_json(name, {"stock_code": "ZYXW", "date": "2021-07-01"})  # a day without a price
    assert shape_problem(shape, failing) is None and domain.parse_and_validate(failing).reason


# ============================================================================ value shapes (issue 57)

def _runs(databases, name, arguments) -> bool:
    return ToolSession(databases).execute(name, arguments)["exception"] is None


def _in_shape(shape: dict, value: str) -> bool:
    import re
    if "enum" in shape:
        return value in shape["enum"]
    return re.search(shape["pattern"], value) is not None


def test_value_shapes_offer_what_runs_and_refuse_what_fails(databases):
    """Each shape against the hand-made databases: the values it offers run, the ones it refuses fail on a fresh
    state (other spellings aside, which the shapes' comment names)."""
    from genenv.domains.apibank.tools import value_shape
    token = value_shape(REGISTRY["AddAgenda"], "token", databases)
    assert token == {"enum": ["tk1ada0000fixture1", "tk2ben0000fixture2"]}
    assert value_shape(REGISTRY["QueryBalance"], "token", databases) == {"enum": ["tk1ada0000fixture1"]}
    assert not _runs(databases, "QueryBalance", {"token": "tk2ben0000fixture2"})  # Ben has no bank account
    assert value_shape(REGISTRY["QueryStock"], "stock_code", databases) == {"enum": ["ZYXW", "zyxw"]}
    assert _runs(databases, "QueryStock", {"stock_code": "zyxw", "date": "2021-06-02"})
    assert not _runs(databases, "QueryStock", {"stock_code": "ZYXV", "date": "2021-06-02"})
    time = value_shape(REGISTRY["AddAgenda"], "time", databases)
    agenda = {"token": "tk1ada0000fixture1", "content": "Dentist", "location": "Town"}
    for value, runs in (("2023-09-12 14:00:00", True), ("2023-09-12", False), ("14:00 on 2023-09-12", False),
                        ("2023-09-12T14:00:00", False)):
        assert _in_shape(time, value) == runs == _runs(databases, "AddAgenda", {**agenda, "time": value}), value
    assert not _runs(databases, "AddAgenda", {**agenda, "time": "2023-09-12 14:00:00", "token": "tk3nobody"})
    # a query checks a time only when one is given: empty is offered
    assert _in_shape(value_shape(REGISTRY["QueryAgenda"], "time", databases), "")
    assert not _in_shape(value_shape(REGISTRY["QueryAgenda"], "time", databases), "noon")
    # a number is digits; a database this folder lacks leaves the value a plain string
    assert value_shape(REGISTRY["BookHotel"], "room_count", databases) == {"pattern": "^[0-9]+$"}
    assert value_shape(REGISTRY["Wiki"], "keyword", databases) == {}


def test_value_shapes_refuse_no_official_gold_call_that_runs():
    """Every gold call of the official level-1 test file that runs on a fresh state lies inside its API's value
    shapes, so the grammar takes nothing from the benchmark's own distribution; a value swapped for an unknown
    one in a looked-up parameter fails to run."""
    from genenv.domains.apibank.tools import value_shape
    items = _official_items(1)
    databases = load_databases(OFFICIAL / "init_database")
    checked = swapped = 0
    for item, _ in items:
        call = extract_call(item["expected_output"])
        tool = REGISTRY.get(call.name)
        if tool is None or tool.needs_network:
            continue
        try:
            if not _runs(databases, call.name, call.arguments):
                continue
        except CallError:
            continue
        for key, value in call.arguments.items():
            shape = value_shape(tool, key, databases)
            if shape:
                assert _in_shape(shape, value), (call.name, key, value)
                checked += 1
            if "enum" in shape:
                assert not _runs(databases, call.name, {**call.arguments, key: "zz unknown zz"}), (call.name, key)
                swapped += 1
    assert checked > 300 and swapped > 100, (checked, swapped)

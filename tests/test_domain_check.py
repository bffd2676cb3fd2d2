"""The domain properties on untrusted text (issue 38), for every registered domain and the sorting example:
hypothesis feeds arbitrary text to the checker's property functions, and ``genenv check-domain`` runs them as a
plugin author would."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from genenv.domain_check import (
    agent_response_problem,
    check_domain,
    null_response_problem,
    null_responses,
    simulator_text_problem,
)
from genenv.domains import make_domain

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared" / "data"
TRAVEL_WORLD = ROOT / "tests" / "data" / "travel-world"
sys.path.insert(0, str(ROOT / "examples"))

DOMAINS = {
    "addition": {}, "addition-digits": {"reward": "digits"}, "multihop": {}, "multihop-f1": {"reward": "f1"},
    "household": {}, "toolcall": {}, "travel": {"data": str(TRAVEL_WORLD), "max_candidates": 2},
    "apibank": {"data": str(SHARED / "api-bank")}, "sorting_domain:SortingDomain": {},
}


def _domain(key):
    name = key.split("-")[0] if ":" not in key else key
    if name == "apibank" and not (SHARED / "api-bank").exists():
        pytest.skip(f"API-Bank data not at {SHARED / 'api-bank'} (the benchmark data is not in the repository)")
    return make_domain(name, **DOMAINS[key])


_CACHE: dict = {}


def _cached(key):
    if key not in _CACHE:
        domain = _domain(key)
        _CACHE[key] = (domain, domain.seed_tasks(np.random.default_rng(0), 4))
    return _CACHE[key]


TEXT = st.one_of(st.text(max_size=200), st.text(alphabet="[]{}()=:'\",0123456789abc \n\u00b9\u0663", max_size=80))


@pytest.mark.parametrize("key", list(DOMAINS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=TEXT, pick=st.integers(0, 3))
def test_arbitrary_text_never_raises_and_stays_in_range(key, text, pick):
    domain, seeds = _cached(key)
    assert simulator_text_problem(domain, text) is None
    task = seeds[pick % len(seeds)]
    assert agent_response_problem(domain, task, text) is None
    assert agent_response_problem(domain, task, (task.answer or "") + text) is None


@pytest.mark.parametrize("key", list(DOMAINS))
def test_the_whole_check_passes_and_null_responses_earn_nothing(key):
    domain, seeds = _cached(key)
    report = check_domain(domain, examples=300)
    assert report.ok, report.summary()
    assert report.counts["null_response"] > 0 and report.counts["seed_round_trip"] > 0
    if ":" not in key:   # every built-in domain declares the shape of its tasks (issue 57), its seeds have it
        assert report.counts["task_shape"] == report.counts["seed_round_trip"] > 0
    for task in seeds:
        for response in null_responses(task, domain.reset(task, seed=0)[1]):
            assert null_response_problem(domain, task, response) is None


BROKEN = '''
from sorting_domain import SortingDomain, Invalid

class TrustsIsdigit(SortingDomain):
    def parse_task(self, text):
        parts = text.strip().split(" ")
        if not all(len(p) == 1 and p.isdigit() for p in parts) or not 2 <= len(parts) <= 6:
            return Invalid("not 2-6 single digits", text)
        return self.make_task([int(p) for p in parts])

class PaysEcho(SortingDomain):
    def score(self, task, response):
        return 0.5 if response.strip() else 0.0

class NoReason(SortingDomain):
    def parse_task(self, text):
        result = super().parse_task(text)
        return Invalid("", text) if isinstance(result, Invalid) else result
'''


@pytest.mark.parametrize("cls, prop", [("TrustsIsdigit", "simulator_text: parse_task raised ValueError"),
                                       ("PaysEcho", "null_response: a null response scored 0.5"),
                                       ("NoReason", "simulator_text: parse_task returned an Invalid without a reason")])
def test_check_domain_names_the_first_property_that_fails(tmp_path, cls, prop):
    (tmp_path / "broken_domains.py").write_text(BROKEN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "examples")])}
    done = subprocess.run([sys.executable, "-m", "genenv.cli", "check-domain", f"broken_domains:{cls}"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert prop in done.stdout.splitlines()[0] and "example:" in done.stdout


def test_check_domain_passes_the_sorting_example_with_a_one_line_summary():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "examples")}
    done = subprocess.run([sys.executable, "-m", "genenv.cli", "check-domain", "sorting_domain:SortingDomain"],
                          capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0 and done.stdout.count("\n") == 1 and "every property holds" in done.stdout


def _old_has_content(plan) -> bool:   # travel's content test before issue 58: any non-blank string but "-"
    keys = ("current_city", "transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")
    return any(isinstance(day, dict) and any(str(day.get(key) or "").strip() not in ("", "-") for key in keys)
               for day in (plan or []))


@pytest.mark.parametrize("key, prop, undo", [
    # each row puts back the code before issue 58's fix (the guard it added, switched off) and the stronger
    # check must name the defect an outside fuzz found
    # (issue 93's trip gate, which also pays a plan of "." nothing, switched off with it)
    ("travel", "null_in_format: a null response scored",
     [("genenv.domains.travel.constraints.usable_share", lambda plan, query, sandbox: float(_old_has_content(plan))),
      ("genenv.domains.travel.constraints.travels_the_query", lambda query, days, sandbox: True)]),
    ("travel", "wrong_json_types: validate raised TypeError",
     [("genenv.domains.travel.solver.local_type_problem", lambda local: None)]),
    ("toolcall", "wrong_json_types: validate raised TypeError",
     [("genenv.domains.toolcall.domain._schema_type_problem", lambda name, properties, required: None)]),
])
def test_the_stronger_check_finds_the_defects_the_old_code_had(monkeypatch, key, prop, undo):
    """Issue 58: check-domain passed every domain while travel paid plans with nothing real in them (0.44-0.56) and
    travel's and toolcall's validate raised on JSON of the wrong type; null responses inside the answer format and
    type confusion inside well-formed tasks find all three, and the fixed code passes (the test above)."""
    domain, _ = _cached(key)
    for target, value in undo:
        monkeypatch.setattr(target, value)
    report = check_domain(domain, examples=300)
    assert not report.ok and any(str(f).startswith(prop) for f in report.failures), report.summary()


def test_formatted_null_responses_and_type_confusion_by_hand():
    from genenv.domain_check import formatted_null_responses, json_part, type_confused_texts
    from genenv.domains import Task

    class Plans:
        def warmstart_examples(self, task):
            return [([], task.prompt, 'plan: [{"city": "Rome", "n": 2}, {"city": "Oslo"}]')]

    made = formatted_null_responses(Plans(), Task("t", "p", None))
    assert 'plan: [{"city": ".", "n": 2}, {"city": "."}]' in made and 'plan: [{"city": "."}]' in made
    assert json_part("x 12 y") is None and json_part('a {"k": [1]} b') == ("a ", {"k": [1]}, " b")
    texts = type_confused_texts('{"a": {"b": 1}}')
    assert '{"a": {}}' in texts and '{"a": {"b": [{}]}}' in texts and '{"a": {"b": null}}' in texts
    assert len(texts) == 2 * 12 and len(type_confused_texts('{"a": {"b": 1}}', limit=5)) == 5

    class Calls:
        def warmstart_examples(self, task):
            return [([], task.prompt, "[f(a='x', b=2)]")]
    assert "[f(a='.', b=2)]" in formatted_null_responses(Calls(), Task("t", "p", "[f(a='x', b=2)]"))


def test_a_task_shape_is_a_schema_or_a_regex_and_the_check_names_what_is_wrong():
    from genenv.domain_check import shape_problem
    from genenv.domains import TaskShape
    for bad in ({}, {"regex": "a", "json_schema": {}}):
        with pytest.raises(TypeError, match="exactly one"):
            TaskShape(**bad)
    digits = TaskShape(regex=r"[0-9]{2}\+[0-9]{2}")
    assert shape_problem(digits, "12+34") is None
    assert shape_problem(digits, "12+345") and shape_problem(digits, " 12+34")   # the whole text, nothing else
    schema = TaskShape(json_schema={"type": "object", "required": ["a"], "additionalProperties": False,
                                    "properties": {"a": {"type": "array", "items": {"enum": ["x", "y"]}}}})
    assert shape_problem(schema, '{"a": ["x", "y"]}') is None
    assert shape_problem(schema, '{"a": ["x", "z"]}').startswith("at a/1: 'z' is not one of")
    assert shape_problem(schema, '{"a": [], "b": 1}').startswith("at the object: Additional properties")
    assert shape_problem(schema, '{"a": [') == "not one JSON value: JSONDecodeError"


def test_the_shape_is_checked_on_a_domains_seed_tasks_and_a_wrong_one_fails():
    """check-domain counts a declared shape's checks (none for a domain without one) and names a shape its own
    seed tasks do not have."""
    from genenv.domains import TaskShape
    addition = make_domain("addition")
    report = check_domain(addition, examples=20, tasks=30)
    assert report.ok and report.counts["task_shape"] == 30
    sorting = _domain("sorting_domain:SortingDomain")   # the example declares a regex
    assert check_domain(sorting, examples=20).counts["task_shape"] > 0

    class Shapeless(type(sorting)):   # a user's domain need not declare one
        def task_shape(self):
            return None
    assert check_domain(Shapeless(), examples=20).counts["task_shape"] == 0

    class Narrow(type(addition)):
        def task_shape(self):
            return TaskShape(regex=r"0[0-9]{7}\+[0-9]{8}")   # misses every seed whose first digit is not 0
    report = check_domain(Narrow(), examples=20, tasks=30)
    assert report.failed["task_shape"] > 0 and str(report.failures[0]).startswith("task_shape: does not match")

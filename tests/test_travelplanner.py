"""TravelPlanner's evaluator: every constraint on a hand-made plan and on broken copies of it, the rates, and the
sandbox loader on the real tables when present (GENENV_TRAVELPLANNER_DATA or ../shared/data/travelplanner)."""

import copy
import json
import os
from pathlib import Path

import pytest

from genenv.domains.travel.constraints import (
    evaluate_plan,
    name_city,
    pass_rates,
    total_cost,
)
from genenv.domains.travel.queries import derive_train_query
from genenv.domains.travel.sandbox import Sandbox

OFFICIAL = Path(os.environ.get("GENENV_TRAVELPLANNER_DATA",
                               Path(__file__).resolve().parents[2] / "shared/data/travelplanner"))


def _restaurant(name, cuisines, cost):
    return {"Name": name, "City": "Rockford", "Cuisines": cuisines, "Average Cost": str(cost), "Aggregate Rating": "4"}


def _sandbox(minimum_nights=1):
    return Sandbox(
        accommodations=[{"NAME": "Cozy Loft", "room type": "Entire home/apt", "price": "100.0",
                         "minimum nights": str(float(minimum_nights)), "review rate number": "4.0",
                         "house_rules": "No smoking", "maximum occupancy": "2", "city": "Rockford"}],
        restaurants=[_restaurant("Blue Cafe", "Cafe, Italian", 20), _restaurant("Red Grill", "American, BBQ", 30),
                     _restaurant("Green Bowl", "Chinese", 25), _restaurant("Yellow Deli", "Cafe", 10),
                     _restaurant("Purple Pho", "Chinese", 12), _restaurant("Orange Bakery", "Bakery", 8),
                     {**_restaurant("Home Diner", "Mexican", 15), "City": "Springfield"}],
        attractions=[{"Name": "City Museum", "City": "Rockford"}, {"Name": "River Park", "City": "Rockford"}],
        distances={("Rockford", "Springfield"): {"distance": "300 km", "duration": "3 hours 5 mins"}},
        cities={"Springfield": "Illinois", "Rockford": "Illinois", "Chicago": "Illinois"},
        flights=[{"Flight Number": "F0000001", "Price": 100, "OriginCityName": "Springfield",
                  "DestCityName": "Rockford"},
                 {"Flight Number": "F0000002", "Price": 120, "OriginCityName": "Rockford",
                  "DestCityName": "Springfield"}])


QUERY = {"org": "Springfield", "dest": "Rockford", "days": 3, "visiting_city_number": 1, "people_number": 2,
         "budget": 2000, "local_constraint": {"house rule": None, "cuisine": None, "room type": None,
                                              "transportation": None}}
PLAN = [
    {"days": 1, "current_city": "from Springfield to Rockford",
     "transportation": "Flight Number: F0000001, from Springfield to Rockford, Departure Time: 08:00, "
                       "Arrival Time: 09:00",
     "breakfast": "-", "attraction": "City Museum, Rockford;", "lunch": "Blue Cafe, Rockford",
     "dinner": "Red Grill, Rockford", "accommodation": "Cozy Loft, Rockford"},
    {"days": 2, "current_city": "Rockford", "transportation": "-", "breakfast": "Green Bowl, Rockford",
     "attraction": "River Park, Rockford;", "lunch": "Yellow Deli, Rockford", "dinner": "Purple Pho, Rockford",
     "accommodation": "Cozy Loft, Rockford"},
    {"days": 3, "current_city": "from Rockford to Springfield",
     "transportation": "Flight Number: F0000002, from Rockford to Springfield, Departure Time: 18:00, "
                       "Arrival Time: 19:00",
     "breakfast": "Orange Bakery, Rockford", "attraction": "-", "lunch": "-", "dinner": "-", "accommodation": "-"},
]


def _broken(day, key, value):
    plan = copy.deepcopy(PLAN)
    plan[day][key] = value
    return plan


def _failing(result):
    return sorted(k for group in ("commonsense", "hard") for k, v in (result[group] or {}).items() if v is False)


def test_the_hand_made_plan_passes_everything_and_costs_what_hand_arithmetic_says():
    result = evaluate_plan(QUERY, PLAN, _sandbox())
    assert result["delivered"] and all(result["commonsense"].values())
    assert result["hard"] == {"Budget": True, "Room Rule": None, "Cuisine": None, "Room Type": None,
                              "Transportation": None}
    # flights 2 x (100 + 120), six meals x 2 people (20+30+25+10+12+8), the loft on 2 days (100 x ceil(2/2))
    assert total_cost(QUERY, PLAN, _sandbox()) == 440 + 210 + 200


@pytest.mark.parametrize("plan,failing", [
    (_broken(1, "current_city", "Chicago"), "Reasonable City Route"),  # (a day in Chicago: 2 cities visited)
    (_broken(1, "lunch", "Blue Cafe, Rockford"), "Diverse Restaurants"),
    (_broken(1, "attraction", "City Museum, Rockford;"), "Diverse Attractions"),
    (_broken(2, "transportation", "Self-driving, from Rockford to Springfield"), "Non-conf. Transportation"),
    (_broken(0, "accommodation", "Cozy Loft, Chicago"), "Within Current City"),
    (_broken(1, "dinner", "Nowhere Place, Rockford"), "Within Sandbox"),
    (_broken(1, "attraction", "-"), "Complete Information"),
])
def test_each_broken_copy_fails_its_constraint(plan, failing):
    query = {**QUERY, "visiting_city_number": 2} if failing == "Reasonable City Route" else QUERY
    result = evaluate_plan(query, plan, _sandbox())
    assert result["commonsense"][failing] is False
    if failing in ("Reasonable City Route", "Diverse Restaurants", "Diverse Attractions", "Non-conf. Transportation"):
        assert _failing(result) == [failing]  # nothing else breaks
    if failing in ("Within Sandbox", "Complete Information"):
        assert result["hard"] is None  # hard constraints run only on complete plans inside the sandbox


def test_minimum_nights_fails_a_stay_shorter_than_the_rule():
    assert _failing(evaluate_plan(QUERY, PLAN, _sandbox(minimum_nights=3))) == ["Minimum Nights Stay"]
    assert _failing(evaluate_plan(QUERY, PLAN, _sandbox(minimum_nights=2))) == []


def _with(**local):
    return {**QUERY, "local_constraint": {**QUERY["local_constraint"], **local}}


@pytest.mark.parametrize("query,name,verdict", [
    ({**QUERY, "budget": 849}, "Budget", False), ({**QUERY, "budget": 850}, "Budget", True),
    (_with(**{"house rule": "smoking"}), "Room Rule", False), (_with(**{"house rule": "pets"}), "Room Rule", True),
    (_with(cuisine=["Chinese", "Bakery"]), "Cuisine", True), (_with(cuisine=["Mexican"]), "Cuisine", False),
    (_with(**{"room type": "private room"}), "Room Type", False),
    (_with(**{"room type": "entire room"}), "Room Type", True),
    (_with(**{"room type": "not shared room"}), "Room Type", True),
    (_with(transportation="no flight"), "Transportation", False),
    (_with(transportation="no self-driving"), "Transportation", True),
])
def test_hard_constraints(query, name, verdict):
    assert evaluate_plan(query, PLAN, _sandbox())["hard"][name] is verdict


def test_cuisine_skips_the_rest_of_a_day_after_a_meal_in_the_origin():
    plan = _broken(2, "breakfast", "Home Diner, Springfield")
    plan[1]["breakfast"] = "Home Diner, Springfield"  # day 2: the origin first, so Green Bowl is never looked at
    plan[1]["lunch"], plan[1]["dinner"] = "Green Bowl, Rockford", "Purple Pho, Rockford"
    result = evaluate_plan(_with(cuisine=["Mexican"]), plan, _sandbox())
    assert result["hard"]["Cuisine"] is False  # Home Diner is Mexican, but meals in the origin are skipped


def test_name_city_parsing_and_attractions_need_their_semicolon():
    assert name_city("Dial A Cake, Rockford(Illinois)") == ("Dial A Cake", "Rockford")
    assert name_city("no comma") == ("-", "-")
    plan = _broken(1, "attraction", "Nowhere Land, Rockford")  # no trailing ";": ignored by every check
    assert evaluate_plan(QUERY, plan, _sandbox())["commonsense"]["Within Sandbox"] is True


def test_pass_rates_by_hand():
    sandbox = _sandbox()
    results = [evaluate_plan(QUERY, PLAN, sandbox), evaluate_plan(QUERY, _broken(1, "lunch", "Blue Cafe, Rockford"),
                                                                  sandbox), evaluate_plan(QUERY, [], sandbox)]
    rates = pass_rates(results)
    assert rates["delivery"] == pytest.approx(2 / 3)
    assert rates["commonsense_micro"] == pytest.approx((8 + 7) / 24)
    assert rates["commonsense_macro"] == pytest.approx(1 / 3) and rates["final"] == pytest.approx(1 / 3)
    assert rates["hard_micro"] == 1.0 and rates["hard_macro"] == pytest.approx(2 / 3)


def test_the_real_tables_load_as_the_spec_counts():
    if not (OFFICIAL / "database").exists():
        print(f"TravelPlanner data not found at {OFFICIAL} (set GENENV_TRAVELPLANNER_DATA): skipping")
        pytest.skip(f"TravelPlanner data not found at {OFFICIAL}")
    sandbox = Sandbox.load(OFFICIAL)
    assert len(sandbox.accommodations) == 4285 and len(sandbox.cities) == 312
    assert len(sandbox.flights) == 313 and sandbox.flight("F3573659", "St. Petersburg", "Rockford")["Price"] == 474


def _train_items():
    """The 45 training queries: their text and gold plan (a Python literal in the fine-tuning file)."""
    import ast
    path = OFFICIAL / "finetuning_data" / "std_travelplanner.jsonl"
    if not path.exists():
        print(f"TravelPlanner data not found at {OFFICIAL} (set GENENV_TRAVELPLANNER_DATA): skipping")
        pytest.skip(f"TravelPlanner data not found at {OFFICIAL}")
    items = []
    for line in path.read_text().splitlines():
        messages = json.loads(line)["messages"]
        items.append((messages[1]["content"].split("Query:")[-1].strip(), ast.literal_eval(messages[2]["content"])))
    return items


def test_the_45_training_gold_plans_pass_every_commonsense_check_and_the_budget():
    items = _train_items()
    sandbox = Sandbox.load(OFFICIAL)
    failures = []
    for index, (text, plan) in enumerate(items):
        query = derive_train_query(text, plan, sandbox)
        result = evaluate_plan(query, plan, sandbox)
        if not all(result["commonsense"].values()) or result["hard"] is None or not result["hard"]["Budget"]:
            failures.append((index, _failing(result), query))
    assert len(items) == 45 and failures == []


def test_plans_are_read_from_model_text_without_running_it():
    from genenv.domains.travel.constraints import parse_plan
    assert parse_plan("Here it is: " + repr(PLAN) + " Enjoy!") == PLAN
    assert parse_plan('[{"days": 1, "current_city": "Rockford"}]') == [{"days": 1, "current_city": "Rockford"}]
    for bad in ("", "no plan", "[{'days': 1,", "[__import__('os').system('id')]", "[1, 2]", None, "[" * 5000):
        assert parse_plan(bad) is None


FIXTURE = Path(__file__).parent / "data" / "travelplanner"  # hand-made tables and queries, official layout


def test_fixture_tables_load_like_the_real_ones():
    sandbox = Sandbox.load(FIXTURE)
    assert [row["NAME"] for row in sandbox.accommodations] == ["Cozy Loft"]  # the row with an empty cell is dropped
    assert [row["Flight Number"] for row in sandbox.flights] == ["F0000001", "F0000002"]
    assert sandbox.distance_cost("Springfield(Illinois)", "Rockford", "self-driving") == 15
    assert sandbox.distance_cost("Springfield", "Rockford", "taxi") == 300
    assert sandbox.distance_cost("Springfield", "Chicago", "taxi") is None
    assert evaluate_plan(QUERY, PLAN, sandbox)["commonsense"] == evaluate_plan(QUERY, PLAN, _sandbox())["commonsense"]


def test_structured_queries_load_with_clear_errors(tmp_path):
    from genenv.domains.travel.queries import load_queries
    items = load_queries(FIXTURE / "queries.jsonl")
    assert items[0]["query"]["local_constraint"]["house rule"] == "pets"
    assert "F0000001" in items[0]["messages"][1]["content"]
    bad = tmp_path / "q.jsonl"
    bad.write_text(json.dumps({"org": "A"}) + "\n")
    with pytest.raises(ValueError, match=r"q.jsonl:1: missing field 'dest'"):
        load_queries(bad)


def test_eval_scores_a_scripted_planner_and_a_tiny_model(tiny_policy, tmp_path, monkeypatch):
    import genenv.eval_driver as benchmarking
    from genenv.domains.travel.benchmark_eval import eval_travelplanner

    # a planner that writes the hand-made plan: the first query (budget 2,000) passes, the second (100) fails
    monkeypatch.setattr(benchmarking, "greedy_responses", lambda policy, prompts, *a: [repr(PLAN)] * len(prompts))
    scores = eval_travelplanner("scripted", FIXTURE, str(FIXTURE / "queries.jsonl"), tmp_path / "s", policy=object(),
                                log=lambda m: None)
    assert (scores["delivery"], scores["commonsense_macro"], scores["final"]) == (1.0, 1.0, 0.5)
    assert scores["hard_micro"] == pytest.approx(3 / 4)  # budget twice, room rule (pets) twice: one budget fails
    monkeypatch.undo()
    scores = eval_travelplanner("tiny", FIXTURE, str(FIXTURE / "queries.jsonl"), tmp_path / "t", policy=tiny_policy,
                                max_new_tokens=8, log=lambda m: None)
    rows = [json.loads(line) for line in (tmp_path / "t" / "results.jsonl").read_text().splitlines()]
    assert scores["n"] == 2 and len(rows) == 2 and scores["delivery"] == sum(r["delivered"] for r in rows) / 2

"""TravelPlanner as a co-evolution domain: the agent writes a day-by-day travel plan from a structured query and
its reference information (TravelPlanner's sole-planning mode); the benchmark's own evaluator scores it
(:mod:`genenv.domains.travel`).

A task is a structured query, one JSON object (the simulator writes the same)::

    {"org": "St. Louis", "dest": "California", "days": 7, "people_number": 2, "budget": 6200,
     "local_constraint": {"house rule": "pets", "cuisine": ["Chinese"], "room type": null, "transportation": null}}

``dest`` is a city for 3-day trips and a state for 5- and 7-day ones (1, 2 or 3 cities visited, as in
TravelPlanner). Grounding (the simulator proposes, the domain decides): the fields are checked (known cities and
states, 3/5/7 days, 1-8 people, the local constraints' vocabularies) and the sandbox is searched for a plan that
passes every commonsense and hard constraint within the budget (:func:`solver.solve`); a malformed or infeasible
query is rejected with the reason ("the cheapest plan found costs $1,460, over the budget of $900"). The plan
found is the task's answer (the warm start imitates it) and its cities decide the reference information: the
legs' flights, self-driving and taxi costs, and for each city the cheapest accommodations, restaurants and its
attractions, always including the plan's own, so a plan that passes exists within what the agent is shown.

The agent answers with the plan as a JSON list of day objects (TravelPlanner's format). Reward (``reward``):
``micro`` (default) is the share of the query's constraint checks that pass (8 commonsense + the budget + each
local constraint; hard checks that did not run because the plan is incomplete or leaves the sandbox count as
failed), so it is 1 exactly when the plan passes everything: the final pass is the success; ``final`` is that
pass alone (0 or 1). Level: 1 + TravelPlanner's difficulty (easy 0, medium 1, hard 2: one or several local
constraints) + (days - 3) / 2, so 1 (easy, 3 days) to 5 (hard, 7 days).

Seed tasks: the 45 training queries (structured fields derived from their gold plans) and procedural queries of
levels 1-2; held-out and dev sets: procedural queries of every level from their own seeds, never trained on,
plus, with ``heldout_queries``, a JSON Lines file of structured queries in the official format (the validation
set's, when a user has its fields) grounded the same way.

Options: ``data`` (the TravelPlanner data folder, default ``$GENENV_TRAVELPLANNER_DATA``), ``reward``,
``max_candidates`` (rows per city and category in the reference information), ``train_seeds`` (use the 45
training queries as seeds), ``heldout_queries``, ``max_people``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import string
from pathlib import Path

from genenv.domains.base import Invalid, LeveledDomain, Task, TaskShape, WarmStartKey, folder_fingerprint, register
from genenv.domains.jsontask import parse_json_object, stated_rate
from genenv.domains.travel import constraints as checks
from genenv.domains.travel import queries, solver
from genenv.domains.travel import sandbox as sandbox_module
from genenv.domains.travel.sandbox import Sandbox
from genenv.domains.travel.solver import CITIES_FOR_DAYS, CUISINES, LOCAL_KEYS, ROOM_TYPES, TRANSPORT_RULES

DATA_ENV = "GENENV_TRAVELPLANNER_DATA"
QUERY_KEYS = ("org", "dest", "days", "people_number", "budget")
FORMAT_WORDS = ("days", "current_city", "transportation", "breakfast", "attraction", "lunch", "dinner",
                "accommodation", "from", "to", "Flight", "Number:", "Self-driving,", "Taxi,", "Departure", "Arrival",
                "Time:", "duration:", "distance:", "cost:", "hours", "mins", "km", "org", "dest", "people_number",
                "budget", "local_constraint", "house", "rule", "cuisine", "room", "type", "null")


def trip_level(query: dict) -> int:
    return 1 + min(solver.constraint_count(query), 2) + (int(query["days"]) - 3) // 2


def query_text(query: dict) -> str:
    """The request in words, from the structured fields (every field the checks use is stated)."""
    people = query["people_number"]
    who = "1 person" if people == 1 else f"{people} people"
    where = (f"to {query['dest']}" if query["days"] == 3 else
             f"visiting {CITIES_FOR_DAYS[query['days']]} cities in {query['dest']}")
    parts = [f"Plan a {query['days']}-day trip for {who} from {query['org']} {where}, "
             f"with a budget of ${query['budget']:,}."]
    local = solver.local_constraints(query)
    if local["house rule"]:
        parts.append(f"Our accommodation must allow {local['house rule']}.")
    if local["room type"]:
        parts.append(f"We want {'an' if local['room type'].startswith('entire') else 'a'} {local['room type']}.")
    if local["cuisine"]:
        parts.append(f"We want to try {', '.join(local['cuisine'])} cuisine.")
    if local["transportation"]:
        parts.append(f"Transportation: {local['transportation']}.")
    return " ".join(parts)


def canonical(query: dict) -> dict:
    return {"org": query["org"], "dest": query["dest"], "days": query["days"],
            "people_number": query["people_number"], "budget": query["budget"],
            "local_constraint": solver.local_constraints(query)}


@register("travel")
class TravelDomain(LeveledDomain):
    alphabet = string.printable
    agent_max_new_tokens = 1024
    env_max_new_tokens = 192
    # the evaluator and the solver shape tasks and rewards
    warm_start_key = WarmStartKey(simulator_only_options=("variation_span",),
                                  location_options=("data", "heldout_queries"),
                                  code_modules=(checks, solver, sandbox_module))
    seed_levels = [1, 2]
    heldout_seed, dev_seed = 41, 42

    def __init__(self, data: str | None = None, reward: str = "micro", max_candidates: int = 5,
                 train_seeds: bool = True, heldout_queries: str | None = None, max_people: int = 4):
        if reward not in ("micro", "final"):
            raise TypeError(f"reward must be 'micro' or 'final', got {reward!r}")
        data = data if data is not None else os.environ.get(DATA_ENV)
        if data is None:
            raise TypeError(f"data: give the folder of the TravelPlanner data (with database/), or set {DATA_ENV}")
        try:
            self.sandbox = Sandbox.load(data)
        except (ValueError, OSError) as error:
            raise TypeError(str(error).replace("--data", "data")) from None
        self.folder, self.reward = Path(data), reward
        self.max_candidates, self.train_seeds, self.max_people = int(max_candidates), bool(train_seeds), int(max_people)
        self.heldout_queries = heldout_queries
        names = [row[key] for table, key in ((self.sandbox.accommodations, "NAME"), (self.sandbox.restaurants, "Name"),
                                             (self.sandbox.attractions, "Name")) for row in table]
        self.alphabet = string.printable + "".join(sorted({c for name in names for c in name} - set(string.printable)))
        self.tiny_words = FORMAT_WORDS + tuple(sorted({w for city in self.sandbox.cities for w in city.split()}))
        self.stay_cities = solver.stay_cities(self.sandbox)
        by_state: dict[str, list[str]] = {}
        for city in self.stay_cities:
            by_state.setdefault(self.sandbox.cities[city], []).append(city)
        self.states = {k: sorted(s for s, cities in by_state.items() if len(cities) >= k) for k in (1, 2, 3)}
        self.heldout_skipped: dict[str, int] = {}

    def data_fingerprint(self) -> str:
        fingerprint = folder_fingerprint(self.folder, ("database", "finetuning_data"))
        if self.heldout_queries:
            fingerprint += hashlib.sha256(Path(self.heldout_queries).read_bytes()).hexdigest()[:16]
        return fingerprint

    def levels(self):
        return [1, 2, 3, 4, 5]

    # -------------------------------------------------------------- tasks
    def make_task(self, query: dict, solution: solver.Solution | None = None) -> Task | Invalid:
        """Ground a structured query: its reference information and a plan that passes, or the reason."""
        if solution is None:
            solution = solver.solve(query, self.sandbox)
            if isinstance(solution, str):
                return Invalid(solution, "")
        query = canonical(query)
        full = {**query, "visiting_city_number": CITIES_FOR_DAYS[query["days"]]}
        prompt = (f"{queries.PLANNER_INSTRUCTION}\nGiven information:\n{self.reference(full, solution)}\n"
                  f"Query: {query_text(full)}\nTravel Plan:\n")
        return Task(json.dumps(query), prompt, json.dumps(solution.plan), trip_level(query),
                    meta={"query": full, "cities": solution.cities, "cost": solution.cost,
                          "difficulty": solver.level_name(query)})

    def reference(self, query: dict, solution: solver.Solution) -> str:
        """The reference information: every leg's transport options, then each city's cheapest accommodations
        and restaurants and first attractions (the plan's own always among them)."""
        sandbox, lines = self.sandbox, ["Transportation:"]
        route = [query["org"], *solution.cities, query["org"]]
        for start, end in zip(route, route[1:]):
            for row in sorted((r for r in sandbox.flights if r["OriginCityName"] == start
                               and r["DestCityName"] == end), key=lambda r: (float(r["Price"]), r["Flight Number"])):
                lines.append(f"Flight {row['Flight Number']} from {start} to {end}, ${row['Price']} per person, "
                             f"{row['DepTime']}-{row['ArrTime']}")
            distance = sandbox.distances.get((start, end))
            driving = sandbox.distance_cost(start, end, "self-driving")
            if driving is not None:
                lines.append(f"Self-driving from {start} to {end}: {distance['distance']}, {distance['duration']}, "
                             f"${driving} per car of 5")
                lines.append(f"Taxi from {start} to {end}: ${sandbox.distance_cost(start, end, 'taxi')} per taxi of 4")
        used_names = {checks.name_city(day[key])[0] for day in solution.plan
                      for key in checks.MEALS + ("accommodation",) if checks.filled(day[key])}
        used_names |= {checks.name_city(item)[0] for day in solution.plan
                       for item in checks.attraction_items(day["attraction"])}
        for city in solution.cities:
            rooms = sorted(sandbox.rows_in("accommodations", city), key=lambda r: float(r["price"]))
            lines.append(f"Accommodations in {city} (name | room type | price per night | max occupancy | "
                         "minimum nights | house rules):")
            for row in self._pick(rooms, "NAME", used_names):
                lines.append(f"{row['NAME']} | {row['room type']} | ${float(row['price']):.0f} | "
                             f"{int(float(row['maximum occupancy']))} | {int(float(row['minimum nights']))} | "
                             f"{row['house_rules']}")
            restaurants = sorted(sandbox.rows_in("restaurants", city), key=lambda r: float(r["Average Cost"]))
            lines.append(f"Restaurants in {city} (name | cuisines | average cost per person):")
            for row in self._pick(restaurants, "Name", used_names, at_least=3):
                lines.append(f"{row['Name']} | {row['Cuisines']} | ${row['Average Cost']}")
            lines.append(f"Attractions in {city}:")
            lines += [row["Name"] for row in self._pick(sandbox.rows_in("attractions", city), "Name",
                                                          used_names)]
        return "\n".join(lines)

    def _pick(self, rows, key, used_names, at_least=1):
        """The first ``max_candidates`` rows (at least ``at_least``), plus any row the plan uses, in order."""
        keep = max(self.max_candidates, at_least)
        return [row for index, row in enumerate(rows) if index < keep or row[key] in used_names]

    def random_query(self, rng, level: int) -> dict:
        pairs = [(tier, d) for tier in range(3) for d in range(3) if tier + d == level - 1]
        tier, d = pairs[int(rng.integers(len(pairs)))]
        days = 3 + 2 * d
        k = CITIES_FOR_DAYS[days]
        if days == 3:
            dest = str(rng.choice(self.stay_cities))
            org = str(rng.choice([c for c in self.sandbox.cities if c != dest]))
        else:
            dest = str(rng.choice(self.states[k]))
            org = str(rng.choice([c for c, s in self.sandbox.cities.items() if s != dest]))
        local = {key: None for key in LOCAL_KEYS}
        keys = list(LOCAL_KEYS)
        for key in ([] if tier == 0 else [keys[int(rng.integers(4))]] if tier == 1 else
                    [keys[int(i)] for i in rng.choice(4, size=3, replace=False)]):
            if key == "house rule":
                local[key] = str(rng.choice(list(checks.ROOM_RULES)))
            elif key == "room type":
                local[key] = str(rng.choice(ROOM_TYPES))
            elif key == "transportation":
                local[key] = str(rng.choice(TRANSPORT_RULES))
            else:
                local[key] = [str(c) for c in rng.choice(CUISINES, size=int(rng.integers(1, 3)), replace=False)]
        return {"org": org, "dest": dest, "days": days, "people_number": int(rng.integers(1, self.max_people + 1)),
                "budget": solver.MAX_BUDGET, "local_constraint": local}

    def random_task(self, rng, level):
        """A feasible procedural query of ``level``; its budget 5-50% above the cheapest plan found, in $100s."""
        for _ in range(200):
            query = self.random_query(rng, level)
            solution = solver.solve(query, self.sandbox, widen=False)  # a quick no: draw another
            if isinstance(solution, str):
                continue
            query["budget"] = int(math.ceil(solution.cost * float(rng.uniform(1.05, 1.5)) / 100) * 100)
            return self.make_task(query, solution)
        raise RuntimeError(f"no feasible query of level {level} in 200 draws")

    def seed_tasks(self, rng, n):
        tasks = []
        if self.train_seeds and (self.folder / "finetuning_data" / "std_travelplanner.jsonl").exists():
            for item in queries.load_train(self.folder, self.sandbox):
                task = self.make_task(item["query"])
                if isinstance(task, Task):
                    tasks.append(task)
        if len(tasks) < n:  # n procedural draws; the first ones not among the training queries fill up to n
            seen = {task.text for task in tasks}
            for task in super().seed_tasks(rng, n):
                if len(tasks) >= n:
                    break
                if task.text not in seen:
                    seen.add(task.text)
                    tasks.append(task)
        return tasks[:n]

    def heldout_tasks(self, per_level):
        tasks = super().heldout_tasks(per_level)
        if self.heldout_queries:
            self.heldout_skipped = {}
            for item in queries.load_queries(self.heldout_queries):
                task = self.make_task(item["query"])
                if isinstance(task, Invalid):
                    self.heldout_skipped[task.reason] = self.heldout_skipped.get(task.reason, 0) + 1
                else:
                    tasks.append(task)
        return tasks

    def task_query(self, task: Task) -> dict:
        """The task's structured query with its visiting_city_number (kept in ``meta``; else read from its text)."""
        if task.meta.get("query"):
            return task.meta["query"]
        query = json.loads(task.text)
        return {**query, "visiting_city_number": CITIES_FOR_DAYS[query["days"]]}

    def difficulty(self, task):
        query = self.task_query(task)
        return float(trip_level(query)) + 0.1 * solver.constraint_count(query)

    # -------------------------------------------------------------- simulator side
    def simulator_prompt(self, seed, stats):
        known = stated_rate(stats)
        return (f"Write a new travel query like this one (solved at rate {known}; aim for about half):\n"
                f"{seed.text}\nNew query:\n")

    def task_shape(self):
        """A structured query: org a sandbox city; dest a city for 3 days and a state for 5 or 7 (one branch each);
        1-8 people, a budget of 1-100,000, and the four local constraints, each null or one of its values (cuisine
        1-4 of them). Left to ``validate``: dest other than org (a city) or not org's state, cuisines distinct, a
        plan within the budget (uniqueItems is left out: llguidance does not implement it)."""
        cities, states = sorted(self.sandbox.cities), sorted(set(self.sandbox.cities.values()))
        def one_of(values):
            return {"anyOf": [{"enum": list(values)}, {"type": "null"}]}
        local = {"type": "object", "additionalProperties": False, "required": list(solver.LOCAL_KEYS),
                 "properties": {   # in the order the domain writes them (a grammar keeps the order)
                     "house rule": one_of(solver.ROOM_RULES),
                     "cuisine": {"anyOf": [{"type": "array", "items": {"enum": list(solver.CUISINES)},
                                            "minItems": 1, "maxItems": 4},
                                           {"type": "null"}]},
                     "room type": one_of(solver.ROOM_TYPES),
                     "transportation": one_of(solver.TRANSPORT_RULES)}}
        def query(dest, days):   # the two branches differ only in dest and days
            return {"type": "object", "additionalProperties": False, "required": [*QUERY_KEYS, "local_constraint"],
                    "properties": {
                        "org": {"enum": cities}, "dest": {"enum": dest}, "days": {"enum": days},
                        "people_number": {"type": "integer", "minimum": 1, "maximum": solver.MAX_PEOPLE},
                        "budget": {"type": "integer", "minimum": 1, "maximum": solver.MAX_BUDGET},
                        "local_constraint": local}}
        longer = sorted(days for days in solver.CITIES_FOR_DAYS if days > 3)
        return TaskShape(json_schema={"anyOf": [query(cities, [3]), query(states, longer)]})

    def parse_task(self, text):
        data = parse_json_object(text, QUERY_KEYS)
        if isinstance(data, Invalid):
            return data
        return Task(text, "", None, 0, meta={"parsed": data})

    def validate(self, task):
        data = task.meta.get("parsed")
        if data is None:
            return Invalid("not a parsed task", task.text)
        grounded = self.make_task(data)
        return Invalid(grounded.reason, task.text) if isinstance(grounded, Invalid) else grounded

    # -------------------------------------------------------------- agent side
    def score(self, task, response):
        query = self.task_query(task)
        plan = checks.parse_plan(response)
        if not plan or not checks.travels_the_query(query, checks.examined(query, plan), self.sandbox):
            return 0.0   # nothing, or another trip's plan (issue 93: a correct plan of another query paid 0.54)
        return plan_reward(query, checks.evaluate_plan(query, plan, self.sandbox), self.reward,
                           content=checks.usable_share(plan, query, self.sandbox))


def plan_reward(query: dict, verdict: dict, reward: str = "micro", content: float = 1.0) -> float:
    """``final``: 1 when every check passes and all the plan's content is usable; ``micro``: the share of the
    query's applicable checks that pass (8 commonsense, the budget, each local constraint; hard checks that did not
    run count as failed), times ``content``, the share of the plan's content a traveller could use
    (:func:`genenv.domains.travel.constraints.usable_share`).

    Why the factor: TravelPlanner's evaluator checks a plan whatever it says, and four of its eight commonsense
    checks pass vacuously on a plan with nothing real in it (nothing repeated, nothing outside the sandbox when
    every field is "." or "{"): 0.44-0.56 of the micro reward for writing nothing, which an agent would learn
    (an outside fuzz paid 215 of 540 such plans). A field counts when it names something the sandbox knows, the
    way the spec's Within Sandbox check reads it but by the whole name; a plan pays in proportion to the fields
    a complete plan fills that it fills with real things. A plan not delivered earns 0."""
    if not verdict["delivered"] or content <= 0.0:
        return 0.0
    hard = verdict["hard"] or {}
    applicable = 1 + solver.constraint_count(query)
    passed = sum(verdict["commonsense"].values()) + sum(value is True for value in hard.values())
    if reward == "final":
        return float(passed == 8 + applicable and content >= 1.0)
    return content * passed / (8 + applicable)


__all__ = ["TravelDomain", "plan_reward", "query_text", "trip_level"]

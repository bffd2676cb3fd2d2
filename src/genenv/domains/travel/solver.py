"""Grounding TravelPlanner queries: check a structured query and search the sandbox for a plan that satisfies every
commonsense and hard constraint at the lowest cost it can find (the ``travel`` domain's ground truth).

The plan has TravelPlanner's shape: ``k`` cities (3 days: 1, 5 days: 2, 7 days: 3), two days each, then home::

    day 1: from org to A (transport, A's accommodation)     day 2: A (3 meals, 1 attraction, A's accommodation)
    day 3: from A to B ...                                  last day: from the last city to org (transport only)

Transport is one family for the whole trip (the Non-conf. Transportation rule): self-driving on every leg, or per
leg the cheaper of a flight and a taxi; the query's ``no flight`` / ``no self-driving`` removes options. Each city
gets the cheapest accommodation its house rule, room type and minimum nights (2) allow, its three cheapest
restaurants (the cheapest restaurant of each requested cuisine first) and its first attraction. For 5- and 7-day
trips the route is the cheapest ordering of the state's cities (among the ``max_route_cities`` cheapest to stay
in). Every item is one the evaluator's substring lookup finds as itself (a name that is part of an earlier row's
name would be priced as that row). The plan found is checked with the evaluator before it is returned.

The search is exact for one route city and greedy for cuisines, so "infeasible" means "no plan within budget was
found", stated with the cheapest cost found.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

from genenv.domains.travel.constraints import ROOM_RULES, evaluate_plan
from genenv.domains.travel.sandbox import Sandbox

LOCAL_KEYS = ("house rule", "cuisine", "room type", "transportation")
ROOM_TYPES = ("shared room", "not shared room", "private room", "entire room")
TRANSPORT_RULES = ("no flight", "no self-driving")
CUISINES = ("American", "BBQ", "Bakery", "Cafe", "Chinese", "Desserts", "Fast Food", "French", "Indian", "Italian",
            "Mediterranean", "Mexican", "Pizza", "Seafood", "Tea")
CITIES_FOR_DAYS = {3: 1, 5: 2, 7: 3}
LEVEL_NAMES = ("easy", "medium", "hard")
MAX_PEOPLE, MAX_BUDGET = 8, 100_000
NIGHTS = 2


@dataclass(frozen=True)
class Solution:
    plan: list[dict]
    cost: float
    cities: list[str]


def local_constraints(query: dict) -> dict:
    local = query.get("local_constraint") or {}
    return {key: local.get(key) for key in LOCAL_KEYS}


def constraint_count(query: dict) -> int:
    return sum(value not in (None, [], "") for value in local_constraints(query).values())


def level_name(query: dict) -> str:
    """TravelPlanner's difficulty: easy (budget only), medium (one local constraint), hard (more)."""
    return LEVEL_NAMES[min(constraint_count(query), 2)]


def local_type_problem(local: dict) -> str | None:
    """Why a local constraint holds a value of the wrong JSON type (house rule, room type and transportation a
    string or null; cuisine a list of strings or null), or None. Checked before any value is looked up in a table:
    an object or a list there is unhashable, and a lookup raised TypeError (found by an outside fuzz)."""
    for key in ("house rule", "room type", "transportation"):
        if local[key] is not None and not isinstance(local[key], str):
            return f"{key} must be a string or null, got {type(local[key]).__name__}"
    wanted = local["cuisine"]
    if wanted is not None and not (isinstance(wanted, list) and all(isinstance(c, str) for c in wanted)):
        return "cuisine must be a list of strings or null"
    return None


def query_problem(query, sandbox: Sandbox) -> str | None:
    """Why a structured query is malformed (a field, its type or value), or None."""
    if not isinstance(query, dict):
        return "the query is not an object"
    org, dest, days = query.get("org"), query.get("dest"), query.get("days")
    if not isinstance(days, int) or isinstance(days, bool) or days not in CITIES_FOR_DAYS:
        return "days must be 3, 5 or 7"
    if not isinstance(org, str) or org not in sandbox.cities:
        return f"org {org!r} is not a city of the sandbox"
    states = set(sandbox.cities.values())
    if days == 3 and (not isinstance(dest, str) or dest not in sandbox.cities or dest == org):
        return "dest must be a city of the sandbox other than org for a 3-day trip"
    if days > 3 and (not isinstance(dest, str) or dest not in states):
        return f"dest must be a state for a {days}-day trip"
    if days > 3 and sandbox.cities[org] == dest:
        return "org must lie outside the destination state"
    number = query.get("visiting_city_number", CITIES_FOR_DAYS[days])
    if number != CITIES_FOR_DAYS[days]:
        return f"visiting_city_number must be {CITIES_FOR_DAYS[days]} for {days} days"
    people, budget = query.get("people_number"), query.get("budget")
    if not isinstance(people, int) or isinstance(people, bool) or not 1 <= people <= MAX_PEOPLE:
        return f"people_number must be an integer 1-{MAX_PEOPLE}"
    if not isinstance(budget, int) or isinstance(budget, bool) or not 1 <= budget <= MAX_BUDGET:
        return f"budget must be an integer 1-{MAX_BUDGET}"
    local = query.get("local_constraint")
    if local is not None and (not isinstance(local, dict) or set(local) - set(LOCAL_KEYS)):
        return f"local_constraint must be an object with keys among {', '.join(LOCAL_KEYS)}"
    local = local_constraints(query)
    problem = local_type_problem(local)
    if problem:
        return problem
    if local["house rule"] is not None and local["house rule"] not in ROOM_RULES:
        return f"house rule must be one of {', '.join(ROOM_RULES)} or null"
    if local["room type"] is not None and local["room type"] not in ROOM_TYPES:
        return f"room type must be one of {', '.join(ROOM_TYPES)} or null"
    if local["transportation"] is not None and local["transportation"] not in TRANSPORT_RULES:
        return f"transportation must be one of {', '.join(TRANSPORT_RULES)} or null"
    wanted = local["cuisine"]
    if wanted is not None and (not isinstance(wanted, list) or not 1 <= len(wanted) <= 4
                               or len(set(wanted)) != len(wanted) or any(c not in CUISINES for c in wanted)):
        return "cuisine must be a list of 1-4 distinct cuisines among " + ", ".join(CUISINES) + ", or null"
    return None


# ============================================================================ pieces of a plan

def _itself(sandbox: Sandbox, table: str, row: dict, name_key: str, city: str) -> bool:
    """The evaluator's lookup of this row's name finds this row first (and only it, for accommodations, whose
    minimum-nights rule is only checked on a unique match)."""
    found = sandbox.find(table, row[name_key], city)
    return bool(found) and found[0] is row and (table != "accommodations" or len(found) == 1)


def _room_ok(row: dict, local: dict) -> bool:
    rule, kind = local["house rule"], local["room type"]
    if rule is not None and ROOM_RULES[rule] in row["house_rules"]:
        return False
    room = row["room type"]
    return not ((kind == "not shared room" and room == "Shared room") or
                (kind == "shared room" and room != "Shared room") or
                (kind == "private room" and room != "Private room") or
                (kind == "entire room" and room != "Entire home/apt"))


class _Stays:
    """Per-city choices for one query (cached: a route search asks for the same city many times)."""

    def __init__(self, sandbox: Sandbox, query: dict):
        self.sandbox, self.people, self.local = sandbox, int(query["people_number"]), local_constraints(query)
        self._cache: dict[str, tuple | None] = {}
        self._legs: dict[tuple[str, str, str], tuple | None] = {}

    def leg(self, start: str, end: str, family: str):
        key = (start, end, family)
        if key not in self._legs:
            self._legs[key] = _leg(self.sandbox, start, end, self.people, family, self.local)
        return self._legs[key]

    def city(self, city: str):
        """(accommodation row, its cost for the stay, restaurants by cost, first attraction) or None."""
        if city not in self._cache:
            self._cache[city] = self._city(city)
        return self._cache[city]

    def _city(self, city):
        sandbox, people = self.sandbox, self.people
        rooms = [row for row in sandbox.rows_in("accommodations", city)
                 if _room_ok(row, self.local) and float(row["minimum nights"]) <= NIGHTS
                 and _itself(sandbox, "accommodations", row, "NAME", city)]
        if not rooms:
            return None
        costs = [float(r["price"]) * math.ceil(people / float(r["maximum occupancy"])) * NIGHTS for r in rooms]
        best = min(range(len(rooms)), key=lambda i: (costs[i], i))
        restaurants = sorted((row for row in sandbox.rows_in("restaurants", city)
                              if _itself(sandbox, "restaurants", row, "Name", city)),
                             key=lambda r: float(r["Average Cost"]))
        attractions = [row for row in sandbox.rows_in("attractions", city)
                       if _itself(sandbox, "attractions", row, "Name", city)]
        if len(restaurants) < 3 or not attractions:
            return None
        return rooms[best], costs[best], restaurants, attractions[0]

    def basic_cost(self, city) -> float:
        room, room_cost, restaurants, _ = self.city(city)
        return room_cost + sum(float(r["Average Cost"]) for r in restaurants[:3]) * self.people


def _leg(sandbox: Sandbox, start: str, end: str, people: int, family: str, local: dict):
    """(cost, transportation text) of one leg in a transport family, or None when the family cannot do it."""
    options = []
    if family == "self-driving":
        price = sandbox.distance_cost(start, end, "self-driving")
        if price is not None:
            options.append((price * math.ceil(people / 5), _ground_text("Self-driving", start, end, price, sandbox)))
    else:
        if local["transportation"] != "no flight":
            flights = sandbox.flights_between(start, end)
            if flights:
                row = min(flights, key=lambda r: float(r["Price"]))
                options.append((float(row["Price"]) * people,
                                f"Flight Number: {row['Flight Number']}, from {start} to {end}, "
                                f"Departure Time: {row['DepTime']}, Arrival Time: {row['ArrTime']}"))
        price = sandbox.distance_cost(start, end, "taxi")
        if price is not None:
            options.append((price * math.ceil(people / 4), _ground_text("Taxi", start, end, price, sandbox)))
    return min(options, key=lambda option: option[0]) if options else None


def _ground_text(mode: str, start: str, end: str, price: int, sandbox: Sandbox) -> str:
    row = sandbox.distances[(start, end)]
    return f"{mode}, from {start} to {end}, duration: {row['duration']}, distance: {row['distance']}, cost: {price}"


def _transport(stays: "_Stays", route: list[str], local: dict):
    """The cheapest transport family's (cost, leg texts) for the closed route, or None."""
    best = None
    families = ["flight/taxi"] + ([] if local["transportation"] == "no self-driving" else ["self-driving"])
    for family in families:
        legs = [stays.leg(a, b, family) for a, b in zip(route, route[1:])]
        if all(legs):
            cost = sum(leg[0] for leg in legs)
            if best is None or cost < best[0]:
                best = (cost, [leg[1] for leg in legs])
    return best


def _meals(stays: _Stays, cities: list[str], wanted: list[str]):
    """Three restaurants per city, every requested cuisine covered (the cheapest restaurant of each uncovered
    cuisine first), the rest the cheapest; None when a cuisine cannot be covered."""
    chosen: dict[str, list[dict]] = {city: [] for city in cities}
    covered: set[str] = set()
    for cuisine in wanted:
        if cuisine in covered:
            continue
        options = [(float(row["Average Cost"]), index, city, row) for index, city in enumerate(cities)
                   if len(chosen[city]) < 3 for row in stays.city(city)[2]
                   if cuisine in row["Cuisines"] and row not in chosen[city]]
        if not options:
            return None
        _, _, city, row = min(options, key=lambda option: option[:2])
        chosen[city].append(row)
        covered |= {c for c in wanted if c in row["Cuisines"]}
    for city in cities:
        for row in stays.city(city)[2]:
            if len(chosen[city]) == 3:
                break
            if row not in chosen[city]:
                chosen[city].append(row)
    return chosen


def _plan(query, cities, legs, stays: _Stays, meals) -> list[dict]:
    route = [query["org"], *cities, query["org"]]
    plan = []
    for index, city in enumerate(cities):
        room, _, _, attraction = stays.city(city)
        stay = f"{room['NAME']}, {city}"
        breakfast, lunch, dinner = (f"{row['Name']}, {city}" for row in meals[city])
        plan.append({"days": 2 * index + 1, "current_city": f"from {route[index]} to {city}",
                     "transportation": legs[index], "breakfast": "-", "attraction": "-", "lunch": "-",
                     "dinner": "-", "accommodation": stay})
        plan.append({"days": 2 * index + 2, "current_city": city, "transportation": "-", "breakfast": breakfast,
                     "attraction": f"{attraction['Name']}, {city};", "lunch": lunch, "dinner": dinner,
                     "accommodation": stay})
    plan.append({"days": 2 * len(cities) + 1, "current_city": f"from {cities[-1]} to {query['org']}",
                 "transportation": legs[-1], "breakfast": "-", "attraction": "-", "lunch": "-", "dinner": "-",
                 "accommodation": "-"})
    return plan


def _cheapest_route(query, usable, k, stays: _Stays, reasons: set):
    """(cost, cities, leg texts, meals) of the cheapest ordering of ``k`` of ``usable``, or None (``reasons``
    says why each ordering failed)."""
    best, local, people = None, stays.local, stays.people
    for cities in itertools.permutations(usable, k):
        transport = _transport(stays, [query["org"], *cities, query["org"]], local)
        if transport is None:
            reasons.add("no transport")
            continue
        meals = _meals(stays, list(cities), local["cuisine"] or [])
        if meals is None:
            reasons.add("cuisine")
            continue
        cost = transport[0] + sum(stays.city(c)[1] for c in cities) + people * sum(
            float(row["Average Cost"]) for c in cities for row in meals[c])
        if best is None or cost < best[0]:
            best = (cost, list(cities), transport[1], meals)
    return best


def stay_cities(sandbox: Sandbox) -> list[str]:
    """The cities where a trip can stay at all (no local constraint): an accommodation for 2 nights, 3 restaurants
    and an attraction the evaluator finds as themselves."""
    stays = _Stays(sandbox, {"people_number": 1})
    return sorted(city for city in sandbox.cities if stays.city(city) is not None)


def solve(query: dict, sandbox: Sandbox, max_route_cities: int = 6, widen: bool = True) -> Solution | str:
    """The cheapest plan found that passes every constraint of ``query`` (budget included), or the reason there
    is none. Routes are searched among the ``max_route_cities`` cheapest cities to stay in, then (``widen``)
    among all of the state's when none of those connects."""
    problem = query_problem(query, sandbox)
    if problem:
        return problem
    stays = _Stays(sandbox, query)
    local = stays.local
    k = CITIES_FOR_DAYS[query["days"]]
    if k == 1:
        candidates = [query["dest"]]
    else:
        candidates = sorted(city for city, state in sandbox.cities.items() if state == query["dest"])
    usable = [city for city in candidates if stays.city(city) is not None]
    if len(usable) < k:
        rules = " the house rule and room type allow" if local["house rule"] or local["room type"] else ""
        stay = f"stay (an accommodation{rules} for {NIGHTS} nights, 3 restaurants, an attraction)"
        return (f"{query['dest']} offers no {stay}" if k == 1 else
                f"fewer than {k} cities in {query['dest']} offer a {stay}")
    usable = sorted(usable, key=lambda city: (stays.basic_cost(city), city))
    reasons: set[str] = set()
    best = _cheapest_route(query, usable[:max_route_cities], k, stays, reasons)
    if best is None and widen and len(usable) > max_route_cities:  # the cheapest cities to stay in are not connected
        best = _cheapest_route(query, usable, k, stays, reasons)
    if best is None:
        if "cuisine" not in reasons:
            allowed = {"no flight": " without flights", "no self-driving": " without self-driving"}.get(
                local["transportation"], "")
            return f"no route{allowed}: a leg has no flight and no ground distance"
        return f"the cuisines asked ({', '.join(local['cuisine'] or [])}) are not served in the route's cities"
    cost, cities, legs, meals = best
    if cost > query["budget"]:
        return f"the cheapest plan found costs ${cost:,.0f}, over the budget of ${query['budget']:,}"
    plan = _plan(query, cities, legs, stays, meals)
    verdict = evaluate_plan({**query, "visiting_city_number": k, "local_constraint": local}, plan, sandbox)
    failed = [name for group in ("commonsense", "hard") for name, ok in (verdict[group] or {}).items() if ok is False]
    if verdict["hard"] is None or failed:  # a solver bug, not the query's fault: say which check
        return f"the grounding plan fails {', '.join(failed) or 'the hard checks'}"
    return Solution(plan, cost, cities)


__all__ = ["CUISINES", "LOCAL_KEYS", "ROOM_TYPES", "TRANSPORT_RULES", "Solution", "constraint_count", "level_name",
           "local_constraints", "query_problem", "solve", "stay_cities"]

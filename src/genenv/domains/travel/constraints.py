"""TravelPlanner's evaluator, written from our SPEC.md of the benchmark (sections 3-4): the 8 commonsense and 5
hard constraints, upstream-compatible (substring name matching, ``;``-terminated attractions, the
character-wise current-city test, the cuisine check's early ``continue``), and the pass rates.

A plan is a list of day dicts (``days``, ``current_city``, ``transportation``, ``breakfast``, ``attraction``,
``lunch``, ``dinner``, ``accommodation``); a query a dict with ``org``, ``dest``, ``days``,
``visiting_city_number``, ``people_number``, ``budget`` and ``local_constraint`` (``house rule``,
``cuisine``, ``room type``, ``transportation``). Each check returns True, False or None (does not apply).
Upstream aborts on a flight whose cities cannot be parsed; here that check fails instead.
"""

from __future__ import annotations

import ast
import bisect
import json
import math
import re

from genenv.domains.travel.sandbox import Sandbox, strip_state

MEALS = ("breakfast", "lunch", "dinner")
REQUIRED_KEYS = ("transportation", "breakfast", "lunch", "dinner", "attraction", "accommodation")
PLACEHOLDER = "You don't need to fill in the information for this or later days."
COMMONSENSE = ("Reasonable City Route", "Diverse Restaurants", "Diverse Attractions", "Non-conf. Transportation",
               "Within Current City", "Within Sandbox", "Minimum Nights Stay", "Complete Information")
HARD = ("Budget", "Room Rule", "Cuisine", "Room Type", "Transportation")
ROOM_RULES = {"smoking": "No smoking", "parties": "No parties", "children under 10": "No children under 10",
              "visitors": "No visitors", "pets": "No pets"}


# ============================================================================ parsing

def filled(value) -> bool:
    return value is not None and str(value).strip() not in ("", "-")


def name_city(text: str) -> tuple[str, str]:
    """Everything up to the last comma is the name, the rest (parenthesised part removed) the city."""
    text = str(text)
    if "," not in text:
        return "-", "-"
    name, _, city = text.rpartition(",")
    return name.strip(), strip_state(city)


def from_to(text) -> tuple[str | None, str | None]:
    """The first ``from A to B`` (A the shortest text before " to ", B up to the next comma): the match of
    ``re.search(r"from (.+?) to ([^,]+)", text)``, found in time linear in the text up to a log factor (the regex
    retried each "from " to the end of its line: a 30,000-character plan of them took seconds per field;
    tests/test_travel.py holds the two equal)."""
    text = str(text or "")
    # the " to " a match can end at: followed by at least one character that is not a comma
    ends = [j for j in _occurrences(text, " to ") if j + 4 < len(text) and text[j + 4] != ","]
    newline = -1
    for start in _occurrences(text, "from "):
        if newline <= start + 5 and newline != len(text):
            newline = text.find("\n", start + 5)
            newline = len(text) if newline < 0 else newline
        k = bisect.bisect_left(ends, start + 6)   # A holds at least one character
        if k < len(ends) and ends[k] < newline:   # ... and no newline (".")
            j = ends[k]
            comma = text.find(",", j + 4)
            return strip_state(text[start + 5:j]), strip_state(text[j + 4:comma if comma >= 0 else len(text)])
    return None, None


def _occurrences(text: str, word: str):
    """Every position where ``word`` starts in ``text``, overlapping ones too, in order."""
    at = text.find(word)
    while at >= 0:
        yield at
        at = text.find(word, at + 1)


def attraction_items(text) -> list[str]:
    """The ``;``-terminated items (text after the last ``;`` is ignored, as upstream)."""
    return str(text).split(";")[:-1] if filled(text) else []


def transport_of(day: dict) -> tuple[str | None, str | None, str, str | None]:
    """(A, B, lower-cased text, flight number or None) of a day's transportation; A and B from the text, else
    from current_city."""
    transport = str(day.get("transportation") or "")
    start, end = from_to(transport)
    if start is None:
        start, end = from_to(day.get("current_city"))
    match = re.search(r"Flight Number: ([^,]+)", transport)
    return start, end, transport.lower(), match.group(1).strip() if match else None


def examined(query: dict, plan: list) -> list[dict]:
    days = [day if isinstance(day, dict) else {} for day in (plan or [])]
    return days[:min(int(query["days"]), len(days))]


# ============================================================================ commonsense (SPEC 4.1)

def reasonable_city_route(query, days, sandbox: Sandbox):
    route = []
    for index, day in enumerate(days):
        current = day.get("current_city") or ""
        if "from " in current:
            start, end = from_to(current)
            if start is None or (index == 0 and start != strip_state(query["org"])):
                return False
            route += [start, end]
        else:
            route.append(strip_state(current))
    if len(route) < 3 or route[0] != route[-1]:
        return False
    runs = []
    for city in route:
        if runs and runs[-1][0] == city:
            runs[-1][1] += 1
        else:
            runs.append([city, 1])
    seen = set()
    for index, (city, length) in enumerate(runs):
        inside = 0 < index < len(runs) - 1
        if inside and (length == 1 or city in seen):
            return False
        seen.add(city)
    if any(city not in sandbox.cities for city in route):
        return False
    if int(query["days"]) > 3 and any(sandbox.cities[city] != query["dest"] for city in route[1:-1]):
        return False
    return True


def travels_the_query(query, days, sandbox: Sandbox) -> bool:
    """Whether a plan's days make the query's trip: each of the query's days names its city, the first is its
    origin, the last returns there, and they reach its destination (the city; for a trip of more than 3 days, a city
    of the destination state). Not one of TravelPlanner's checks:
    the domain's training reward pays only a plan that passes it (:func:`genenv.domains.travel.domain.plan_reward`),
    since a correct plan of another query passes most commonsense checks of this one."""
    if len(days) < int(query["days"]) or not all(filled(day.get("current_city")) for day in days):
        return False
    cities = []
    for day in days:
        current = day.get("current_city") or ""
        if "from " in current:
            cities += [city for city in from_to(current) if city]
        elif filled(current):
            cities.append(strip_state(current))
    if not cities or cities[0] != strip_state(query["org"]) or cities[-1] != cities[0]:
        return False
    if int(query["days"]) > 3:
        return any(sandbox.cities.get(city) == query["dest"] for city in cities)
    return strip_state(query["dest"]) in cities


def diverse_restaurants(query, days, sandbox):
    meals = [day.get(m) for day in days for m in MEALS if filled(day.get(m))]
    return len(meals) == len(set(meals))


def diverse_attractions(query, days, sandbox):
    items = [item for day in days for item in attraction_items(day.get("attraction"))]
    return len(items) == len(set(items))


def _mode(text: str) -> str | None:
    lower = str(text).lower()
    return "taxi" if "taxi" in lower else "self-driving" if "self-driving" in lower else \
        "flight" if "flight" in lower else None


def non_conflicting_transportation(query, days, sandbox):
    if not days or not filled(days[0].get("transportation")):
        return False
    modes = {_mode(day.get("transportation")) for day in days if filled(day.get("transportation"))}
    return not ({"self-driving", "flight"} <= modes or {"taxi", "self-driving"} <= modes)


def within_current_city(query, days, sandbox):
    for day in days:
        current = day.get("current_city") or ""
        transport = day.get("transportation")
        meals = [day.get(m) for m in MEALS if filled(day.get(m))]
        items = attraction_items(day.get("attraction"))
        stay = day.get("accommodation")
        if "from" in current:
            start, end = from_to(current)
            if start is None:
                return False
            if filled(transport) and not (start in transport and end in transport):
                return False
            if any(start not in text and end not in text for text in meals + items):
                return False
            if filled(stay) and end not in stay:
                return False
        else:  # upstream treats the city as a sequence of characters here (SPEC 4.1, 5)
            city = strip_state(current)
            if filled(transport) and not all(c in transport for c in city):
                return False
            if city and any(not any(c in text for c in city) for text in meals + items):
                return False
            if filled(stay) and city and city[-1] not in stay:
                return False
    return True


def within_sandbox(query, days, sandbox: Sandbox):
    for day in days:
        if filled(day.get("transportation")):
            start, end, lower, number = transport_of(day)
            if "flight number" in lower:
                if start is None or number is None or sandbox.flight(number, start, end) is None:
                    return False
            elif "self-driving" in lower or "taxi" in lower:
                mode = "self-driving" if "self-driving" in lower else "taxi"
                if sandbox.distance_cost(start or "-", end or "-", mode) is None:
                    return False
        for meal in MEALS:
            if filled(day.get(meal)) and not sandbox.find("restaurants", *name_city(day[meal])):
                return False
        if any(not sandbox.find("attractions", *name_city(item)) for item in attraction_items(day.get("attraction"))):
            return False
        if filled(day.get("accommodation")) and not sandbox.find("accommodations", *name_city(day["accommodation"])):
            return False
    return True


def minimum_nights(query, days, sandbox: Sandbox):
    if any("accommodation" not in day for day in days):
        return False
    groups = []
    for day in days:
        stay = day["accommodation"]
        if groups and groups[-1][0] == stay:
            groups[-1][1] += 1
        else:
            groups.append([stay, 1])
    for stay, length in groups:
        if filled(stay):
            rows = sandbox.find("accommodations", *name_city(stay))
            if len(rows) == 1 and length < float(rows[0]["minimum nights"]):
                return False
    return True


def complete_information(query, days, sandbox):
    real = [day for day in days if day and day.get("current_city") != PLACEHOLDER]
    if len(real) != int(query["days"]):
        return False
    org, cities = strip_state(query["org"]), set()
    for index, day in enumerate(days):
        current = day.get("current_city") or ""
        if "from " in current:
            start, end = from_to(current)
            if index == 0 and start != org:
                return False
            cities |= {c for c in (start, end) if c}
        elif current:
            cities.add(strip_state(current))
    if len(cities - {org}) != int(query["visiting_city_number"]):
        return False
    for index, day in enumerate(days):
        current = day.get("current_city") or ""
        if any(key not in day for key in REQUIRED_KEYS):
            return False
        if ("from " in current or "to " in current) and not filled(day.get("transportation")):
            return False
        if "from " not in current and " to " not in current and not filled(day.get("attraction")):
            return False
        if index != len(days) - 1 and not filled(day.get("accommodation")):
            return False
        if "from " not in current and any(not filled(day.get(m)) for m in MEALS):
            return False
    values = sum(filled(value) for day in days for value in day.values())
    return values / (6 * int(query["days"])) >= 0.5


COMMONSENSE_CHECKS = (reasonable_city_route, diverse_restaurants, diverse_attractions, non_conflicting_transportation,
                      within_current_city, within_sandbox, minimum_nights, complete_information)


# ============================================================================ hard (SPEC 4.2)

def total_cost(query, days, sandbox: Sandbox) -> float:
    people, cost = int(query["people_number"]), 0.0
    for day in days:
        if filled(day.get("transportation")):
            start, end, lower, number = transport_of(day)
            if start is not None and "flight number" in lower:
                row = sandbox.flight(number) if number else None
                cost += float(row["Price"]) * people if row else 0.0
            elif start is not None and ("self-driving" in lower or "taxi" in lower):
                mode, per_car = ("self-driving", 5) if "self-driving" in lower else ("taxi", 4)
                price = sandbox.distance_cost(start, end, mode)
                cost += price * math.ceil(people / per_car) if price is not None else 0.0
        for meal in MEALS:
            if filled(day.get(meal)):
                rows = sandbox.find("restaurants", *name_city(day[meal]))
                cost += float(rows[0]["Average Cost"]) * people if rows else 0.0
        if filled(day.get("accommodation")):
            rows = sandbox.find("accommodations", *name_city(day["accommodation"]))
            if rows:
                cost += float(rows[0]["price"]) * math.ceil(people / float(rows[0]["maximum occupancy"]))
    return cost


def _stays(days, sandbox):
    for day in days:
        if filled(day.get("accommodation")):
            rows = sandbox.find("accommodations", *name_city(day["accommodation"]))
            if rows:
                yield rows[0]


def budget(query, days, sandbox):
    return total_cost(query, days, sandbox) <= float(query["budget"])


def room_rule(query, days, sandbox):
    rule = (query.get("local_constraint") or {}).get("house rule")
    if rule is None:
        return None
    return not any(ROOM_RULES[rule] in row["house_rules"] for row in _stays(days, sandbox))


def cuisine(query, days, sandbox):
    wanted = (query.get("local_constraint") or {}).get("cuisine")
    if not wanted:
        return None
    covered = set()
    for day in days:
        for meal in MEALS:
            if not filled(day.get(meal)):
                continue
            name, city = name_city(day[meal])
            if city == strip_state(query["org"]):
                break  # upstream's `continue` on the day loop skips the rest of this day's meals
            rows = sandbox.find("restaurants", name, city)
            if rows:
                covered |= {c for c in wanted if c in rows[0]["Cuisines"]}
    return all(c in covered for c in wanted)


def room_type(query, days, sandbox):
    wanted = (query.get("local_constraint") or {}).get("room type")
    if wanted is None:
        return None
    for row in _stays(days, sandbox):
        kind = row["room type"]
        if (wanted == "not shared room" and kind == "Shared room") or \
                (wanted == "shared room" and kind != "Shared room") or \
                (wanted == "private room" and kind != "Private room") or \
                (wanted == "entire room" and kind != "Entire home/apt"):
            return False
    return True


def transportation_rule(query, days, sandbox):
    wanted = (query.get("local_constraint") or {}).get("transportation")
    if wanted is None:
        return None
    word = {"no flight": "Flight", "no self-driving": "Self-driving"}.get(wanted)
    return not any(word and word in str(day.get("transportation") or "") for day in days)


HARD_CHECKS = (budget, room_rule, cuisine, room_type, transportation_rule)


# ============================================================================ one plan, and the rates (SPEC 4.3)

def evaluate_plan(query: dict, plan, sandbox: Sandbox) -> dict:
    """``{"delivered", "commonsense": {name: bool}, "hard": {name: bool | None} | None}``. Delivered, as SPEC 3 and
    4.3 define it: a non-empty list (``[{}, {}]``, days padded with ``{}`` and nothing else, is delivered and
    checked; None or ``[]`` is not). What a *training reward* pays a plan with nothing in it is the domain's
    choice (:func:`genenv.domains.travel.domain.plan_reward`: 0)."""
    delivered = bool(plan)
    if not delivered:
        return {"delivered": False, "commonsense": None, "hard": None}
    days = examined(query, plan)
    commonsense = {name: bool(check(query, days, sandbox)) for name, check in zip(COMMONSENSE, COMMONSENSE_CHECKS)}
    hard = None
    if commonsense["Complete Information"] and commonsense["Within Sandbox"]:
        hard = {name: check(query, days, sandbox) for name, check in zip(HARD, HARD_CHECKS)}
    return {"delivered": True, "commonsense": commonsense, "hard": hard}


def pass_rates(results: list[dict], hard_denominator: int | None = None) -> dict:
    """Delivery, commonsense/hard micro and macro, final pass rate (fractions) over ``results`` (one per
    query). The hard micro denominator is upstream's fixed count of applicable hard constraints (105 train,
    420 validation); by default the number of hard checks that applied."""
    n = len(results)
    delivered = [r for r in results if r["delivered"]]
    commonsense_true = sum(sum(r["commonsense"].values()) for r in delivered)
    hard_results = [r["hard"] for r in delivered if r["hard"] is not None]
    hard_true = sum(sum(v is True for v in h.values()) for h in hard_results)
    applicable = hard_denominator or sum(sum(v is not None for v in h.values()) for h in hard_results) or 1
    commonsense_macro = [r for r in delivered if all(r["commonsense"].values())]
    hard_macro = [r for r in delivered if r["hard"] is not None and all(v is not False for v in r["hard"].values())]
    final = [r for r in commonsense_macro if r["hard"] is not None and all(v is not False for v in r["hard"].values())]
    rates = {"delivery": len(delivered) / n if n else 0.0,
             "commonsense_micro": commonsense_true / (8 * n) if n else 0.0,
             "commonsense_macro": len(commonsense_macro) / n if n else 0.0,
             "hard_micro": hard_true / applicable,
             "hard_macro": len(hard_macro) / n if n else 0.0,
             "final": len(final) / n if n else 0.0}
    rates["average"] = (rates["commonsense_micro"] + rates["commonsense_macro"] + rates["hard_micro"]
                        + rates["hard_macro"]) / 4
    return rates


PLAN_FIELDS = ("current_city", "transportation", "breakfast", "attraction", "lunch", "dinner", "accommodation")


def knows(sandbox: Sandbox, table: str, text) -> bool:
    """Does ``text`` ("Name, City") name a row of ``table`` in that city, the whole name (case and surrounding
    blanks aside)? Stricter than the spec's "find" (any row whose name *contains* the text, so "., Boston" finds
    every Boston restaurant with a dot in its name): this asks what a traveller could use."""
    name, city = name_city(text)
    wanted = name.strip().casefold()
    key = "NAME" if table == "accommodations" else "Name"
    return bool(wanted) and any(str(row[key]).strip().casefold() == wanted for row in sandbox.rows_in(table, city))


def usable_field(sandbox: Sandbox, key: str, day: dict) -> bool:
    """Does a filled field of a day name something the sandbox knows (a traveller could act on it)? current_city:
    a city, or "from A to B" between two cities; transportation: a flight whose number flies that route, or
    self-driving / a taxi between cities the distance tool knows; a meal or the accommodation: a row of its table
    in its city; attraction: ``;``-terminated items, each an attraction of its city."""
    value = day.get(key)
    if key == "current_city":
        text = str(value)
        if "from " in text:
            start, end = from_to(text)
            return start is not None and start in sandbox.cities and end in sandbox.cities
        return strip_state(text) in sandbox.cities
    if key == "transportation":
        start, end, lower, number = transport_of(day)
        if start is None or end is None:
            return False
        if "flight number" in lower:
            return number is not None and sandbox.flight(number, start, end) is not None
        mode = "self-driving" if "self-driving" in lower else "taxi" if "taxi" in lower else None
        return mode is not None and sandbox.distance_cost(start, end, mode) is not None
    if key == "attraction":
        items = attraction_items(value)
        return bool(items) and all(knows(sandbox, "attractions", item) for item in items)
    table = "accommodations" if key == "accommodation" else "restaurants"
    return knows(sandbox, table, value)


def required_fields(query: dict) -> int:
    """How many fields a complete plan of the query's days fills at least, as Complete Information reads it
    (SPEC 4.1, 8): every day its current_city, a travel day ("from ...") its transportation and any other day an
    attraction (one field either way), every day but the last an accommodation (meals may be "-")."""
    return 3 * int(query["days"]) - 1


def usable_share(plan, query: dict, sandbox: Sandbox) -> float:
    """The share of a plan's content a traveller could use: the examined days' filled plan fields (SPEC 3: not
    empty, not "-", not the "no need to fill in" placeholder) that name something the sandbox knows
    (:func:`usable_field`), over the filled fields or the fields a complete plan fills (:func:`required_fields`),
    whichever is more. 1 for a plan whose every field is real and which fills at least what a complete plan does;
    0 for one that says nothing (every field ".", "{", "null", control characters) or nothing real; a plan that
    names only its cities gets the share of a plan those make up."""
    days = examined(query, plan)
    filled_fields = [(key, day) for day in days for key in PLAN_FIELDS
                     if filled(day.get(key)) and day.get(key) != PLACEHOLDER]
    usable = sum(usable_field(sandbox, key, day) for key, day in filled_fields)
    denominator = max(len(filled_fields), required_fields(query))
    return usable / denominator if denominator else 0.0


# ============================================================================ plans written by a model

def parse_plan(text) -> list[dict] | None:
    """A plan from model text: the outermost ``[...]`` read as a JSON or Python literal list of day objects
    (the fine-tuning data's format); None when there is none (the plan counts as not delivered). Never runs
    code: ``ast.literal_eval`` accepts literals only."""
    text = str(text or "")
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end <= start:
        return None
    body = text[start:end + 1]
    for reader in (json.loads, ast.literal_eval):
        try:
            plan = reader(body)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        if isinstance(plan, list) and all(isinstance(day, dict) for day in plan):
            return [{str(k): (v if isinstance(v, (str, int)) else str(v)) for k, v in day.items()} for day in plan]
    return None

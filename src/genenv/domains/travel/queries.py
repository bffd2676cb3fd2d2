"""TravelPlanner queries: the 45 training ones (text, reference information and gold plan in the fine-tuning
file; structured fields derived as SPEC.md did) and user-supplied structured queries in the official format."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from genenv.domains.travel.constraints import from_to, strip_state
from genenv.domains.travel.sandbox import Sandbox
from genenv.io import read_jsonl_rows

NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
FIELDS = ("org", "dest", "days", "visiting_city_number", "people_number", "budget", "query")
PLANNER_INSTRUCTION = (
    "You are a proficient planner. Based on the given information and the query, write a day-by-day plan as a "
    "list of day objects with the keys days, current_city, transportation, breakfast, attraction, lunch, dinner, "
    "accommodation. Use only the given information; write '-' where nothing is needed; on travel days write the "
    "current city as 'from A to B'; meals and accommodation as 'Name, City'; attractions as 'Name, City;' each.")


def derive_train_query(text: str, plan: list[dict], sandbox: Sandbox) -> dict:
    """Structured fields of a training query: the trip's shape (origin, days, cities) from its gold plan; people,
    budget and the destination state (5- and 7-day trips) from the text. Local constraints are not derived."""
    days = [d for d in plan if d]
    org = from_to(days[0]["current_city"])[0]
    cities = set()
    for day in days:
        current = day["current_city"]
        cities |= set(from_to(current)) if "from " in current else {strip_state(current)}
    people = 2 if re.search(r"\bfor a pair\b", text) else 1
    match = re.search(r"(?:group of|party of|for) (\d+|two|three|four|five|six|seven|eight)\b(?! days?\b)", text)
    if match:
        people = int(match.group(1)) if match.group(1).isdigit() else NUMBER_WORDS[match.group(1)]
    visited = sorted(c for c in cities - {org} if c)
    budget = re.search(r"\$([\d,]+)", text)
    return {"org": org, "dest": visited[0] if len(days) == 3 else sandbox.cities.get(visited[0], ""),
            "days": len(days), "visiting_city_number": len(visited), "people_number": people,
            "budget": int(budget.group(1).replace(",", "")) if budget else 0, "query": text,
            "local_constraint": {"house rule": None, "cuisine": None, "room type": None, "transportation": None}}


def load_train(folder: str | Path, sandbox: Sandbox, limit: int | None = None) -> list[dict]:
    """``[{"query", "messages", "gold"}]`` for the 45 training queries (the fine-tuning file's own prompts)."""
    path = Path(folder) / "finetuning_data" / "std_travelplanner.jsonl"
    if not path.exists():
        raise ValueError(f"--data: {path} not found (expected the TravelPlanner data layout)")
    items = []
    for line in path.read_text(encoding="utf-8").splitlines()[:limit or None]:
        messages = json.loads(line)["messages"]
        gold = ast.literal_eval(messages[2]["content"])  # data file: literals only
        text = messages[1]["content"].split("Query:")[-1].strip()
        items.append({"query": derive_train_query(text, gold, sandbox), "messages": messages[:2], "gold": gold})
    return items


def load_queries(path: str | Path, limit: int | None = None) -> list[dict]:
    """Structured queries (JSON Lines, the official fields; ``local_constraint`` may be the text of a dict and
    ``reference_information`` gives the sole-planning mode its data) as ``[{"query", "messages"}]``."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--queries: {path} does not exist")
    items = []
    for number, row in read_jsonl_rows(path):
        missing = [k for k in FIELDS if k not in row]
        if missing:
            raise ValueError(f"{path}:{number}: missing field {missing[0]!r}")
        local = row.get("local_constraint") or {}
        if isinstance(local, str):
            try:
                local = ast.literal_eval(local)
            except (ValueError, SyntaxError):
                raise ValueError(f"{path}:{number}: local_constraint is not a dict") from None
        query = {**row, "local_constraint": {k: local.get(k) for k in ("house rule", "cuisine", "room type",
                                                                       "transportation")}}
        messages = [{"role": "system", "content": PLANNER_INSTRUCTION},
                    {"role": "user", "content": f"Given information: {row.get('reference_information', '')}\n"
                                                f"Query: {row['query']}"}]
        items.append({"query": query, "messages": messages})
    return items[:limit or None]

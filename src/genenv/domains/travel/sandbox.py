"""TravelPlanner's sandbox tables, read as our SPEC.md of the benchmark describes (section 1 and 6).

Accommodations drop every row with an empty cell (as upstream's loader does: 4,285 of 5,047 rows stay
searchable); distances are keyed by (origin, destination); the flights table, never published upstream, is a
**substitute** built from the flight rows of the 45 training queries' reference information (so numbers on it
are not the official leaderboard's). "find" = rows whose name contains the given name as a substring and whose
city equals the given city.
"""

from __future__ import annotations

import ast
import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

FLIGHT_COLUMNS = ("Flight Number", "Price", "DepTime", "ArrTime", "ActualElapsedTime", "FlightDate",
                  "OriginCityName", "DestCityName", "Distance")


def _read_csv(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return [row for row in csv.DictReader(handle)]


def _complete(rows: list[dict]) -> list[dict]:
    return [row for row in rows if all(value is not None and str(value).strip() != "" for value in row.values())]


def strip_state(city: str) -> str:
    r"""``Albany(New York)`` -> ``Albany``: what ``re.sub(r"\(.*?\)", "", city).strip()`` gives (every shortest
    ``(...)`` within one line removed), in time linear in the text (the regex retried each ``(`` to the end of its
    line: 30,000 unclosed ones took seconds; tests/test_travel.py holds the two equal)."""
    text = str(city)
    out, i = [], 0
    close = newline = -1   # the next ")" and newline at or after the "(" being tried (found once, reused)
    while True:
        start = text.find("(", i)
        if start < 0:
            break
        if close <= start:
            close = text.find(")", start + 1)
            if close < 0:
                break   # no ")" after this "(": none after any later one either
        if newline <= start and newline != len(text):
            newline = text.find("\n", start + 1)
            newline = len(text) if newline < 0 else newline
        if newline < close:   # "." stops at a newline: this "(" closes nothing; try the next one
            out.append(text[i:start + 1])
            i = start + 1
            continue
        out.append(text[i:start])
        i = close + 1
    out.append(text[i:])
    return "".join(out).strip()


@dataclass
class Sandbox:
    accommodations: list[dict] = field(default_factory=list)   # NAME, room type, price, minimum nights, ...
    restaurants: list[dict] = field(default_factory=list)      # Name, City, Cuisines, Average Cost, ...
    attractions: list[dict] = field(default_factory=list)      # Name, City, ...
    distances: dict[tuple[str, str], dict] = field(default_factory=dict)
    cities: dict[str, str] = field(default_factory=dict)       # city -> state
    flights: list[dict] = field(default_factory=list)
    _indexes: dict = field(default_factory=dict, init=False, repr=False, compare=False)  # built on first use

    @classmethod
    def load(cls, folder: str | Path) -> "Sandbox":
        """The tables under ``folder/database`` (the layout of the TravelPlanner data)."""
        db = Path(folder) / "database"
        if not db.is_dir():
            raise ValueError(f"--data: {folder} has no database/ folder (expected the TravelPlanner data layout)")
        distances = {}
        for row in _read_csv(db / "googleDistanceMatrix" / "distance.csv"):
            distances.setdefault((row["origin"], row["destination"]), row)
        cities = {}
        for line in (db / "background" / "citySet_with_states.txt").read_text(encoding="utf-8").splitlines():
            if "\t" in line:
                city, state = line.split("\t", 1)
                cities[city.strip()] = state.strip()
        return cls(accommodations=_complete(_read_csv(db / "accommodations" / "clean_accommodations_2022.csv")),
                   restaurants=_complete(_read_csv(db / "restaurants" / "clean_restaurant_2022.csv")),
                   attractions=_complete(_read_csv(db / "attractions" / "attractions.csv")),
                   distances=distances, cities=cities, flights=substitute_flights(db / "train_ref_info.jsonl"))

    # -------------------------------------------------------------- lookups
    def find(self, table: str, name: str, city: str) -> list[dict]:
        """Rows of ``table`` in ``city`` whose name contains ``name``, in table order (each table is grouped by
        city once, so a check scans one city's rows, not the 4,285 accommodations)."""
        name_key = "NAME" if table == "accommodations" else "Name"
        return [row for row in self.rows_in(table, city) if name in row[name_key]]

    def rows_in(self, table: str, city: str) -> list[dict]:
        """The rows of ``table`` (accommodations, restaurants or attractions) in ``city``, in table order."""
        if table not in self._indexes:
            rows, city_key = {"accommodations": (self.accommodations, "city"),
                              "restaurants": (self.restaurants, "City"),
                              "attractions": (self.attractions, "City")}[table]
            index: dict[str, list[dict]] = {}
            for row in rows:
                index.setdefault(row[city_key], []).append(row)
            self._indexes[table] = index
        return self._indexes[table].get(city, [])

    def flights_between(self, origin: str, destination: str) -> list[dict]:
        """The flights from ``origin`` to ``destination`` (any date), in table order."""
        if "flights" not in self._indexes:
            index: dict[tuple[str, str], list[dict]] = {}
            for row in self.flights:
                index.setdefault((row["OriginCityName"], row["DestCityName"]), []).append(row)
            self._indexes["flights"] = index
        return self._indexes["flights"].get((origin, destination), [])

    def flight(self, number: str, origin: str | None = None, destination: str | None = None) -> dict | None:
        for row in self.flights:
            if row["Flight Number"] == number and (origin is None or (row["OriginCityName"] == origin
                                                                      and row["DestCityName"] == destination)):
                return row
        return None

    def distance_cost(self, origin: str, destination: str, mode: str) -> int | None:
        """The evaluation variant of the distance tool: None when the pair is missing, has no distance, or
        takes days; else int(km x 0.05) for a mode containing "driving", int(km) for "taxi"."""
        row = self.distances.get((strip_state(origin), strip_state(destination)))
        if row is None or not row.get("distance") or not row.get("duration") or "day" in row["duration"]:
            return None
        km = float(row["distance"].replace("km", "").replace(",", "").strip())
        if "driving" in mode:
            return int(km * 0.05)
        if mode == "taxi":
            return int(km)
        return None


def substitute_flights(path: Path) -> list[dict]:
    """The flight rows inside the training queries' reference information, first occurrence of each number."""
    rows, seen = [], set()
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        for description, content in json.loads(line).items():
            if not description.startswith("Flight from"):
                continue
            if isinstance(content, str):
                try:
                    content = ast.literal_eval(content)
                except (ValueError, SyntaxError):
                    continue
            for row in content if isinstance(content, list) else []:
                if isinstance(row, dict) and all(row.get(c) not in (None, "") for c in FLIGHT_COLUMNS) and \
                        row["Flight Number"] not in seen:
                    seen.add(row["Flight Number"])
                    rows.append({c: row[c] for c in FLIGHT_COLUMNS})
    return rows

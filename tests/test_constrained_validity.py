"""benchmarks/constrained_validity.py (issue 57): its rejection kinds, and one small measurement's bookkeeping."""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from constrained_validity import measure, reason_kind  # noqa: E402


def test_reason_kinds_drop_what_a_reason_quotes():
    assert reason_kind("object 'vase 1' is in 'desk 1', which is not a receptacle of this world") == \
        reason_kind("object 'egg 12' is in 'shelf 3', which is not a receptacle of this world") == \
        "object '…' is in '…', which is not a receptacle of this world"
    assert reason_kind("gold call fails on a fresh state: Stock ZZZ not found") == "gold call fails on a fresh state"
    assert reason_kind("goal.object: the world has 0 lettuce, the goal needs 2") == "goal.object"
    assert reason_kind("longer than 800 characters") == "longer than N characters"


def test_a_measurement_counts_every_generation_once():
    rows = [measure("household-smoke", 0, constrained, 1, []) for constrained in (False, True)]
    for row in rows:
        rejected = row["written"] - row["valid"]
        assert row["written"] > 0 and sum(row["reasons_in_full"].values()) == rejected
        assert sum(row["reasons"].values()) <= rejected and 0 <= row["distinct_valid"] <= row["valid"]
        assert sum(row["valid_by_level"].values()) == row["valid"]
    again = measure("household-smoke", 0, True, 1, [])   # the same seed writes the same tasks; only time differs
    assert {k: v for k, v in again.items() if k != "seconds_per_valid"} == \
        {k: v for k, v in rows[1].items() if k != "seconds_per_valid"}

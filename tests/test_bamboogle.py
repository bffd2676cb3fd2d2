"""Bamboogle: the answer normalisation, EM and F1 on the spec's worked examples, and a closed-book eval."""

import json
import os
from pathlib import Path

import pytest

from genenv.benchmarks.bamboogle import exact_match, extract_answer, load_questions, normalize_answer, token_f1

FIXTURE = Path(__file__).parent / "data" / "bamboogle"  # hand-made questions in the official format
OFFICIAL = Path(os.environ.get("GENENV_BAMBOOGLE_DATA", Path(__file__).resolve().parents[2] / "shared/data/bamboogle"))


@pytest.mark.parametrize("text,normal", [("The Titan IIIE.", "titan iiie"), ("April 30, 1789", "april 30 1789"),
                                         ("320 km/h", "320 kmh"), ("an apple", "apple"), ("U.S.A.", "usa"),
                                         ("theater", "theater"), ("  A  \t cat ", "cat"), ("“Curly”", "“curly”")])
def test_normalisation_follows_the_spec(text, normal):
    assert normalize_answer(text) == normal


def test_exact_match_and_f1_on_the_spec_examples():
    assert (exact_match("June 20, 1837", "20 June 1837"), token_f1("June 20, 1837", "20 June 1837")) == (0.0, 1.0)
    assert (exact_match("1797-03-04", "4 March 1797"), token_f1("1797-03-04", "4 March 1797")) == (0.0, 0.0)
    assert exact_match("Titan IIIE rocket", "Titan IIIE") == 0.0
    assert token_f1("Titan IIIE rocket", "Titan IIIE") == pytest.approx(0.8)  # P 2/3, R 1
    assert exact_match("the Titan IIIE.", "Titan IIIE") == 1.0


def test_f1_hand_values_and_the_yes_no_rule():
    assert token_f1("paris paris france", "paris france") == pytest.approx(0.8)  # overlap 2: P 2/3, R 1
    assert token_f1("no", "Yes") == 0.0 and token_f1("yes", "Yes.") == 1.0
    assert token_f1("yes it is", "yes") == 0.0  # HotpotQA: a yes/no gold only matches exactly
    assert token_f1("", "Paris") == 0.0


def test_answers_are_read_from_the_first_line():
    assert extract_answer("Answer: George Washington\nBecause ...") == "George Washington"
    assert extract_answer("\n  final answer: 1209 ") == "1209" and extract_answer(None) == ""


def test_loader_names_a_bad_line(tmp_path):
    bad = tmp_path / "bamboogle.jsonl"
    bad.write_text('{"id": 0, "question": "q", "answer": "a"}\nnot json\n')
    with pytest.raises(ValueError, match=r"bamboogle.jsonl:2: not JSON"):
        load_questions(bad)
    with pytest.raises(ValueError, match="does not exist"):
        load_questions(tmp_path / "missing.jsonl")


def test_official_file_has_the_125_questions():
    if not (OFFICIAL / "bamboogle.jsonl").exists():
        print(f"Bamboogle data not found at {OFFICIAL} (set GENENV_BAMBOOGLE_DATA): skipping")
        pytest.skip(f"Bamboogle data not found at {OFFICIAL}")
    questions = load_questions(OFFICIAL)
    assert len(questions) == 125 and [q["id"] for q in questions] == list(range(125))
    assert all(exact_match(q["answer"], q["answer"]) == 1.0 for q in questions)


def test_closed_book_eval_end_to_end_with_a_tiny_model(tiny_policy, tmp_path):
    from genenv.evaluate import eval_bamboogle

    scores = eval_bamboogle("tiny", FIXTURE, tmp_path, max_new_tokens=8, policy=tiny_policy, log=lambda m: None)
    assert scores["questions"] == 3 and scores["setting"] == "closed-book (no retrieval)"
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["gold"] for r in rows] == ["George Washington", "1209", "1 August 1819"]
    assert scores["em"] == sum(r["em"] for r in rows) / 3 and 0.0 <= scores["f1"] <= 1.0


def test_eval_command_rejects_a_missing_file_with_one_line(tmp_path, capsys):
    from genenv.cli import main
    assert main(["eval", "--benchmark", "bamboogle", "--model", "x", "--data", str(tmp_path / "none.jsonl")]) == 2
    assert capsys.readouterr().err.strip().endswith("does not exist")

"""Bamboogle: the answer normalisation, EM and F1 on the spec's worked examples, and a closed-book eval."""

import json
import os
from pathlib import Path

import pytest

from genenv.domains.multihop.bamboogle import exact_match, extract_answer, load_questions, normalize_answer, token_f1

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
    from genenv.domains.multihop.benchmark_eval import eval_bamboogle

    scores = eval_bamboogle("tiny", FIXTURE, tmp_path, max_new_tokens=8, policy=tiny_policy, log=lambda m: None)
    assert scores["questions"] == 3 and scores["setting"] == "closed-book (no retrieval)"
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert [r["gold"] for r in rows] == ["George Washington", "1209", "1 August 1819"]
    assert scores["em"] == sum(r["em"] for r in rows) / 3 and 0.0 <= scores["f1"] <= 1.0


def test_eval_command_rejects_a_missing_file_with_one_line(tmp_path, capsys):
    from genenv.cli import main
    assert main(["eval", "--benchmark", "bamboogle", "--model", "tiny", "--data", str(tmp_path / "none.jsonl")]) == 2
    assert capsys.readouterr().err.strip().endswith("does not exist")


def test_search_protocol_turns_searches_into_passages_and_ends_at_an_answer():
    from genenv.domains.multihop.bamboogle import PROTOCOL_HINT, load_corpus, search_episodes
    from genenv.domains.multihop.retrieval import Bm25Index

    index = Bm25Index(load_corpus(FIXTURE / "corpus.jsonl"))
    seen = []

    def respond(chats):  # scripted: search, then answer from what was found; or ramble
        seen.append([chat[-1]["content"] for chat in chats])
        out = []
        for chat in chats:
            last = chat[-1]["content"]
            if "Melville" in last:
                out.append("answer: 1 August 1819\nmore text")
            elif "whale" in last:
                out.append("search: Moby-Dick author born")
            else:
                out.append("I am not sure.")
        return out
    episodes = search_episodes(respond, ["When was the author of the novel about a whale born?", "Who?"],
                               lambda q: index.search(q, 1), max_steps=3)
    assert episodes[0] == {"actions": ["search: Moby-Dick author born", "answer: 1 August 1819"],
                           "answer": "1 August 1819"}
    assert seen[1][0] == "Found: Herman Melville, author of Moby-Dick, was born on 1 August 1819."
    assert episodes[1] == {"actions": ["I am not sure."] * 3, "answer": None} and seen[1][1] == PROTOCOL_HINT


def test_retrieval_eval_end_to_end_with_a_tiny_model(tiny_policy, tmp_path):
    from genenv.domains.multihop.benchmark_eval import eval_bamboogle

    scores = eval_bamboogle("tiny", FIXTURE, tmp_path, max_new_tokens=8, policy=tiny_policy, log=lambda m: None,
                            corpus=FIXTURE / "corpus.jsonl", max_steps=2)
    assert scores["setting"].startswith("retrieval over") and scores["questions"] == 3
    rows = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert all(1 <= len(r["actions"]) <= 2 for r in rows) and scores["answered"] == sum(r["answered"] for r in rows)


def test_corpus_loader_names_a_bad_line(tmp_path):
    from genenv.domains.multihop.bamboogle import load_corpus
    bad = tmp_path / "c.jsonl"
    bad.write_text('{"text": "ok"}\n{"title": "no text"}\n')
    with pytest.raises(ValueError, match=r"c.jsonl:2: expected an object with a string field text"):
        load_corpus(bad)

"""Bamboogle (Press et al., 2023): 125 two-hop questions, scored by exact match and token F1 with the common
SQuAD/HotpotQA normalisation, as our SPEC.md of the data describes it step by step.

The data stays where the user keeps it: ``--data`` (a ``bamboogle.jsonl`` file or the folder holding it) or
``$GENENV_BAMBOOGLE_DATA``. Closed-book: the model sees the question only (say so in every output).
"""

from __future__ import annotations

import collections
import os
import re
import string
from pathlib import Path

from genenv.io import read_jsonl_rows

DATA_ENV = "GENENV_BAMBOOGLE_DATA"
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = set(string.punctuation)
CLOSED_BOOK_PROMPT = "Answer the question with a short answer only (a name, a date, a number or a few words).\n"
SEARCH_PROMPT = ("Answer the question. You may look things up first: write 'search: <words>' and you will be shown "
                 "the best-matching passages; when you know the answer, write 'answer: <a short answer>'.\n")
PROTOCOL_HINT = "Act with 'search: <words>' or 'answer: <text>'."


def normalize_answer(text: str) -> str:
    """SPEC 2.2: lower-case; delete ASCII punctuation; whole-word a/an/the -> space; collapse whitespace."""
    text = str(text).lower()
    text = "".join(c for c in text if c not in _PUNCTUATION)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    """SPEC 2.3: multiset token overlap F1, with HotpotQA's yes/no/noanswer rule."""
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    if (pred in ("yes", "no", "noanswer") or ref in ("yes", "no", "noanswer")) and pred != ref:
        return 0.0
    pred_tokens, ref_tokens = pred.split(), ref.split()
    overlap = sum((collections.Counter(pred_tokens) & collections.Counter(ref_tokens)).values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(pred_tokens), overlap / len(ref_tokens)
    return 2 * precision * recall / (precision + recall)


def data_file(path: str | Path | None) -> Path:
    if path is None:
        path = os.environ.get(DATA_ENV)
    if path is None:
        raise ValueError(f"--data: give bamboogle.jsonl (or its folder), or set {DATA_ENV}")
    path = Path(path)
    if path.is_dir():
        path = path / "bamboogle.jsonl"
    if not path.is_file():
        raise ValueError(f"--data: {path} does not exist")
    return path


def load_questions(path: str | Path | None, limit: int | None = None) -> list[dict]:
    """``[{"id", "question", "answer"}]`` from a bamboogle.jsonl; a bad line is named with its number."""
    path = data_file(path)
    questions = []
    for number, row in read_jsonl_rows(path):
        if not all(isinstance(row.get(k), str) for k in ("question", "answer")):
            raise ValueError(f"{path}:{number}: expected an object with string fields question and answer")
        questions.append({"id": row.get("id", number - 1), "question": row["question"], "answer": row["answer"]})
    return questions[:limit or None]


def closed_book_messages(question: str) -> list[dict]:
    return [{"role": "system", "content": CLOSED_BOOK_PROMPT}, {"role": "user", "content": f"Question: {question}"}]


def first_line(response: str | None) -> str:
    """The first non-empty line of a response, stripped."""
    return next((part.strip() for part in (response or "").splitlines() if part.strip()), "")


def extract_answer(response: str | None) -> str:
    """The first non-empty line of a response, without a leading ``Answer:``."""
    return re.sub(r"^(final\s+)?answer\s*:\s*", "", first_line(response), flags=re.IGNORECASE).strip()


def read_action(response: str | None) -> tuple[str, str, str]:
    """An agent's turn in the ``search:``/``answer:`` protocol: (its first line, the verb lower-cased, the text
    after the colon)."""
    line = first_line(response)
    verb, _, argument = line.partition(":")
    return line, verb.strip().lower(), argument.strip()


def search_observation(verb: str, argument: str, search) -> str:
    """What the agent sees after a non-answer turn: the passages ``search`` finds, or how to act."""
    return "Found: " + " ".join(search(argument)) if verb == "search" and argument else PROTOCOL_HINT


def load_corpus(path: str | Path) -> list[str]:
    """Passages from a JSON Lines file: ``{"text": ...}`` (a ``title`` is put in front); a bad line is named."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--corpus: {path} does not exist")
    passages = []
    for number, row in read_jsonl_rows(path):
        if not isinstance(row.get("text"), str):
            raise ValueError(f"{path}:{number}: expected an object with a string field text")
        title = row.get("title")
        passages.append(f"{title}: {row['text']}" if isinstance(title, str) and title else row["text"])
    if not passages:
        raise ValueError(f"--corpus: {path} has no passages")
    return passages


def search_episodes(respond, questions: list[str], search, max_steps: int) -> list[dict]:
    """The ``search:``/``answer:`` protocol for many questions at once. ``respond``: chats -> responses;
    ``search``: query -> passages. Each episode ends at an answer or after ``max_steps`` actions (no answer)."""
    chats = [[{"role": "system", "content": SEARCH_PROMPT}, {"role": "user", "content": f"Question: {q}"}]
             for q in questions]
    episodes = [{"actions": [], "answer": None} for _ in questions]
    active = list(range(len(questions)))
    for _ in range(max_steps):
        if not active:
            break
        still = []
        for i, response in zip(active, respond([chats[i] for i in active])):
            line, verb, argument = read_action(response)
            episodes[i]["actions"].append(line)
            if verb == "answer":
                episodes[i]["answer"] = argument
                continue
            observation = search_observation(verb, argument, search)
            chats[i] = chats[i] + [{"role": "assistant", "content": line}, {"role": "user", "content": observation}]
            still.append(i)
        active = still
    return episodes

"""API-Bank levels 1-2 as the paper evaluates them (SPEC.md 5.1-5.5): the official prompts of the test files,
greedy decoding, API-call accuracy on the API items (a fresh state per item, the gold API's own check) and
ROUGE-L F on the response items; the gold calls replayed through the same executor give the ceiling."""

from __future__ import annotations

import collections
import json
import os
from pathlib import Path
from typing import Callable

from genenv.domains.apibank.scoring import score_call
from genenv.domains.apibank.tools import load_databases

LEVEL_FOLDERS = {1: "level-1-given-desc", 2: "level-2-toolsearcher"}
DATA_ENV = "GENENV_APIBANK_DATA"


def data_folder(path: str | Path | None) -> Path:
    """The user's copy of the API-Bank data (``--data`` or $GENENV_APIBANK_DATA), checked for what we read."""
    if path is None:
        path = os.environ.get(DATA_ENV)
    if path is None:
        raise ValueError(f"--data: give the folder of the API-Bank data (with init_database/, lv1-lv2-samples/ and "
                         f"test-data/), or set {DATA_ENV}")
    folder = Path(path)
    for needed in ("init_database", "lv1-lv2-samples", "test-data"):
        if not (folder / needed).is_dir():
            raise ValueError(f"--data: {folder} has no {needed}/ (expected the API-Bank data layout)")
    return folder


def load_api_items(folder: Path, level: int, limit: int | None = None) -> list[dict]:
    """The API items of a level: the test file's prompt and expected call, with the gold API turn of the
    dialogue it comes from (item id 2k: the k-th API turn; 2k+1: the turn after it, SPEC.md 5.1)."""
    items = []
    for item in _read_json(folder / "test-data" / f"level-{level}-api.json")[:limit or None]:
        dialogue = folder / "lv1-lv2-samples" / LEVEL_FOLDERS[level] / item["file"]
        turns = [json.loads(line) for line in dialogue.read_text().splitlines() if line.strip()]
        positions = [i for i, turn in enumerate(turns) if turn.get("role") == "API"]
        k, after = divmod(int(item["id"]), 2)
        if k >= len(positions) or positions[k] + after >= len(turns):
            raise ValueError(f"{dialogue}: no API turn for item id {item['id']}")
        gold = turns[positions[k] + after]
        if gold.get("role") != "API" or "result" not in gold:
            raise ValueError(f"{dialogue}: item id {item['id']} is not an API turn")
        items.append({**item, "gold": {"api_name": gold["api_name"], "result": gold["result"]}})
    return items


def load_response_items(folder: Path, level: int, limit: int | None = None) -> list[dict]:
    return _read_json(folder / "test-data" / f"level-{level}-response.json")[:limit or None]


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise ValueError(f"{path}: {error}") from None


def prompt_messages(item: dict) -> list[dict]:
    """The test file's instruction as the system message, the dialogue so far as the user's."""
    return [{"role": "system", "content": item["instruction"]}, {"role": "user", "content": item["input"]}]


def rouge_l(prediction: str, reference: str, digits: int | None = 4) -> float:
    """ROUGE-L F of the PyPI package ``rouge`` (what upstream scores responses with), rounded to ``digits`` as
    levels 1-2 do (level 3: ``None``, not rounded); 0 for an empty prediction or one the library cannot split
    into sentences (upstream crashes there)."""
    from rouge import Rouge  # noqa: PLC0415  (optional dependency: the "real" extra)

    if not prediction or not prediction.strip():
        return 0.0
    try:
        score = Rouge().get_scores(prediction, reference)[0]["rouge-l"]["f"]
    except (ValueError, RecursionError):
        return 0.0
    return score if digits is None else round(score, digits)


def evaluate_level(folder: Path, level: int, respond: Callable[[list], list[str | None]] | None,
                   limit: int | None = None, respond_call: Callable[[list], list[str | None]] | None = None) -> dict:
    """Scores of one level. ``respond``: prompts -> responses (None: only the gold ceiling is computed);
    ``respond_call``: the same for the API items, when they are answered otherwise (default ``respond``), as
    ``genenv eval`` answers them: stopping after the first line holding a call, all the verdict reads."""
    databases = load_databases(folder / "init_database")
    api_items = load_api_items(folder, level, limit)
    gold = [score_call(item["expected_output"], item["gold"], databases) for item in api_items]
    result = {"api_items": len(api_items),
              "gold_ceiling": {"correct": sum(v.correct for v in gold),
                               "accuracy": sum(v.correct for v in gold) / len(gold) if gold else None,
                               "failures": dict(collections.Counter(v.reason for v in gold if not v.correct))},
              "unavailable_offline_items": sum(v.reason == "unavailable offline" for v in gold)}
    if respond is None:
        return result
    responses = (respond_call or respond)([prompt_messages(item) for item in api_items])
    verdicts = [score_call(r or "", item["gold"], databases) for r, item in zip(responses, api_items)]
    response_items = load_response_items(folder, level, limit)
    replies = respond([prompt_messages(item) for item in response_items])
    rouge = [rouge_l(r or "", item["expected_output"]) for r, item in zip(replies, response_items)]
    result.update(
        correct=sum(v.correct for v in verdicts),
        accuracy=sum(v.correct for v in verdicts) / len(verdicts) if verdicts else None,
        errors=dict(collections.Counter(v.reason for v in verdicts if not v.correct)),
        response_items=len(response_items), rouge_l=sum(rouge) / len(rouge) if rouge else None,
        items=[{"file": it["file"], "id": it["id"], "kind": "api", "prediction": r, "correct": v.correct,
                "reason": v.reason} for it, r, v in zip(api_items, responses, verdicts)]
        + [{"file": it["file"], "id": it["id"], "kind": "response", "prediction": r, "rouge_l": s}
           for it, r, s in zip(response_items, replies, rouge)])
    return result

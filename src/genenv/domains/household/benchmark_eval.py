"""``genenv eval --benchmark alfworld --games DIR --model PATH``: a household agent on ALFWorld game files (e.g. the
official valid_unseen split) played in ALFWorld's own engine: full-episode success and single-step accuracy, overall
and per task type."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from genenv.domains.household import alfworld
from genenv.domains.household.domain import HouseholdDomain
from genenv.eval_driver import fmt, load_eval_policy
from genenv.io import atomic_write_json
from genenv.progress import progress_bar


def eval_alfworld(model: str, games: str | Path, out: str | Path, limit: int | None = None, max_steps: int = 50,
                  max_new_tokens: int = 48, max_context_tokens: int = 0, device: str = "cpu", threads: int = 2,
                  sampler: str = "transformers", sampler_dtype: str = "f16",
                  log=print, policy=None) -> dict:
    """A household agent on ALFWorld game files (e.g. the official valid_unseen split) in ALFWorld's engine:
    full-episode success and single-step accuracy, overall and per task type; writes OUT/scores.json."""


    torch.set_num_threads(threads)
    alfworld._require()
    files = alfworld.find_games(games)[:limit or None]
    if policy is None:
        policy = load_eval_policy(model, log, device, threads, sampler, sampler_dtype=sampler_dtype)
    start = time.perf_counter()
    with progress_bar(len(files), "alfworld games", leave=False) as bar:
        scores = alfworld.eval_games(policy, HouseholdDomain(max_steps=max_steps), files, max_steps=max_steps,
                                     max_new_tokens=max_new_tokens, max_context_tokens=max_context_tokens,
                                     progress=bar.update)
    scores.update(model=model, games_dir=str(games), seconds=round(time.perf_counter() - start, 1))
    atomic_write_json(Path(out) / "scores.json", scores)
    for task_type, row in scores["by_task_type"].items():
        log(f"{task_type:32s} success {fmt(row['success'])}  step accuracy {fmt(row['step_accuracy'])} "
            f"({row['games']} games)")
    log(f"{'overall':32s} success {fmt(scores['success'])}  step accuracy {fmt(scores['step_accuracy'])} "
        f"({scores['games']} games)")
    return scores


def add_arguments(parser) -> None:
    """``genenv eval --benchmark alfworld``'s own options."""
    parser.add_argument("--games", default=None, help="folder of game.tw-pddl files (searched recursively)")
    parser.add_argument("--alfworld-max-steps", type=int, default=50, help="actions per episode")


def from_command_line(args, common: dict) -> dict:
    """``genenv eval --benchmark alfworld``: the options it reads (``common``: limit, device, threads, sampler)."""
    if not args.games:
        raise ValueError("--games: give the folder of ALFWorld game files (e.g. json_2.1.1/valid_unseen)")
    return eval_alfworld(args.model, args.games, args.out, max_steps=args.alfworld_max_steps, **common)

"""``genenv eval --benchmark travelplanner --data PATH --queries train --model smollm2``: TravelPlanner queries planned
in the sole-planning mode, scored by the benchmark's constraint evaluator with its pass rates."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from genenv.domains.travel import constraints as travel_checks
from genenv.domains.travel import queries as travel_queries
from genenv.domains.travel.sandbox import Sandbox
from genenv.eval_driver import greedy_with_progress, load_eval_policy, save_results


def eval_travelplanner(model: str, data: str | Path, queries: str, out: str | Path, limit: int | None = None,
                       max_new_tokens: int = 1024, batch_size: int = 4, device: str = "cpu", threads: int = 2,
                       sampler: str = "transformers", sampler_dtype: str = "f16",
                       log=print, policy=None, hard_denominator: int | None = None) -> dict:
    """TravelPlanner, sole-planning mode: the model writes each plan from the query's reference information; the
    evaluator gives delivery, commonsense and hard micro/macro, final pass rate and the paper's average.
    ``queries``: "train" (the 45 training queries, structured fields derived) or a JSON Lines file of structured
    queries in the official format. Plans, verdicts and rates go to OUT/results.jsonl and OUT/scores.json."""
    torch.set_num_threads(threads)
    if data is None:
        raise ValueError("--data: give the folder of the TravelPlanner data (with database/)")
    sandbox = Sandbox.load(data)  # bad paths and files fail before the model loads
    items = (travel_queries.load_train(data, sandbox, limit) if queries == "train"
             else travel_queries.load_queries(queries, limit))
    if policy is None:
        policy = load_eval_policy(model, log, device, threads, sampler, use_chat_template=True,
                                  sampler_dtype=sampler_dtype)
    start = time.perf_counter()
    responses = greedy_with_progress(policy, [item["messages"] for item in items], max_new_tokens, batch_size,
                                      "travelplanner")
    rows, results = [], []
    for item, response in zip(items, responses):
        plan = travel_checks.parse_plan(response)
        result = travel_checks.evaluate_plan(item["query"], plan, sandbox)
        results.append(result)
        rows.append({"query": item["query"]["query"], "response": response, "plan": plan, **result,
                     "prompt_fit": response is not None})
    rates = travel_checks.pass_rates(results, hard_denominator)
    scores = {"model": model, "queries": queries, "n": len(items), "limit": limit,
              "flights": "substitute (the 313 training flights; not the official table)", **rates,
              "seconds": round(time.perf_counter() - start, 1)}
    save_results(out, rows, scores)
    log("travelplanner (" + str(len(items)) + " queries): " + ", ".join(
        f"{name} {100 * rates[name]:.1f}%" for name in ("delivery", "commonsense_micro", "commonsense_macro",
                                                        "hard_micro", "hard_macro", "final", "average")))
    return scores


def add_arguments(parser) -> None:
    """``genenv eval --benchmark travelplanner``'s own options."""
    parser.add_argument("--data", default=None, help="the folder holding TravelPlanner's database/")
    parser.add_argument("--queries", default="train", help="'train' (the 45 training queries) or a JSON Lines file "
                        "of structured queries in the official format")


def from_command_line(args, common: dict) -> dict:
    """``genenv eval --benchmark travelplanner``: the options it reads (``common``: limit, device, threads,
    sampler)."""
    return eval_travelplanner(args.model, args.data, args.queries, args.out, batch_size=args.batch_size, **common)


"""``genenv eval --benchmark api-bank --levels 1,2 --data PATH --model smollm2``: API-Bank's levels 1-3 on the
official test files: API-call accuracy, response ROUGE-L, and the gold calls' own score through the same executor
beside them."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from genenv.domains.apibank import evaluator as apibank
from genenv.domains.apibank.calls import extract_call
from genenv.domains.apibank.level3 import evaluate_level3
from genenv.eval_driver import StopAfterLine, greedy_with_progress, load_eval_policy, save_results


def eval_apibank(model: str, data: str | Path | None, levels: list[int], out: str | Path, limit: int | None = None,
                 max_new_tokens: int = 128, batch_size: int = 8, device: str = "cpu", threads: int = 2,
                 sampler: str = "transformers", sampler_dtype: str = "f16", log=print,
                 policy=None, whole_answers: bool = False) -> dict:
    """API-Bank levels 1-3: per level the API-call accuracy, the response ROUGE-L, the gold ceiling and how many
    items need an API that is unavailable offline (level 3: per step, in one shared state; ``limit`` counts
    items on levels 1-2 and tasks on level 3); every item's verdict in OUT/results.jsonl.

    An answer to an API item stops after the first line holding a call (:class:`StopAfterLine` with
    :func:`extract_call`): the verdict reads that line and nothing after it, so it is the verdict of the whole
    answer, and the decoding after it is saved. ``whole_answers`` (``--whole-answers``) decodes every answer to its
    end or ``max_new_tokens``, as before, for predictions to read whole."""
    torch.set_num_threads(threads)
    folder = apibank.data_folder(data)  # bad paths and levels fail before the model loads
    scored_levels = (*apibank.LEVEL_FOLDERS, 3)
    for level in levels:
        if level not in scored_levels:
            raise ValueError(f"--levels: {level} is not an API-Bank level; choose from "
                             f"{', '.join(map(str, scored_levels))}")
    if policy is None:
        policy = load_eval_policy(model, log, device, threads, sampler, use_chat_template=True,
                                  sampler_dtype=sampler_dtype)

    def respond(prompts):
        return greedy_with_progress(policy, prompts, max_new_tokens, batch_size, "api-bank")

    stop = None if whole_answers else StopAfterLine(policy, lambda lines: extract_call(lines) is not None)

    def respond_call(prompts):
        return greedy_with_progress(policy, prompts, max_new_tokens, batch_size, "api-bank", stop=stop)

    out = Path(out)
    scores = {"model": model, "data": str(folder), "limit": limit, "max_new_tokens": max_new_tokens,
              "whole_answers": whole_answers, "levels": {}}
    rows = []
    for level in levels:
        start = time.perf_counter()
        result = (evaluate_level3(folder, respond, limit, respond_call=respond_call) if level == 3 else
                  apibank.evaluate_level(folder, level, respond, limit, respond_call=respond_call))
        rows += [{"level": level, **item} for item in result.pop("items")]
        result["seconds"] = round(time.perf_counter() - start, 1)
        scores["levels"][str(level)] = result
        ceiling = result["gold_ceiling"]
        rouge = f"{result['rouge_l'] if result['rouge_l'] is not None else float('nan'):.4f}"
        if level == 3:
            log(f"level 3: API calls {result['accuracy']:.3f} ({result['correct']}/{result['scorable_steps']} steps "
                f"scorable offline; the gold calls score {ceiling['correct']}; {result['unavailable_offline_steps']} "
                f"ToolSearcher steps unavailable offline, so task accuracy is not scored), responses ROUGE-L "
                f"{rouge} ({result['response_items']})")
        else:
            log(f"level {level}: API calls {result['accuracy']:.3f} ({result['correct']}/{result['api_items']}; the "
                f"gold calls score {ceiling['correct']}/{result['api_items']}, {result['unavailable_offline_items']} "
                f"items need an API unavailable offline), responses ROUGE-L {rouge} ({result['response_items']})")
    save_results(out, rows, scores)
    return scores


def add_arguments(parser) -> None:
    """``genenv eval --benchmark api-bank``'s own options."""
    parser.add_argument("--data", default=None, help="the folder of the API-Bank data (init_database/, "
                        "lv1-lv2-samples/, test-data/; default $GENENV_APIBANK_DATA)")
    parser.add_argument("--levels", default="1,2,3", help="comma-separated levels (1-3)")
    parser.add_argument("--whole-answers", action="store_true",
                        help="decode every answer to its end (default: an API item's answer stops after the first "
                        "line holding a call, the only line its verdict reads)")


def from_command_line(args, common: dict) -> dict:
    """``genenv eval --benchmark api-bank``: the options it reads (``common``: limit, device, threads, sampler)."""
    try:
        levels = [int(v) for v in args.levels.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"--levels: {args.levels!r} is not a comma-separated list of levels") from None
    return eval_apibank(args.model, args.data, levels, args.out, max_new_tokens=args.max_new_tokens,
                        batch_size=args.batch_size, whole_answers=args.whole_answers, **common)

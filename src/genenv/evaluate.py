"""``genenv eval``: a model on a real benchmark, scored by the benchmark's own checker.

``genenv eval --benchmark bfcl --categories simple_python,parallel,parallel_multiple --model smollm2 --limit 50``
prompts the model as BFCL prompts a chat model (BFCL's system prompt, greedy decoding), scores every response
with BFCL's decoder and AST checker, prints accuracy per category and overall, and writes the raw responses
in BFCL's result-file format (``OUT/genenv/BFCL_v4_<category>_result.json``) plus ``OUT/scores.json``.

``genenv eval --benchmark api-bank --levels 1,2 --data PATH --model smollm2`` scores API-Bank's levels 1-2 on
the official test files (:mod:`genenv.evaluators.apibank`): API-call accuracy, response ROUGE-L, and the gold
calls' own score through the same executor beside them.

``genenv eval --benchmark bamboogle --data PATH --model smollm2`` answers Bamboogle's 125 two-hop questions
closed-book and scores exact match and token F1 (:mod:`genenv.evaluators.bamboogle`).

``genenv eval --benchmark travelplanner --data PATH --queries train --model smollm2`` plans TravelPlanner queries in
the sole-planning mode and prints its pass rates (:mod:`genenv.evaluators.travelplanner`).

``--categories multi_turn_long_context`` (or ``multi_turn_base``) follows the paper's protocol: every turn is
scored on its own against the ground truth, with BFCL's executable back-ends and checkers
(:mod:`genenv.evaluators.bfcl_multiturn`); accuracy there is per turn.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from genenv.coevolve import evaluate_all
from genenv.config import RunConfig
from genenv.domains import make_domain
from genenv.domains.household import HouseholdDomain
from genenv.evaluators import alfworld, bamboogle, bfcl, bfcl_multiturn
from genenv.evaluators.apibank import evaluate as apibank
from genenv.evaluators.travelplanner import constraints as travel_checks
from genenv.evaluators.travelplanner import queries as travel_queries
from genenv.evaluators.travelplanner.sandbox import Sandbox
from genenv.io import atomic_write_json, atomic_write_jsonl
from genenv.models.gguf_export import DTYPES as GGUF_DTYPES
from genenv.models.policy import Policy
from genenv.models.registry import llamacpp_refusal, resolve_model
from genenv.progress import progress_bar
from genenv.retrieval import Bm25Index
from genenv.rollout import context_budget
from genenv.splits import data_split


def fmt(value: float | None) -> str:
    """A score for the log: three decimals, or n/a when there was nothing to score."""
    return "n/a" if value is None else f"{value:.3f}"


def _greedy_responses(policy, prompts: list, max_new_tokens: int, batch_size: int,
                      prompt_ids: list[list[int]] | None = None) -> list[str | None]:
    """Greedy responses, in :func:`answer_order_key`'s order in batches (greedy makes order irrelevant).

    A prompt that cannot fit the model's context window together with ``max_new_tokens`` gets ``None``.
    """

    prompt_ids = policy.encode_prompts(prompts) if prompt_ids is None else prompt_ids
    budget = context_budget(policy, max_new_tokens)
    fits = [i for i, ids in enumerate(prompt_ids) if len(ids) <= budget]
    order = sorted(fits, key=lambda i: answer_order_key(policy, prompt_ids[i]))
    responses: list[str | None] = [None] * len(prompts)
    step = len(order) if getattr(policy, "fast_sampler", None) is not None else batch_size  # llama.cpp: windows
    for first in range(0, len(order), max(1, step)):
        chunk = order[first:first + step]
        gens = policy.generate([prompts[i] for i in chunk], greedy=True, max_new_tokens=max_new_tokens,
                               batch_size=batch_size, prompt_ids=[prompt_ids[i] for i in chunk])
        for i, group in zip(chunk, gens):
            responses[i] = group[0].text
    return responses


def answer_order_key(policy, prompt_ids: list[int]):
    """The order greedy answers are decoded in (greedy makes it irrelevant to the answers): longest prompts first
    on transformers (batches with less padding); in token order on llama.cpp, which decodes prompt by prompt and
    keeps the KV cells a prompt shares with the one before it, so neighbours in token order prefill only what they
    do not share (API-Bank level 1: 74% of the prompt tokens are shared with the previous prompt)."""
    return prompt_ids if policy.fast_sampler is not None else -len(prompt_ids)


def _greedy_with_progress(policy, prompts: list, max_new_tokens: int, batch_size: int, label: str) -> list:
    """:func:`_greedy_responses` over many prompts, a few batches at a time, with a progress bar. On llama.cpp the
    prompts go in token order over all of them (:func:`answer_order_key`), not slice by slice."""
    prompt_ids, order = None, list(range(len(prompts)))
    if getattr(policy, "fast_sampler", None) is not None:
        prompt_ids = policy.encode_prompts(prompts)
        order.sort(key=lambda i: answer_order_key(policy, prompt_ids[i]))
    responses: list[str | None] = [None] * len(prompts)
    with progress_bar(len(prompts), label, leave=False) as bar:
        for first in range(0, len(order), 8 * batch_size):  # progress in slices of a few batches
            chunk = order[first:first + 8 * batch_size]
            answers = _greedy_responses(policy, [prompts[i] for i in chunk], max_new_tokens, batch_size,
                                        None if prompt_ids is None else [prompt_ids[i] for i in chunk])
            for i, response in zip(chunk, answers):
                responses[i] = response
            bar.update(len(chunk))
    return responses


def _ast_category(policy, category: str, entries: list[dict], out: Path, max_new_tokens: int,
                  batch_size: int) -> dict:

    responses = _greedy_with_progress(policy, [bfcl.chat_messages(e) for e in entries], max_new_tokens, batch_size,
                                      f"bfcl {category}")
    rows = []
    for entry, response in zip(entries, responses):
        response = "" if response is None else response
        verdict = bfcl.check(entry, response)
        rows.append({"id": entry["id"], "result": response, "valid": verdict["valid"],
                     "error_type": verdict["error_type"]})
    return {"rows": rows, "result_file": bfcl.write_result_file(out, category, rows),
            "per_entry": [{k: r[k] for k in ("id", "valid", "error_type")} for r in rows]}


def _multi_turn_category(policy, category: str, entries: list[dict], out: Path, max_new_tokens: int,
                         batch_size: int, max_steps: int) -> dict:

    with progress_bar(bfcl_multiturn.count_turns(entries), f"bfcl {category} (turns)", leave=False) as bar:
        rows = bfcl_multiturn.run_turns(
            entries, lambda chats: _greedy_responses(policy, chats, max_new_tokens, batch_size),
            max_steps=max_steps, progress=bar.update)
    result_file = bfcl.write_result_file(out, category, bfcl_multiturn.result_file_rows(entries, rows))
    return {"rows": rows, "result_file": result_file,
            "per_entry": [{k: r[k] for k in ("id", "turn", "valid", "error_type")} for r in rows],
            "turns_exceeding_context": sum(r["error_type"] == "prompt_exceeds_context" for r in rows)}


def load_eval_policy(model: str, log, device: str, threads: int, sampler: str = "transformers",
                     use_chat_template: bool = False, sampler_dtype: str = "f16"):
    """The evaluated model; with ``sampler="llama.cpp"`` (``--sampler``) its greedy answers decoded by llama.cpp from
    weights written in its packaged GGUF's image as ``sampler_dtype`` (``--sampler-dtype``: f16, bf16, f32 or
    q8_0; :mod:`genenv.models.llamacpp`; a packaged model only), 16 answers side by side."""
    if sampler not in ("transformers", "llama.cpp"):
        raise ValueError(f"--sampler: {sampler!r} is not transformers or llama.cpp")
    if sampler_dtype not in GGUF_DTYPES:
        raise ValueError(f"--sampler-dtype: {sampler_dtype!r} is not one of {', '.join(GGUF_DTYPES)}")
    refusal = llamacpp_refusal(model) if sampler == "llama.cpp" else None
    if refusal:   # refused before any model loads
        raise ValueError(f"--sampler: {refusal}")
    policy = Policy.load(resolve_model(model, log), device=device, use_chat_template=use_chat_template)
    if sampler == "llama.cpp":
        from genenv.models.llamacpp import packaged_sampler  # noqa: PLC0415

        policy.fast_sampler = packaged_sampler(policy, model, threads=threads, dtype=sampler_dtype, context=8192,
                                              parallel=16)
    return policy


def eval_bfcl(model: str, categories: list[str], out: str | Path, limit: int | None = None,
              max_new_tokens: int = 128, batch_size: int = 8, device: str = "cpu", threads: int = 2,
              sampler: str = "transformers", sampler_dtype: str = "f16",
              max_steps: int = 5, log=print, policy=None) -> dict:
    """Accuracy per category and overall. AST categories score one response per entry; multi-turn
    categories score every turn on its own (``genenv.evaluators.bfcl_multiturn``), so their unit is a turn."""


    torch.set_num_threads(threads)
    entries_by_category = {}  # bad names fail before the model loads
    for category in categories:
        if category in bfcl_multiturn.MULTI_TURN_CATEGORIES:
            entries_by_category[category] = bfcl_multiturn.load_entries(category, limit)
        elif category in bfcl.AST_CATEGORIES:
            entries_by_category[category] = bfcl.load_category(category, limit)
        else:
            raise ValueError(f"--categories: {category!r} is not a BFCL category we score; choose from "
                             f"{', '.join(bfcl.AST_CATEGORIES + bfcl_multiturn.MULTI_TURN_CATEGORIES)}")
    if policy is None:
        policy = load_eval_policy(model, log, device, threads, sampler, use_chat_template=True,
                                  sampler_dtype=sampler_dtype)
    out = Path(out)
    scores = {"model": model, "limit": limit, "max_new_tokens": max_new_tokens, "max_steps": max_steps,
              "categories": {}}
    for category, entries in entries_by_category.items():
        start = time.perf_counter()
        if category in bfcl_multiturn.MULTI_TURN_CATEGORIES:
            result = _multi_turn_category(policy, category, entries, out, max_new_tokens, batch_size, max_steps)
        else:
            result = _ast_category(policy, category, entries, out, max_new_tokens, batch_size)
        rows = result.pop("rows")
        correct = sum(r["valid"] for r in rows)
        accuracy = correct / len(rows) if rows else None
        scores["categories"][category] = {"accuracy": accuracy, "correct": correct, "total": len(rows),
                                          "unit": "turn" if "turns_exceeding_context" in result else "entry",
                                          "seconds": round(time.perf_counter() - start, 1),
                                          **{k: (str(v) if k == "result_file" else v) for k, v in result.items()}}
        extra = (f", {result['turns_exceeding_context']} turns longer than the context window"
                 if result.get("turns_exceeding_context") else "")
        log(f"{category:24s} {accuracy if accuracy is not None else float('nan'):.3f} ({correct}/{len(rows)}){extra}")
    correct = sum(c["correct"] for c in scores["categories"].values())
    total = sum(c["total"] for c in scores["categories"].values())
    scores["overall"] = {"accuracy": correct / total if total else None, "correct": correct, "total": total}
    atomic_write_json(out / "scores.json", scores)
    log(f"{'overall':24s} {scores['overall']['accuracy'] if total else float('nan'):.3f} ({correct}/{total})")
    return scores


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


def eval_apibank(model: str, data: str | Path | None, levels: list[int], out: str | Path, limit: int | None = None,
                 max_new_tokens: int = 128, batch_size: int = 8, device: str = "cpu", threads: int = 2,
                 sampler: str = "transformers", sampler_dtype: str = "f16", log=print,
                 policy=None) -> dict:
    """API-Bank levels 1-3: per level the API-call accuracy, the response ROUGE-L, the gold ceiling and how many
    items need an API that is unavailable offline (level 3: per step, in one shared state; ``limit`` counts
    items on levels 1-2 and tasks on level 3); every item's verdict in OUT/results.jsonl."""
    from genenv.evaluators.apibank.level3 import evaluate_level3  # noqa: PLC0415

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
        return _greedy_with_progress(policy, prompts, max_new_tokens, batch_size, "api-bank")

    out = Path(out)
    scores = {"model": model, "data": str(folder), "limit": limit, "max_new_tokens": max_new_tokens, "levels": {}}
    rows = []
    for level in levels:
        start = time.perf_counter()
        result = (evaluate_level3(folder, respond, limit) if level == 3 else
                  apibank.evaluate_level(folder, level, respond, limit))
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
    atomic_write_jsonl(out / "results.jsonl", rows)
    atomic_write_json(out / "scores.json", scores)
    return scores


def eval_bamboogle(model: str, data: str | Path | None, out: str | Path, limit: int | None = None,
                   max_new_tokens: int = 32, batch_size: int = 8, device: str = "cpu", threads: int = 2,
                   sampler: str = "transformers", sampler_dtype: str = "f16", log=print,
                   policy=None, corpus: str | Path | None = None, max_steps: int = 5, top_k: int = 3) -> dict:
    """Bamboogle: EM and F1 over the questions, closed-book, or with ``corpus`` through the ``search:``/``answer:``
    protocol (BM25 over the user's passages, ``top_k`` per search, ``max_steps`` actions per question); every
    answer and verdict in OUT/results.jsonl."""
    torch.set_num_threads(threads)
    questions = bamboogle.load_questions(data, limit)  # bad files fail before the model loads
    passages = bamboogle.load_corpus(corpus) if corpus is not None else None
    if policy is None:
        policy = load_eval_policy(model, log, device, threads, sampler, use_chat_template=True,
                                  sampler_dtype=sampler_dtype)
    start = time.perf_counter()

    if passages is None:
        setting = "closed-book (no retrieval)"
        responses = _greedy_with_progress(policy, [bamboogle.closed_book_messages(q["question"]) for q in questions],
                                          max_new_tokens, batch_size, "bamboogle")
        episodes = [{"actions": [r], "answer": bamboogle.extract_answer(r)} for r in responses]
    else:
        setting = f"retrieval over {corpus} ({len(passages)} passages, BM25 top {top_k}, {max_steps} actions)"
        index = Bm25Index(passages)
        episodes = bamboogle.search_episodes(lambda chats: _greedy_responses(policy, chats, max_new_tokens, batch_size),
                                             [q["question"] for q in questions],
                                             lambda query: index.search(query, top_k), max_steps)
    rows = []
    for question, episode in zip(questions, episodes):
        answer = episode["answer"] or ""
        rows.append({"id": question["id"], "question": question["question"], "gold": question["answer"],
                     "actions": episode["actions"], "answered": episode["answer"] is not None, "answer": answer,
                     "em": bamboogle.exact_match(answer, question["answer"]),
                     "f1": bamboogle.token_f1(answer, question["answer"])})
    n = len(rows)
    scores = {"model": model, "setting": setting, "questions": n, "limit": limit,
              "answered": sum(r["answered"] for r in rows),
              "em": sum(r["em"] for r in rows) / n if n else None, "f1": sum(r["f1"] for r in rows) / n if n else None,
              "seconds": round(time.perf_counter() - start, 1)}
    out = Path(out)
    atomic_write_jsonl(out / "results.jsonl", rows)
    atomic_write_json(out / "scores.json", scores)
    log(f"bamboogle, {setting}: EM {scores['em'] if n else float('nan'):.3f}, "
        f"F1 {scores['f1'] if n else float('nan'):.3f} over {n} questions")
    return scores


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
    responses = _greedy_with_progress(policy, [item["messages"] for item in items], max_new_tokens, batch_size,
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
    out = Path(out)
    atomic_write_jsonl(out / "results.jsonl", rows)
    atomic_write_json(out / "scores.json", scores)
    log("travelplanner (" + str(len(items)) + " queries): " + ", ".join(
        f"{name} {100 * rates[name]:.1f}%" for name in ("delivery", "commonsense_micro", "commonsense_macro",
                                                        "hard_micro", "hard_macro", "final", "average")))
    return scores


def eval_split(cfg: RunConfig, model: str, out: str | Path, log=print, policy=None) -> dict:
    """A model on a run config's own dev and held-out sets, scored exactly as ``genenv run`` scores them (the
    same tasks, prompts, greedy decoding and verdicts): the number a run reports after its warm start and at
    every evaluation, for a model that has not been through the run (SmolLM2 before any training, an exported
    ``final/agent``, another run's agent). Every task's actions and verdict go to OUT/results.jsonl."""
    torch.set_num_threads(cfg.threads)
    domain = make_domain(cfg.domain.name, **cfg.domain.options)  # bad data paths fail before the model loads
    split = data_split(cfg, domain)
    if policy is None:
        policy = Policy.load(resolve_model(model, log), device=cfg.device, dtype=cfg.agent.dtype)
    start = time.perf_counter()
    rows: list[dict] = []
    metrics = evaluate_all(cfg, domain, policy, split, records=rows)
    scores = {"model": model, "config": cfg.name, "domain": cfg.domain.name, "dev_tasks": len(split.dev),
              "heldout_tasks": len(split.heldout), **metrics, "seconds": round(time.perf_counter() - start, 1)}
    out = Path(out)
    atomic_write_jsonl(out / "results.jsonl", rows)
    atomic_write_json(out / "scores.json", scores)
    log(f"{cfg.name} ({cfg.domain.name}): held-out success {fmt(metrics['heldout_success'])} over "
        f"{len(split.heldout)} tasks, dev {fmt(metrics['dev_success'])} over {len(split.dev)}")
    return scores

"""``genenv eval --benchmark bamboogle --data PATH --model smollm2``: Bamboogle's 125 two-hop questions, closed-book
or with ``--corpus`` through the ``search:``/``answer:`` protocol, scored by exact match and token F1."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from genenv.domains.multihop import bamboogle
from genenv.domains.multihop.retrieval import Bm25Index
from genenv.eval_driver import greedy_responses, greedy_with_progress, load_eval_policy, save_results


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
        responses = greedy_with_progress(policy, [bamboogle.closed_book_messages(q["question"]) for q in questions],
                                          max_new_tokens, batch_size, "bamboogle")
        episodes = [{"actions": [r], "answer": bamboogle.extract_answer(r)} for r in responses]
    else:
        setting = f"retrieval over {corpus} ({len(passages)} passages, BM25 top {top_k}, {max_steps} actions)"
        index = Bm25Index(passages)
        episodes = bamboogle.search_episodes(lambda chats: greedy_responses(policy, chats, max_new_tokens, batch_size),
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
    save_results(out, rows, scores)
    log(f"bamboogle, {setting}: EM {scores['em'] if n else float('nan'):.3f}, "
        f"F1 {scores['f1'] if n else float('nan'):.3f} over {n} questions")
    return scores


def add_arguments(parser) -> None:
    """``genenv eval --benchmark bamboogle``'s own options."""
    parser.add_argument("--data", default=None, help="bamboogle.jsonl or its folder (default $GENENV_BAMBOOGLE_DATA)")
    parser.add_argument("--corpus", default=None, help="a JSON Lines file of passages ({\"text\": ...}) to search "
                        "(search:/answer: protocol, BM25); without it the questions are asked closed-book")
    parser.add_argument("--max-steps", type=int, default=5, help="with --corpus: actions per question")


def from_command_line(args, common: dict) -> dict:
    """``genenv eval --benchmark bamboogle``: the options it reads (``common``: limit, device, threads, sampler)."""
    return eval_bamboogle(args.model, args.data, args.out, batch_size=args.batch_size,
                          max_new_tokens=min(args.max_new_tokens, 64), corpus=args.corpus, max_steps=args.max_steps,
                          **common)

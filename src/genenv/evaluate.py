"""``genenv eval --benchmark heldout``: a model on a run config's own dev and held-out sets, scored as a run scores
them. The real benchmarks' drivers live with their domains (``genenv.domains.<name>.benchmark``, found through the
package's ``BENCHMARKS``: :func:`genenv.domains.benchmark_module`)."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from genenv.benchmarking import fmt, save_results
from genenv.config import RunConfig
from genenv.domains import make_domain
from genenv.evaluation import evaluate_all
from genenv.models.policy import Policy
from genenv.models.registry import resolve_model
from genenv.splits import data_split


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
    save_results(out, rows, scores)
    log(f"{cfg.name} ({cfg.domain.name}): held-out success {fmt(metrics['heldout_success'])} over "
        f"{len(split.heldout)} tasks, dev {fmt(metrics['dev_success'])} over {len(split.dev)}")
    return scores

"""``genenv eval --benchmark heldout``: a model on a run config's own dev and held-out sets, scored as a run scores
them. The real benchmarks' drivers live with their domains (``genenv.domains.<name>.benchmark``, found through the
package's ``BENCHMARKS`` or a plugin's entry point: :func:`genenv.domains.benchmark_module`); each, like this one,
declares its options (``add_arguments``) and runs from them (``from_command_line``)."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import torch

from genenv.config import RunConfig
from genenv.domains import make_domain
from genenv.eval_driver import fmt, load_eval_policy, save_results
from genenv.evaluation import evaluate_all
from genenv.splits import data_split


def eval_split(cfg: RunConfig, model: str, out: str | Path, log=print, policy=None, sampler: str = "transformers",
               sampler_dtype: str = "f16") -> dict:
    """A model on a run config's own dev and held-out sets, scored exactly as ``genenv run`` scores them (the
    same tasks, prompts, greedy decoding and verdicts): the number a run reports after its warm start and at
    every evaluation, for a model that has not been through the run (SmolLM2 before any training, an exported
    ``final/agent``, another run's agent). Every task's actions and verdict go to OUT/results.jsonl. ``sampler``:
    the decoder of the answers (:func:`genenv.eval_driver.load_eval_policy`)."""
    torch.set_num_threads(cfg.threads)
    domain = make_domain(cfg.domain.name, **cfg.domain.options)  # bad data paths fail before the model loads
    split = data_split(cfg, domain)
    if policy is None:
        policy = load_eval_policy(model, log, cfg.device, cfg.threads, sampler=sampler, sampler_dtype=sampler_dtype,
                                  dtype=cfg.dtype, use_chat_template=None)   # (the folder's own choice, as a run's)
    start = time.perf_counter()
    rows: list[dict] = []
    metrics = evaluate_all(cfg, domain, policy, split, records=rows)
    scores = {"model": model, "config": cfg.name, "domain": cfg.domain.name, "sampler": sampler,
              "sampler_dtype": sampler_dtype if sampler == "llama.cpp" else None, "dev_tasks": len(split.dev),
              "heldout_tasks": len(split.heldout), **metrics, "seconds": round(time.perf_counter() - start, 1)}
    save_results(out, rows, scores)
    log(f"{cfg.name} ({cfg.domain.name}): held-out success {fmt(metrics['heldout_success'])} over "
        f"{len(split.heldout)} tasks, dev {fmt(metrics['dev_success'])} over {len(split.dev)}")
    return scores


def add_arguments(parser) -> None:
    """``genenv eval --benchmark heldout``'s own options: which config's sets."""
    parser.add_argument("overrides", nargs="*", help="dotted overrides of the config, e.g. domain.options.data=PATH")
    parser.add_argument("--preset", default=None, help="a shipped preset (default: default)")
    parser.add_argument("--config", default=None, help="a YAML file applied after the preset")
    parser.add_argument("--run", default=None, metavar="RUN_DIR", help="take the config of this run folder")


def run_config(args) -> RunConfig:
    """The config whose sets are scored: ``--run``'s (with the overrides a resume may take), or ``--preset``/
    ``--config`` and the overrides; a bad one is a ConfigError."""
    from genenv.checkpoint import load_run_config  # noqa: PLC0415
    from genenv.config import load_config  # noqa: PLC0415
    return (load_run_config(Path(args.run), args.overrides) if args.run
            else load_config(args.preset or "default", args.overrides, args.config))


def auto_sampler(args) -> str:
    """What ``--sampler auto`` decodes with here: the config's ``agent.sampler``, as its run decodes its sets."""
    return run_config(args).agent.sampler


def from_command_line(args, common: dict) -> dict:
    """``genenv eval --benchmark heldout``: the sets of :func:`run_config`, scored on ``common``'s device and
    threads, decoded by its sampler (the CLI asked the preflight about it)."""
    cfg = run_config(args)
    return eval_split(dataclasses.replace(cfg, device=common["device"], threads=common["threads"]), args.model,
                      args.out, sampler=common["sampler"], sampler_dtype=common["sampler_dtype"])

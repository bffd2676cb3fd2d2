"""The same small run through genenv's own loop and through TRL's GRPOTrainer (issue 59, item 4): agent rollouts
per second side by side, and whether each learns (dev success of the warm-started agent, then after training).

For each seed, from the same config (a preset and overrides), the same warm starts (the cached ones a run uses)
and the same number of rounds:

- loop: ``genenv.coevolve.run`` for ``--rounds`` epochs (its metrics: rollouts, seconds of the rollout phase and
  of the whole epoch);
- TRL: ``GRPOTrainer`` with genenv's simulator side (``genenv.integrations.trl``: ``SimulatorSide``, ``task_stream``,
  ``DomainReward``, ``GenEnvCallback``, ``grpo_batch``), one generation batch per round = the loop's epoch
  (``prompts_per_round`` = the loop's fresh + replayed tasks, ``num_generations`` = ``agent.group_size``), the
  agent's learning rate and response length, ``--steps-per-round`` optimiser steps per round (TRL's
  ``steps_per_generation``); rollouts per second of the whole training, and of TRL's generation-and-scoring
  (``_generate_and_score_completions``, timed from outside).

Both paths run in this one process, one after the other, on ``--threads`` threads; beside the wall-clock rates,
rollouts per CPU-second of the whole training (``time.process_time``, which other processes on the machine do not
inflate: the comparable number when the machine is shared). Dev success is the loop's
greedy evaluation (``genenv.evaluation.evaluate`` on the run's dev split) of the warm-started agent and of each
path's trained agent. The two learners differ by design (genenv trains on informative groups in minibatches, TRL on
every completion); the simulator's first-round tasks are the same (checked: ``same_first_round``), later
rounds follow each agent.

    .venv/bin/python benchmarks/trl_vs_loop.py --preset smoke --rounds 3 --seeds 0
    .venv/bin/python benchmarks/trl_vs_loop.py --preset smollm2-reasoning-gym --rounds 6 --seeds 0,1 \\
        --out docs/results-log/issue59/trl-vs-loop.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
import warnings
from pathlib import Path

import torch

from genenv.config import load_config
from genenv.domains import make_domain
from genenv.evaluation import evaluate
from genenv.splits import data_split
from genenv.warmstart import warm_start_agent


def dev_success(cfg, domain, agent, split) -> float:
    return evaluate(cfg, domain, agent, split.dev, "dev")["dev_success"]


def through_loop(cfg, workdir: Path) -> dict:
    from genenv.coevolve import run  # noqa: PLC0415
    start, cpu = time.perf_counter(), time.process_time()
    run_dir = run(cfg, workdir / "loop", log=lambda message: None)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    rollouts = sum(r["rollouts_this_epoch"] for r in rows)
    rollout_seconds = sum(r["seconds_by_phase"]["rollout"] for r in rows)
    epoch_seconds = sum(r["seconds_total"] for r in rows)
    return {"rollouts": rollouts, "rollouts_per_s_generation": rollouts / rollout_seconds,
            "rollouts_per_s_training": rollouts / epoch_seconds, "wall_s": wall,
            "rollouts_per_cpu_s": rollouts / cpu, "dev_after": rows[-1]["dev_success"],
            "agent_updates": sum(r["agent_updates"] for r in rows),
            "first_round_tasks": first_round_tasks(run_dir)}


def first_round_tasks(run_dir: Path) -> list[str]:
    """The loop's first epoch's valid simulator-written tasks, from its samples file (one JSON row per task)."""
    rows = [json.loads(line) for line in (run_dir / "samples" / "epoch_0.jsonl").read_text().splitlines()]
    return sorted(r["task"] for r in rows if r.get("source") == "simulator" and r.get("valid"))


def through_trl(cfg, domain, split, steps_per_round: int, workdir: Path) -> dict:
    from trl import GRPOConfig, GRPOTrainer  # noqa: PLC0415 (the trl extra)

    from genenv.integrations.trl import DomainReward, GenEnvCallback, SimulatorSide, grpo_batch, task_stream  # noqa: PLC0415
    side = SimulatorSide(cfg)
    agent, _ = warm_start_agent(cfg, side.domain, log=lambda message: None)
    reward = DomainReward(side)
    generations = cfg.agent.group_size
    per_round = side.prompts_per_round * generations
    if per_round % steps_per_round:
        raise SystemExit(f"--steps-per-round {steps_per_round} must divide a round's {per_round} completions")
    config = GRPOConfig(
        output_dir=str(workdir / "trl"), max_steps=cfg.epochs * steps_per_round,
        max_completion_length=min(cfg.agent.max_new_tokens, side.domain.agent_max_new_tokens),
        learning_rate=cfg.agent.lr, temperature=cfg.agent.temperature, top_k=0, top_p=1.0, beta=cfg.agent.kl_coef,
        seed=cfg.seed, logging_steps=1, report_to=[], save_strategy="no", disable_tqdm=True,
        lr_scheduler_type="constant", warmup_steps=0, use_cpu=cfg.device == "cpu", bf16=False,
        **{**grpo_batch(side, generations), "per_device_train_batch_size": per_round // steps_per_round})
    callback = GenEnvCallback(side, reward, generations)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = GRPOTrainer(model=agent.model, processing_class=agent.tokenizer, reward_funcs=reward, args=config,
                              train_dataset=task_stream(side), callbacks=[callback])
    generation_seconds = [0.0]
    inner = getattr(trainer, "_generate_and_score_completions", None)
    if inner is not None:
        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                generation_seconds[0] += time.perf_counter() - start
        trainer._generate_and_score_completions = timed
    written = side._write_round
    first_round: list[str] = []

    def recorded(round_index):   # the simulator's valid tasks of round 0, to check against the loop's epoch 0
        tasks = written(round_index)
        if round_index == 0:
            first_round.extend(c.parsed.text for c in side.rounds[0][0] if c.valid)
        return tasks
    side._write_round = recorded
    start, cpu = time.perf_counter(), time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.train()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    rollouts = cfg.epochs * per_round
    agent.model.eval()
    return {"rollouts": rollouts,
            "rollouts_per_s_generation": rollouts / generation_seconds[0] if generation_seconds[0] else None,
            "rollouts_per_s_training": rollouts / wall, "wall_s": wall, "rollouts_per_cpu_s": rollouts / cpu,
            "dev_after": dev_success(cfg, domain, agent, split), "optimizer_steps": trainer.state.global_step,
            "rounds_observed": len(side.metrics), "first_round_tasks": sorted(first_round),
            "simulator_rounds": side.metrics}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="smoke")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--rounds", type=int, default=3, help="epochs of the loop = generation rounds of TRL")
    parser.add_argument("--steps-per-round", type=int, default=1, help="TRL optimiser steps per round")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", help="write every seed's numbers here (JSON)")
    parser.add_argument("overrides", nargs="*", help="genenv config overrides")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        cfg = load_config(args.preset, [*args.overrides, f"seed={seed}", f"epochs={args.rounds}",
                                        f"eval_every={args.rounds}", f"threads={args.threads}", "progress=false"])
        domain = make_domain(cfg.domain.name, **cfg.domain.options)
        split = data_split(cfg, domain)
        agent, _ = warm_start_agent(cfg, domain, log=lambda message: None)
        before = dev_success(cfg, domain, agent, split)
        del agent
        with tempfile.TemporaryDirectory() as workdir:
            loop = through_loop(cfg, Path(workdir))
            trl = through_trl(cfg, domain, split, args.steps_per_round, Path(workdir))
        row = {"preset": args.preset, "seed": seed, "rounds": args.rounds, "dev_items": len(split.dev),
               "dev_before": before, "loop": loop, "trl": trl}
        # TRL's round keeps at most prompts_per_round of them: its first round's tasks are the loop's epoch 0's
        row["same_first_round"] = bool(trl["first_round_tasks"]) and set(trl["first_round_tasks"]) <= set(
            loop["first_round_tasks"])
        rows.append(row)
        print(json.dumps(row, default=str)[:2000], flush=True)
    print(f"\n{args.preset}, {args.rounds} rounds, {args.threads} thread(s)")
    print("| seed | path | rollouts | rollouts/s (generation) | rollouts/s (training) | rollouts per CPU-s "
          "| dev before | dev after |")
    print("|---|---|---|---|---|---|---|---|")
    for row in rows:
        for path in ("loop", "trl"):
            r = row[path]
            generation = f"{r['rollouts_per_s_generation']:.1f}" if r["rollouts_per_s_generation"] else "n/a"
            print(f"| {row['seed']} | {path} | {r['rollouts']} | {generation} | {r['rollouts_per_s_training']:.1f} "
                  f"| {r['rollouts_per_cpu_s']:.1f} | {row['dev_before']:.3f} | {r['dev_after']:.3f} |")
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(rows, indent=1, default=str) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

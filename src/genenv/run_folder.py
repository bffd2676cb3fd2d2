"""A run folder's lifecycle, below the loop: open a run (resume it from its last checkpoint, or start it: the config
and code recorded, both players warm-started, the seed tasks and a fixed-data curriculum's set in the pool, the warm
start evaluated, a first checkpoint), and what a finished run reports. The epochs themselves are
:mod:`genenv.coevolve`'s; persistence is :mod:`genenv.checkpoint`'s."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from genenv.checkpoint import (
    config_changes,
    epochs_without_checkpoint,
    latest_checkpoint,
    load_checkpoint,
    no_checkpoint_message,
    record_config_changes,
    run_finished,
    save_checkpoint,
    save_config,
    save_initial,
)
from genenv.config import ConfigError, RunConfig
from genenv.curricula import Curriculum, add_fixed_set
from genenv.domain_check import seed_round_trip_problem
from genenv.domains import Task
from genenv.domains.base import Domain
from genenv.evaluation import evaluate_all
from genenv.io import atomic_write_json, read_jsonl
from genenv.metrics import fmt_levels
from genenv.players import Players, RunState, make_players
from genenv.progress import warm_start_progress
from genenv.provenance import check_code_on_resume, record_code
from genenv.seeding import phase_rng
from genenv.splits import DataSplit, level_accounts, training_seed_tasks
from genenv.warmstart import warm_start_agent, warm_start_evaluation, warm_start_simulator

FIXED_SET_JOURNAL = "fixed_set.partial.jsonl"   # a fixed set's shards as they are written, until the first checkpoint


def open_run(cfg: RunConfig, curriculum: Curriculum, domain: Domain, split: DataSplit, run_dir: Path, resume: bool,
             log) -> tuple[Players, RunState] | None:
    """The players and state a run goes on from: its last checkpoint (``resume``), or a new start. None: a finished
    run whose checkpoint was removed (nothing to resume). A folder that holds a run is an error unless resumed."""
    ckpt = latest_checkpoint(run_dir) if resume else None
    if ckpt is not None:
        players, state = load_checkpoint(cfg, ckpt, run_dir, domain)
        if state.epoch >= cfg.epochs:
            log(f"{run_dir} has finished its {cfg.epochs} epochs: nothing to resume (extend it with "
                f"`genenv run --resume {run_dir} epochs=N`, N > {cfg.epochs})")
        else:
            log(f"resuming {run_dir} at epoch {state.epoch} of {cfg.epochs}")
        changed = config_changes(cfg, run_dir)
        if changed:  # e.g. `genenv run --resume DIR epochs=400` extends a finished run: config_changes.jsonl says so
            log("config changed on resume: " + ", ".join(f"{k} {a!r} -> {b!r}" for k, (a, b) in changed.items()))
            record_config_changes(run_dir, changed, state.epoch)
        check_code_on_resume(run_dir, state.epoch, log)
    else:
        if (run_dir / "metrics.jsonl").exists() and not resume:
            raise FileExistsError(f"{run_dir} already holds a run; use --resume or another name/--out")
        kept = epochs_without_checkpoint(run_dir) if resume else 0
        if kept and run_finished(run_dir, cfg.epochs):
            log(f"{run_dir} has finished its {kept} epochs: nothing to resume (its checkpoint was removed, so it "
                "cannot be extended)")
            return None
        if kept:
            raise ConfigError(no_checkpoint_message(run_dir, kept))
        if resume and (run_dir / "config.yaml").exists() and config_changes(cfg, run_dir):
            # started over before its first checkpoint with other settings: the old settings' shards are not its own
            (run_dir / FIXED_SET_JOURNAL).unlink(missing_ok=True)
        run_dir.mkdir(parents=True, exist_ok=True)
        save_config(cfg, run_dir)
        record_code(run_dir)
        players, state = initial_players(cfg, curriculum, domain, split, run_dir, log)
        (run_dir / "metrics.jsonl").write_text("")
        warm, cached = warm_start_evaluation(cfg, domain, {"dev": split.dev, "heldout": split.heldout},
                                             lambda: evaluate_all(cfg, domain, players.agent, split))
        atomic_write_json(run_dir / "warmstart.json", {**json.loads((run_dir / "warmstart_info.json").read_text()),
                                                        **warm})
        reused = " (evaluated by an earlier run: cached)" if cached else ""
        log(f"after warm start: held-out success {warm['heldout_success']:.3f} "
            f"by level {fmt_levels(warm['heldout_by_level'])}{reused}")
        save_checkpoint(players, state, run_dir)
        (run_dir / FIXED_SET_JOURNAL).unlink(missing_ok=True)   # the checkpoint holds the set now

    return players, state


def discard_failed_start(run_dir: Path) -> None:
    """Remove the folder of a run whose start failed before its first checkpoint (made by this start: nothing in
    it can be resumed), unless it holds a fixed set's shards (work a resume reuses)."""
    if latest_checkpoint(run_dir) is None and not (run_dir / FIXED_SET_JOURNAL).exists():
        shutil.rmtree(run_dir, ignore_errors=True)


def run_summary(run_dir: Path) -> dict:
    """What the trackers get at the end: success after the warm start and at the last evaluation."""
    warm = json.loads((run_dir / "warmstart.json").read_text()) if (run_dir / "warmstart.json").exists() else {}
    rows = [row for row in read_jsonl(run_dir / "metrics.jsonl") if row.get("heldout_success") is not None]
    last = rows[-1] if rows else {}
    return {"warmstart_heldout_success": warm.get("heldout_success"), "warmstart_dev_success": warm.get("dev_success"),
            "final_heldout_success": last.get("heldout_success"), "final_dev_success": last.get("dev_success"),
            "rollouts": last.get("rollouts")}


def check_seed_round_trip(domain: Domain, seeds: list[Task], n: int = 8) -> None:
    """A ConfigError when the domain's own seed tasks, read back as simulator output, do not parse and ground to
    themselves: the simulator is taught to write tasks like them, so such a domain could accept none."""
    for task in seeds[:n]:
        problem = seed_round_trip_problem(domain, task)
        if problem:
            raise ConfigError(f"domain.name: {domain.name!r} {problem} (parse_task/validate must accept what "
                              "seed_tasks writes)")


def initial_players(cfg: RunConfig, curriculum: Curriculum, domain: Domain, split: DataSplit, run_dir: Path,
                    log) -> tuple[Players, RunState]:
    """The warm-started players and the first state: the seed tasks in the pool (and a fixed-data curriculum's
    set). The seed set never holds a held-out or dev task; ``data_split.json`` says what the split cost."""
    seeds = training_seed_tasks(cfg, domain, split)
    check_seed_round_trip(domain, seeds)
    accounts = level_accounts(domain, split, seeds)
    atomic_write_json(run_dir / "data_split.json", accounts)
    for sentence in accounts["small_levels"]:
        log(f"note: {sentence}")
    with warm_start_progress(cfg.agent.warmstart.steps, "warm start: agent", cfg.progress) as bar:
        agent, agent_info = warm_start_agent(cfg, domain, progress=bar, log=log, seeds=seeds)
    with warm_start_progress(cfg.env.warmstart.steps, "warm start: simulator", cfg.progress) as bar:
        env, env_info = warm_start_simulator(cfg, domain, progress=bar, log=log)
    atomic_write_json(run_dir / "warmstart_info.json", {"agent": agent_info, "env": env_info,
                                                        "agent_parameters": agent.num_parameters(),
                                                        "env_parameters": env.num_parameters()})
    save_initial(agent, env, run_dir)
    players = make_players(cfg, agent, env, domain)
    state = RunState()
    for task in seeds:
        state.task_pool.add(task, "seed", -1)
    fixed = curriculum.fixed_set(cfg, domain, players.env, seeds, phase_rng(cfg.seed, -1, "fixed_set"),
                                 journal=run_dir / FIXED_SET_JOURNAL, constraint=players.env_constraint)
    if fixed is not None:
        add_fixed_set(cfg, domain, state.task_pool, seeds, split, *fixed, run_dir, log)
    return players, state

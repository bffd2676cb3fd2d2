"""The GenEnv co-evolution loop (paper Algorithm 1), one function per phase, read top to bottom.

Before the first epoch: warm-start both players, put the seed tasks in the training pool (and, for a
fixed-data curriculum, the set it writes once). Then per epoch t:
  1. generate_tasks    the simulator writes `variations` tasks for each of `seeds_per_epoch` seed tasks (the
                       oracle curriculum: the domain writes them at the level closest to alpha)
  2. validate_tasks    parse + ground each one, reject held-out and dev tasks; invalid ones are counted, get
                       R_env = 0, never reach the agent
  3. rollout_agent     `group_size` agent rollouts per valid task, and per task the curriculum draws from the
                       pool (replay, the slots of invalid generations, or every slot of a fixed-data curriculum)
  4. score_tasks       p_hat per task (or per seed batch) and R_env = exp(-beta (p_hat - alpha)^2)
  5. update_agent      the simulator update's signal's hook first (Signal.before_agent_update: what a signal reads
                       of the agent or the pool before the agent changes; nothing for the paper's), then GRPO on
                       informative groups (dynamic sampling buffer)
  6. grow_pools        rolled-out tasks join D_train with their p_hat
  7. update_simulator  the default (env.update=pg): policy gradient on each generation's reward (the signal's:
                       R_env rescaled to [0, 1]) within its seed's variations, only for the tasks
                       env.pg.gate lets earn (read after step 6 so this epoch's rollouts count); env.update=rwr:
                       the paper's reward-weighted regression on the in-band generations (|p_hat - alpha| <= k_min,
                       weights exp(lam R_env)), which it keeps in D_env for env.rwr.pool_replay; either with KL to
                       the initial simulator and a max-KL cap. What each generation is paid is computed with
                       genenv.reward; the seed draw and gate are registered strategies (genenv.signals)
  8. evaluate          greedy held-out and dev success, overall and per level, every `eval_every` epochs
Each epoch's `seconds_by_phase` times them as generate (1), validate (2), rollout (3), score (4), agent_update (5),
pools (6), env_update (7), evaluate (8) and checkpoint (its part in the loop; the files are written beside the
next epoch, which waits for them before step 5: checkpoint_wait).
What differs between curricula is asked of a :class:`genenv.curricula.Curriculum`. Every random stream is derived
from (seed, epoch, phase), so a resumed run repeats exactly. The rewards are computed here (with
:mod:`genenv.reward`) and handed to the update rules, which never score. Below this file: a run folder's lifecycle
(:mod:`genenv.run_folder`: resume or start, warm starts), the evaluation (:mod:`genenv.evaluation`), persistence
(:mod:`genenv.checkpoint`), metrics (:mod:`genenv.metrics`).
"""

from __future__ import annotations

import gc
import os
import time
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from genenv.algos.grpo import grpo_update, informative_samples
from genenv.checkpoint import CheckpointWriter, export_final, run_lock
from genenv.config import RunConfig
from genenv.curricula import Curriculum
from genenv.domains import Task
from genenv.domains.base import Domain
from genenv.engine import Engine, make_engine
from genenv.evaluation import evaluate_all
from genenv.generation import (
    Candidate,
    drawn_candidates,
    simulator_sampling,
    validated,
    with_episodes,
    write_tasks,
)
from genenv.io import append_jsonl
from genenv.memory import peak_rss_bytes, reset_peak_rss
from genenv.metrics import (
    NO_ENV_UPDATE,
    NO_EVALUATION,
    STALL_EPOCHS,
    PhaseTimer,
    add_phase,
    band_line,
    epoch_metrics,
    finite_or_none,
    level_free_note,
    mean,
    rejection_warning,
    stall_warning,
    summary_line,
    write_samples,
)
from genenv.models.policy import Policy
from genenv.players import Players, RunState, close_samplers, samplers, samplers_line
from genenv.pool import TaskPool
from genenv.preflight import preflight
from genenv.progress import progress_bar
from genenv.reward import scored, success_rate
from genenv.rollout import Episode, rollout
from genenv.run_folder import discard_failed_start, open_run, run_summary
from genenv.seeding import phase_rng, phase_seed
from genenv.signals import SEED_DRAWS
from genenv.simulator_updates import SIMULATOR_UPDATES, SimulatorUpdate
from genenv.splits import DataSplit, data_split
from genenv.trackers import Trackers

# ============================================================================ the phases of an epoch

def generate_tasks(cfg: RunConfig, domain: Domain, env: Policy, state: RunState, epoch: int,
                   engine: Engine) -> list[Candidate]:
    """Phase 1: `variations` tasks per seed task, conditioned on the seed and the agent's recent success on it."""
    seeds = draw_seeds(cfg, state.task_pool, phase_rng(cfg.seed, epoch, "seeds"), epoch)
    rates = [state.task_pool.last_p_hat(seed) for seed in seeds]
    rates = [state.last_p_hat_mean if rate is None else rate for rate in rates]
    return write_tasks(domain, env, seeds, rates, cfg.env.variations, phase_seed(cfg.seed, epoch, "generate"),
                       **simulator_sampling(cfg, domain), run_shards=engine.run_shards)


def draw_seeds(cfg: RunConfig, pool: TaskPool, rng: np.random.Generator, epoch: int = 0) -> list[Task]:
    """The epoch's ``seeds_per_epoch`` seed tasks from the training pool, as the seed draw ``env.seed_draw`` says
    (:data:`genenv.signals.SEED_DRAWS`)."""
    return SEED_DRAWS.make(cfg).draw(pool, rng, epoch)


def validate_tasks(domain: Domain, generated: list[Candidate], split: DataSplit) -> list[Candidate]:
    """Phase 2: parse and ground every generation; a held-out or dev task is rejected with a reason."""
    return validated(domain, generated, split)


def rollout_budget(cfg: RunConfig) -> tuple[int, int]:
    """(fresh task slots, replay task slots) per epoch, the same for every curriculum (fair comparisons): fresh =
    ``seeds_per_epoch * variations``, replay = ``replay_fraction`` of it; rollouts = (fresh + replay) * group_size."""
    fresh = cfg.seeds_per_epoch * cfg.env.variations
    return fresh, int(round(cfg.agent.replay_fraction * fresh))


def draw_tasks(cfg: RunConfig, curriculum: Curriculum, state: RunState, epoch: int, fresh_valid: int) -> list[Task]:
    """The pool tasks that fill the epoch's rollout budget next to the ``fresh_valid`` generated ones: replay
    slots plus one per invalid generation (its rollouts are not lost to the budget), or every slot."""
    fresh, replay = rollout_budget(cfg)
    return curriculum.draw(cfg, state.task_pool, phase_rng(cfg.seed, epoch, "replay"), fresh + replay - fresh_valid)


def rollout_agent(cfg: RunConfig, domain: Domain, agent: Policy, tasks: list[Task], epoch: int,
                  phase: str, engine: Engine) -> list[list[Episode]]:
    """Phase 3: `group_size` sampled rollouts per task (in shards, here or on the engine's workers)."""
    if not tasks:
        return []
    return rollout(domain, agent, tasks, group_size=cfg.agent.group_size,
                   max_new_tokens=min(cfg.agent.max_new_tokens, domain.agent_max_new_tokens),
                   temperature=cfg.agent.temperature, seed=phase_seed(cfg.seed, epoch, phase),
                   batch_size=cfg.agent.generation_batch, max_context_tokens=cfg.agent.max_context_tokens,
                   run_shards=engine.run_shards)


def score_tasks(generated: list[Candidate], groups: list[list[Episode]], settings: dict) -> list[Candidate]:
    """Phase 4: each valid generation with its rollouts, p_hat, R_env and in-band flag (invalid: R_env = 0), as
    ``settings`` (:func:`scoring`) say."""
    return scored(with_episodes(generated, groups), **settings)


def scoring(cfg: RunConfig) -> dict:
    """The values p_hat, R_env and the band are computed with (:func:`genenv.reward.scored`), from the config."""
    cr = cfg.curriculum_reward
    return dict(alpha=cr.alpha, beta=cr.beta, k_min=cr.k_min, success_threshold=cr.success_threshold,
                p_hat_level=cr.p_hat_level)


def update_agent(cfg: RunConfig, players: Players, state: RunState, groups: list[list[Episode]],
                 epoch: int) -> dict:
    """Phase 5: GRPO. Informative groups are buffered; an update runs once enough are buffered."""
    informative = informative_samples(groups, cfg.agent.advantage_scaling)
    state.grpo_buffer.extend(informative)
    stats = {"effective_fraction": len(informative) / len(groups) if groups else 0.0, "agent_updates": 0,
             "agent_loss": None, "agent_kl": None, "clip_fraction": None, "entropy": None, "agent_lr": None,
             "buffered_groups": len(state.grpo_buffer)}
    ac = cfg.agent
    if len(state.grpo_buffer) < ac.min_informative_groups:
        return stats
    steps, skipped = grpo_update(players.agent, players.agent_ref, players.agent_opt, state.grpo_buffer,
                                 rng=phase_rng(cfg.seed, epoch, "agent_update"), passes=ac.update_epochs,
                                 minibatch_groups=ac.minibatch_groups, clip_eps=ac.clip_eps, kl_coef=ac.kl_coef,
                                 entropy_coef=ac.entropy_coef, grad_clip=cfg.grad_clip, temperature=ac.temperature,
                                 micro_batch=ac.micro_batch, lr=ac.lr, warmup_steps=ac.warmup_steps,
                                 shared_prefix=ac.shared_prefix,
                                 recompute_old_logprobs=players.agent.sampler is not None)
    state.nonfinite_skips += skipped
    state.grpo_buffer = []
    state.total_agent_updates += len(steps)
    if steps:
        stats.update(agent_updates=len(steps), **{name: mean(s[key] for s in steps) for name, key in (
            ("agent_loss", "loss"), ("agent_kl", "kl"), ("clip_fraction", "clip_fraction"), ("entropy", "entropy"),
            ("agent_lr", "lr"))})
    return stats


def simulator_update(cfg: RunConfig, trains_simulator: bool) -> SimulatorUpdate:
    """The epoch's rule (:data:`genenv.simulator_updates.SIMULATOR_UPDATES` by ``env.update``: the paper's RWR, or
    policy gradient), or none for a simulator not trained."""
    return SIMULATOR_UPDATES[cfg.env.update](cfg) if trains_simulator else SimulatorUpdate(cfg)


def update_simulator(cfg: RunConfig, domain: Domain, players: Players, state: RunState, generated: list[Candidate],
                     epoch: int, update: SimulatorUpdate) -> dict:
    """Phase 7: ``update``'s steps (:func:`simulator_update`), capped at ``env.max_kl``, as the epoch's metrics."""
    result = update.step(domain, players, state, generated, epoch, phase_rng(cfg.seed, epoch, "env_update"))
    if result is None:
        return dict(NO_ENV_UPDATE)
    state.nonfinite_skips += result["skipped"]
    return {"env_loss": finite_or_none(result["loss"]), "env_kl": finite_or_none(result["kl"]),
            "env_update_kl": result["update_kl"], "env_kl_to_initial": finite_or_none(result["kl_to_initial"]),
            "env_steps": result["steps"], "env_kl_capped": result["kl_capped"],
            "env_rejected_kl": finite_or_none(result["rejected_kl"])}


def grow_pools(cfg: RunConfig, state: RunState, generated: list[Candidate], drawn_tasks: list[Task],
               drawn_groups: list[list[Episode]], epoch: int) -> None:
    """Phase 6: D_train records every drawn task's p_hat and gets the valid generations with theirs."""
    threshold = cfg.curriculum_reward.success_threshold
    for task, group in zip(drawn_tasks, drawn_groups):
        p_hat = success_rate([e.reward for e in group], threshold)
        state.task_pool.add(task, "generated", epoch, p_hat)
    for item in generated:
        if item.valid and item.p_hat_task is not None:
            state.task_pool.add(item.parsed, "generated", epoch, item.p_hat_task)


# ============================================================================ one epoch

def run_epoch(cfg: RunConfig, curriculum: Curriculum, domain: Domain, players: Players, state: RunState,
              split: DataSplit, epoch: int, engine: Engine, phase_bar=None,
              checkpoint: CheckpointWriter | None = None) -> tuple[dict, list[Candidate]]:
    """One epoch of Algorithm 1. Returns its metrics row and the tasks the curriculum chose (for the samples).
    ``checkpoint``: the writer whose last checkpoint may still be reading the weights; the epoch waits for it
    before its first update (the wait is timed as ``checkpoint_wait``)."""
    timer = PhaseTimer(phase_bar)
    model_seconds_before = players.model_seconds() + engine.wait_seconds  # (waiting for actors is model time)
    settings, update = scoring(cfg), simulator_update(cfg, curriculum.trains_simulator)
    with timer("generate"):
        generated = curriculum.fresh_tasks(cfg, domain, state.task_pool, epoch) if curriculum.generates else []
        if generated is None:
            generated = generate_tasks(cfg, domain, players.env, state, epoch, engine)
    with timer("validate"):
        generated = validate_tasks(domain, generated, split)
    valid_tasks = [g.parsed for g in generated if g.valid]
    with timer("rollout"):
        groups = rollout_agent(cfg, domain, players.agent, valid_tasks, epoch, "rollout", engine)
        drawn_tasks = draw_tasks(cfg, curriculum, state, epoch, len(valid_tasks))
        drawn_groups = rollout_agent(cfg, domain, players.agent, drawn_tasks, epoch, "replay", engine)
    with timer("score"):
        generated = score_tasks(generated, groups, settings)
    if checkpoint is not None:
        with timer("checkpoint_wait"):   # the weights and optimiser states change from here on
            checkpoint.wait()
    with timer("agent_update"):   # first what the signal reads before it (nothing, for the paper's)
        signal_stats = update.signal.before_agent_update(domain, players.agent, state, generated, epoch)
        agent_stats = update_agent(cfg, players, state, groups + drawn_groups, epoch)
        if agent_stats["agent_updates"]:
            engine.weights_changed("agent")
    with timer("pools"):
        grow_pools(cfg, state, generated, drawn_tasks, drawn_groups, epoch)
    with timer("env_update"):
        env_stats = {**update_simulator(cfg, domain, players, state, generated, epoch, update), **signal_stats}
        if env_stats["env_steps"]:
            engine.weights_changed("env")
    eval_stats = dict(NO_EVALUATION)
    if (epoch + 1) % cfg.eval_every == 0 or epoch + 1 == cfg.epochs:
        with timer("evaluate"):
            eval_stats = evaluate_all(cfg, domain, players.agent, split, engine)

    all_groups = groups + drawn_groups
    state.total_rollouts += sum(len(g) for g in all_groups)
    state.total_generated += len(generated)
    drawn = drawn_candidates(drawn_tasks, drawn_groups, cfg.env.variations, **settings)
    model_seconds = players.model_seconds() + engine.wait_seconds
    metrics = epoch_metrics(cfg.curriculum, settings, domain, curriculum.generates, state, epoch, generated,
                            all_groups, drawn,
                            agent_stats, env_stats, eval_stats, timer, model_seconds - model_seconds_before)
    state.last_p_hat_mean = metrics["p_hat_mean"] if metrics["p_hat_mean"] is not None else state.last_p_hat_mean
    return metrics, generated if curriculum.generates else drawn


# ============================================================================ the run

def run(cfg: RunConfig, run_dir: str | Path | None = None, resume: bool = False, log=None) -> Path:
    """Run (or resume) a whole co-evolution; returns the run folder."""
    run_dir = Path(run_dir) if run_dir else Path("runs") / cfg.name
    log = log or (lambda msg: tqdm.write(msg))
    curriculum, domain = preflight(cfg)   # every problem of the config, before anything is paid
    torch.set_num_threads(cfg.threads)
    # the run's CPU threads are torch's: the tokenizer encodes on the calling thread unless the user says
    # otherwise (its own thread pool fought torch's for the cores: +50% time per prompt on average, measured)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    log(samplers_line(samplers(cfg)))
    log(band_line(cfg.curriculum_reward))
    note = level_free_note(cfg.curriculum, domain)
    if note:
        log(note)
    split = data_split(cfg, domain)
    made = not run_dir.exists()
    with run_lock(run_dir):   # one process writes a run folder at a time (a second one stops, naming the first)
        return _run_locked(cfg, curriculum, domain, split, run_dir, resume, log, made)


def _run_locked(cfg: RunConfig, curriculum: Curriculum, domain: Domain, split: DataSplit, run_dir: Path,
                resume: bool, log, made: bool = False) -> Path:
    try:
        opened = open_run(cfg, curriculum, domain, split, run_dir, resume, log)
    except Exception:
        if made:   # a start that failed before its first checkpoint leaves no half-made folder behind
            discard_failed_start(run_dir)
        raise
    if opened is None:
        return run_dir
    players, state = opened
    bar = progress_bar(cfg.epochs, "epochs", enabled=cfg.progress, initial=state.epoch)
    engine = make_engine(cfg, domain, players)
    if engine.workers:
        cluster = os.environ.get("RAY_ADDRESS") or "a local Ray"
        log(f"engine: {engine.workers} Ray actors on {cluster} write tasks, roll out and evaluate")
    trackers = Trackers(cfg, run_dir, state.epoch, log)
    try:
        run_epochs(cfg, curriculum, domain, players, state, split, engine, run_dir, bar, log, trackers)
        trackers.summary(run_summary(run_dir), cfg.epochs)
    finally:
        engine.close()
        trackers.close()
        close_samplers(players)
    bar.close()
    export_final(players, run_dir)
    return run_dir


def run_epochs(cfg: RunConfig, curriculum: Curriculum, domain: Domain, players: Players, state: RunState,
               split: DataSplit, engine: Engine, run_dir: Path, bar, log, trackers: Trackers | None = None) -> None:
    """Epochs from ``state.epoch`` to the end, each logged; a checkpoint every ``checkpoint_every_s`` seconds
    and after the last epoch (a resume repeats the epochs after the last checkpoint, with the same metrics).

    The metrics rows and samples files are written at once (a killed process loses none of them) but reach the
    disk (fsync) only before each checkpoint: the epochs after it are repeated on resume anyway."""
    checkpoint = CheckpointWriter()
    try:
        _run_epochs(cfg, curriculum, domain, players, state, split, engine, run_dir, bar, log, trackers, checkpoint)
    finally:
        checkpoint.wait()   # a run that stops on an error still leaves the checkpoint it was writing whole


def _run_epochs(cfg: RunConfig, curriculum: Curriculum, domain: Domain, players: Players, state: RunState,
                split: DataSplit, engine: Engine, run_dir: Path, bar, log, trackers: Trackers | None,
                checkpoint: CheckpointWriter) -> None:
    recent, idle = [], 0   # the last epochs' metrics, and how many in a row made no agent update
    rejections = 0         # epochs in a row where most generations were rejected for one reason
    last_checkpoint = time.monotonic()
    metrics_path = run_dir / "metrics.jsonl"
    unsynced = [metrics_path]
    for epoch in range(state.epoch, cfg.epochs):
        metrics, chosen = run_epoch(cfg, curriculum, domain, players, state, split, epoch, engine, phase_bar=bar,
                                    checkpoint=checkpoint)
        state.epoch = epoch + 1
        reset_peak_rss()
        start = time.perf_counter()
        unsynced.append(write_samples(run_dir, epoch, chosen, cfg.samples_rollouts_shown, durable=False))
        if state.epoch == cfg.epochs or time.monotonic() - last_checkpoint >= cfg.checkpoint_every_s:
            # the rows and samples this checkpoint covers reach the disk before it (one parallel fsync batch)
            checkpoint.save(players, state, run_dir, last_metrics=metrics, sync_first=unsynced)
            if state.epoch == cfg.epochs:
                checkpoint.wait()   # the last one is on disk before the run says it is finished
            unsynced = [metrics_path]
            last_checkpoint = time.monotonic()
        add_phase(metrics, "checkpoint", time.perf_counter() - start, peak_rss_bytes())
        append_jsonl(metrics_path, metrics, durable=state.epoch == cfg.epochs)
        if trackers is not None:
            trackers.log(metrics, epoch)
        bar.update(1)
        log(summary_line(metrics, curriculum.generates))
        rejected = rejection_warning(metrics)
        rejections = rejections + 1 if rejected else 0
        if rejected and rejections % STALL_EPOCHS == 1:   # the first such epoch, then once per 10 in a row
            log(f"warning: {rejected}")
        idle = 0 if metrics["agent_updates"] else idle + 1
        recent = (recent + [metrics])[-STALL_EPOCHS:]
        if idle and idle % STALL_EPOCHS == 0:  # once per 10 epochs without an agent update
            log(f"warning: {stall_warning(recent, cfg.agent.min_informative_groups)}")
        # Pools, caches and models live for the whole run: moving them out of the collector's reach stops
        # gen-2 collections from rescanning them (measured: 45% of one epoch's time otherwise).
        gc.freeze()



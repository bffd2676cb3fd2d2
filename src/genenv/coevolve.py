"""The GenEnv co-evolution loop (paper Algorithm 1), one function per phase, read top to bottom.

Before the first epoch: warm-start both players, put the seed tasks in the training pool (and, for a
fixed-data curriculum, the set it writes once). Then per epoch t:
  1. generate_tasks    the simulator writes `variations` tasks for each of `seeds_per_epoch` seed tasks (the
                       oracle curriculum: the domain writes them at the level closest to alpha)
  2. validate_tasks    parse + ground each one, reject held-out and dev tasks; invalid ones are counted, get
                       R_env = 0, never reach the agent
  3. rollout_agent     `group_size` agent rollouts per valid task, and per task the curriculum draws from the
                       pool (replay, the slots of invalid generations, or every slot of a fixed-data curriculum)
  4. score_tasks       p_hat per task (or per seed batch) and R_env = exp(-beta (p_hat - alpha)^2); with
                       env.pg.gate=greedy, one greedy rollout of each mixed task (check_greedy); with
                       env.pg.signal, what each task teaches the agent (credit_tasks, genenv.teacher)
  5. update_agent      GRPO on informative groups (dynamic sampling buffer)
  6. grow_pools        rolled-out tasks join D_train with their p_hat
  7. update_simulator  the default (env.update=pg): policy gradient on each generation's R_env rescaled to [0, 1]
                       within its seed's variations, only for the tasks env.pg.gate lets earn (read after step 6
                       so this epoch's rollouts count); env.update=rwr: the paper's reward-weighted regression on
                       the in-band generations (|p_hat - alpha| <= k_min, weights exp(lam R_env)), which it keeps
                       in D_env for env.rwr.pool_replay; either with KL to the initial simulator and a max-KL cap.
                       What each generation is paid, and under which gate, is computed in one module,
                       genenv.reward
  8. evaluate          greedy held-out and dev success, overall and per level, every `eval_every` epochs
Each epoch's `seconds_by_phase` times them as generate (1), validate (2), rollout (3), score (4), agent_update
(5), pools (6), env_update (7), evaluate (8) and checkpoint.
What differs between curricula is asked of a :class:`genenv.curricula.Curriculum`. Every random stream is derived
from (seed, epoch, phase), so a resumed run repeats exactly. Persistence: :mod:`genenv.checkpoint`; metrics:
:mod:`genenv.metrics`.
"""

from __future__ import annotations

import gc
import json
import os
import time
from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from genenv.algos.env_pg import challenger_groups, pg_update
from genenv.algos.grpo import grpo_update, informative_samples
from genenv.algos.rwr import WeightedExample, rwr_update
from genenv.checkpoint import (
    config_changes,
    epochs_without_checkpoint,
    export_final,
    latest_checkpoint,
    load_checkpoint,
    no_checkpoint_message,
    record_config_changes,
    run_finished,
    run_lock,
    save_checkpoint,
    save_config,
    save_initial,
)
from genenv.config import ConfigError, RunConfig
from genenv.curricula import Curriculum, add_fixed_set, frontier_seeds, make_curriculum, predicted_frontier_seeds
from genenv.domain_check import seed_round_trip_problem
from genenv.domains import Task, make_domain
from genenv.domains.base import Domain
from genenv.engine import Engine, make_engine
from genenv.generation import Candidate, drawn_candidates, validated, with_episodes, write_tasks
from genenv.io import append_jsonl, atomic_write_json, read_jsonl
from genenv.memory import peak_rss_bytes, reset_peak_rss
from genenv.metrics import (
    NO_ENV_UPDATE,
    NO_EVALUATION,
    STALL_EPOCHS,
    PhaseTimer,
    add_phase,
    epoch_metrics,
    finite_or_none,
    fmt_levels,
    level_means,
    mean,
    rejection_warning,
    stall_warning,
    summary_line,
    write_samples,
)
from genenv.models.policy import Policy
from genenv.players import Players, RunState, make_players
from genenv.pool import EnvExample, TaskPool
from genenv.progress import progress_bar
from genenv.provenance import check_code_on_resume, record_code
from genenv.reward import repeated_generations, rwr_weights, scored, simulator_gate, success_rate
from genenv.rollout import Episode, rollout, single_step_accuracy
from genenv.seeding import phase_rng, phase_seed
from genenv.splits import DataSplit, data_split, level_accounts, training_seed_tasks
from genenv.teacher import (
    NO_TEACHER,
    likelihood_reward,
    probe_direction,
    probe_gains,
    scaled_by_largest,
    task_logprobs,
    verified_examples,
)
from genenv.trackers import Trackers
from genenv.warmstart import agent_examples, warm_start_agent, warm_start_evaluation, warm_start_simulator

# ============================================================================ the phases of an epoch

def generate_tasks(cfg: RunConfig, domain: Domain, env: Policy, state: RunState, epoch: int,
                   engine: Engine) -> list[Candidate]:
    """Phase 1: `variations` tasks per seed task, conditioned on the seed and the agent's recent success on it."""
    seeds = draw_seeds(cfg, state.task_pool, phase_rng(cfg.seed, epoch, "seeds"))
    rates = [state.task_pool.last_p_hat(seed) for seed in seeds]
    rates = [state.last_p_hat_mean if rate is None else rate for rate in rates]
    return write_tasks(cfg, domain, env, seeds, rates, cfg.env.variations, phase_seed(cfg.seed, epoch, "generate"),
                       run_shards=engine.run_shards)


def draw_seeds(cfg: RunConfig, pool: TaskPool, rng: np.random.Generator) -> list[Task]:
    """The epoch's ``seeds_per_epoch`` seed tasks from the training pool, as ``env.seed_draw`` says."""
    if cfg.experimental.learnability_seeds:
        return pool.sample_by_learnability(rng, cfg.seeds_per_epoch, cfg.baseline.learnability_floor)
    cr, bc = cfg.curriculum_reward, cfg.baseline
    frontier_rule = dict(alpha=cr.alpha, k_min=cr.k_min, window=bc.oracle_window, exploration=bc.oracle_exploration)
    if cfg.env.seed_draw == "frontier":
        return frontier_seeds(pool, cfg.seeds_per_epoch, rng, **frontier_rule)
    if cfg.env.seed_draw == "predicted":
        return predicted_frontier_seeds(pool, cfg.seeds_per_epoch, rng, bins=cfg.env.seed_draw_bins,
                                        fit_window=cfg.env.seed_draw_window, **frontier_rule)
    return pool.sample(rng, cfg.seeds_per_epoch)


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


def score_tasks(cfg: RunConfig, generated: list[Candidate], groups: list[list[Episode]]) -> list[Candidate]:
    """Phase 4: each valid generation with its rollouts, p_hat, R_env and in-band flag (invalid: R_env = 0)."""
    return scored(cfg, with_episodes(generated, groups))


def check_greedy(cfg: RunConfig, domain: Domain, agent: Policy, generated: list[Candidate],
                 engine: Engine) -> list[Candidate]:
    """Phase 4b (``env.pg.gate=greedy``): one greedy rollout of every valid generation whose sampled rollouts were
    mixed (0 < p_hat < 1; the others earn no pg reward anyway), before the agent's update; ``greedy_solved`` says
    whether it succeeded. A task the greedy answer solves is one the agent has mastered in the sense its
    evaluation measures, whatever its sampling noise."""
    mixed = [i for i, c in enumerate(generated) if c.valid and c.p_hat_task is not None and 0.0 < c.p_hat_task < 1.0]
    if not mixed:
        return generated
    groups = rollout(domain, agent, [generated[i].parsed for i in mixed], group_size=1, greedy=True,
                     max_new_tokens=min(cfg.agent.max_new_tokens, domain.agent_max_new_tokens),
                     batch_size=cfg.agent.generation_batch, max_context_tokens=cfg.agent.max_context_tokens,
                     run_shards=engine.run_shards)
    out = list(generated)
    for i, group in zip(mixed, groups):
        out[i] = out[i].updated(greedy_solved=bool(group[0].reward >= cfg.curriculum_reward.success_threshold))
    return out


def credit_tasks(cfg: RunConfig, domain: Domain, agent: Policy, state: RunState, generated: list[Candidate],
                 epoch: int) -> tuple[list[Candidate], dict]:
    """Phase 4c (``env.pg.signal``, beyond the paper, no levels): what each valid generation teaches the agent, read
    from the agent before its update (:mod:`genenv.teacher`). ``probe_gain``: its GRPO gradient's first-order gain
    in expected success on ``env.pg.probe_tasks`` held-in pool tasks, scaled into [-1, 1]; ``answer_likelihood``:
    the agent's probability of its verified response, in log-odds around alpha. Also the epoch's teacher metrics."""
    pg, temperature = cfg.env.pg, cfg.agent.temperature
    valid = [i for i, c in enumerate(generated) if c.valid and c.episodes]
    if not valid:
        return generated, dict(NO_TEACHER)
    def build(tasks):
        return agent_examples(cfg, domain, agent, tasks)
    stats = dict(NO_TEACHER)
    if pg.signal == "answer_likelihood":
        examples, counts = verified_examples(domain, agent, [generated[i].parsed for i in valid], build)
        rewards = [likelihood_reward(lp, cfg.curriculum_reward.alpha, pg.likelihood_width)
                   for lp in task_logprobs(agent, examples, counts, temperature)]
        stats["teacher_forward_sequences"] = len(examples)
    else:   # probe_gain
        probe = state.task_pool.sample(phase_rng(cfg.seed, epoch, "probe"), pg.probe_tasks)
        examples, counts = verified_examples(domain, agent, probe, build)
        direction = probe_direction(agent, examples, counts, temperature)
        gains, passes = probe_gains(agent, [generated[i].episodes for i in valid], direction, temperature)
        rewards = scaled_by_largest(gains)
        stats.update(teacher_probe_tasks=len(probe), teacher_backward_passes=passes + 1,
                     teacher_forward_sequences=len(examples) + sum(len(generated[i].episodes) for i, g in
                                                                   zip(valid, gains) if g != 0.0))
    stats["teacher_reward_mean"] = mean(rewards)
    out = list(generated)
    for i, reward in zip(valid, rewards):
        out[i] = out[i].updated(teacher_reward=float(reward))
    return out, stats


def update_agent(cfg: RunConfig, players: Players, state: RunState, groups: list[list[Episode]],
                 epoch: int) -> dict:
    """Phase 5: GRPO. Informative groups are buffered; an update runs once enough are buffered."""
    informative = informative_samples(groups)
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
                                 entropy_coef=ac.entropy_coef, grad_clip=ac.grad_clip, temperature=ac.temperature,
                                 micro_batch=ac.micro_batch, lr=ac.lr, warmup_steps=ac.warmup_steps,
                                 shared_prefix=ac.shared_prefix, recompute_old_logprobs=ac.sampler != "transformers")
    state.nonfinite_skips += skipped
    state.grpo_buffer = []
    state.total_agent_updates += len(steps)
    if steps:
        stats.update(agent_updates=len(steps), **{name: mean(s[key] for s in steps) for name, key in (
            ("agent_loss", "loss"), ("agent_kl", "kl"), ("clip_fraction", "clip_fraction"), ("entropy", "entropy"),
            ("agent_lr", "lr"))})
    return stats


def select_env_batch(generated: list[Candidate], epoch: int) -> list[EnvExample]:
    """RWR's set: the in-band valid generations, each with its R_env (turned into exp(lam R_env) weights)."""
    return [EnvExample(g.context, g.prompt_ids, g.token_ids, float(g.r_env), epoch)
            for g in generated if g.valid and g.in_band and g.token_ids]


def update_by_policy_gradient(cfg: RunConfig, domain: Domain, players: Players, state: RunState,
                              generated: list[Candidate], epoch: int, rng: np.random.Generator) -> dict | None:
    """``env.update=pg`` (beyond the paper): policy gradient on every generation's R_env, rescaled within its seed
    group, for the generations the gate lets earn (:func:`genenv.reward.simulator_gate`; the others earn what a
    useless task earns)."""
    ec, cr = cfg.env, cfg.curriculum_reward
    repeat = (repeated_generations(generated, lambda text: state.task_pool.joined_before(text, epoch))
              if ec.pg.repeat_is_invalid else None)
    groups = challenger_groups(generated, cr.alpha, cr.beta, ec.pg.invalid_reward, cfg.experimental.pg_reward,
                               simulator_gate(cfg, domain, state.task_pool), repeat)
    return pg_update(players.env, players.env_ref, players.env_opt, groups, steps=ec.pg.steps,
                     minibatch_groups=ec.pg.minibatch_groups, clip_eps=ec.pg.clip_eps, kl_coef=ec.kl_coef,
                     max_kl=ec.max_kl, grad_clip=ec.grad_clip, temperature=ec.temperature, rng=rng,
                     recompute_old_logprobs=ec.sampler != "transformers")


def update_by_rwr(cfg: RunConfig, domain: Domain, players: Players, state: RunState, generated: list[Candidate],
                  epoch: int, rng: np.random.Generator) -> dict | None:
    """``env.update=rwr`` (the paper): reward-weighted regression toward the in-band generations, weights
    exp(lam R_env), with ``env.rwr.pool_replay`` also earlier epochs' sets from D_env, where this epoch's set is kept
    (D_env is this rule's memory: the pg rule keeps none). None: nothing was in band."""
    ec = cfg.env
    selected = select_env_batch(generated, epoch)
    if not selected:
        return None
    examples, older = list(selected), state.env_pool.before(epoch)
    state.env_pool.extend(selected)
    if ec.rwr.pool_replay > 0 and older:
        extra = (int(round(len(selected) * ec.rwr.pool_replay / (1 - ec.rwr.pool_replay))) if ec.rwr.pool_replay < 1
                 else len(older))
        examples += [older[i] for i in rng.choice(len(older), size=min(extra, len(older)), replace=False)]
    weights = rwr_weights([e.r_env for e in examples], cfg.curriculum_reward.lam)
    weighted = [WeightedExample(e.prompt_ids, e.target_ids, float(w)) for e, w in zip(examples, weights)]
    return rwr_update(players.env, players.env_ref, players.env_opt, weighted, steps=ec.rwr.steps,
                      batch_size=ec.rwr.batch, kl_coef=ec.kl_coef, max_kl=ec.max_kl, grad_clip=ec.grad_clip, rng=rng)


# the simulator's update rules by ``env.update``: each from the epoch's generations to its optimiser steps' result
SIMULATOR_UPDATES = {"pg": update_by_policy_gradient, "rwr": update_by_rwr}


def update_simulator(cfg: RunConfig, domain: Domain, players: Players, state: RunState, generated: list[Candidate],
                     epoch: int) -> dict:
    """Phase 7: the simulator's update rule ``env.update`` (:data:`SIMULATOR_UPDATES`), capped at ``env.max_kl``."""
    rule = SIMULATOR_UPDATES[cfg.env.update]
    result = rule(cfg, domain, players, state, generated, epoch, phase_rng(cfg.seed, epoch, "env_update"))
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
    cr = cfg.curriculum_reward
    for task, group in zip(drawn_tasks, drawn_groups):
        p_hat = success_rate([e.reward for e in group], cr.success_threshold, cfg.experimental.posterior_p_hat)
        state.task_pool.add(task, "generated", epoch, p_hat)
    for item in generated:
        if item.valid and item.p_hat_task is not None:
            state.task_pool.add(item.parsed, "generated", epoch, item.p_hat_task)


def evaluate(cfg: RunConfig, domain: Domain, agent: Policy, tasks: list[Task], prefix: str = "heldout",
             engine: Engine | None = None, records: list | None = None) -> dict:
    """Phase 8: greedy success on a fixed set, overall and per level (and, for domains with an expert, the
    paper's single-step accuracy). Episodes run in shards, here or on the engine's workers. ``records``, when
    given, receives one row per task: its set, level, text, the agent's actions, reward and verdict."""
    groups = rollout(domain, agent, tasks, group_size=1, greedy=True,
                     max_new_tokens=min(cfg.agent.max_new_tokens, domain.agent_max_new_tokens),
                     batch_size=cfg.agent.generation_batch, max_context_tokens=cfg.agent.max_context_tokens,
                     run_shards=engine.run_shards if engine else None)
    threshold = cfg.curriculum_reward.success_threshold
    outcomes = [(task.level, float(group[0].reward >= threshold)) for task, group in zip(tasks, groups)]
    if records is not None:
        records.extend({"set": prefix, "level": task.level, "task": task.text,
                        "actions": [turn.action for turn in group[0].turns], "reward": float(group[0].reward),
                        "success": bool(success)} for task, group, (_, success) in zip(tasks, groups, outcomes))
    if not outcomes:
        return {f"{prefix}_success": None, f"{prefix}_by_level": None, f"{prefix}_reward_mean": None}
    result = {f"{prefix}_success": float(np.mean([v for _, v in outcomes])),
              f"{prefix}_by_level": level_means(outcomes),
              # partial credit where the domain gives it (travel: the share of constraint checks passed)
              f"{prefix}_reward_mean": float(np.mean([group[0].reward for group in groups]))}
    steps = single_step_accuracy(domain, agent, tasks, batch_size=cfg.agent.generation_batch,
                                 max_new_tokens=min(cfg.agent.max_new_tokens, domain.agent_max_new_tokens),
                                 max_context_tokens=cfg.agent.max_context_tokens)
    if steps is not None:
        verdicts = [(task.level, v) for task, task_verdicts in zip(tasks, steps) for v in task_verdicts]
        result[f"{prefix}_step_accuracy"] = float(np.mean([v for _, v in verdicts]))
        result[f"{prefix}_step_accuracy_by_level"] = level_means(verdicts)
    return result


def evaluate_all(cfg: RunConfig, domain: Domain, agent: Policy, split: DataSplit,
                 engine: Engine | None = None, records: list | None = None) -> dict:
    """Held-out (report only) and dev (for tuning) success."""
    return {**evaluate(cfg, domain, agent, split.dev, "dev", engine, records),
            **evaluate(cfg, domain, agent, split.heldout, "heldout", engine, records)}


# ============================================================================ one epoch

def run_epoch(cfg: RunConfig, curriculum: Curriculum, domain: Domain, players: Players, state: RunState,
              split: DataSplit, epoch: int, engine: Engine, phase_bar=None) -> tuple[dict, list[Candidate]]:
    """One epoch of Algorithm 1. Returns its metrics row and the tasks the curriculum chose (for the samples)."""
    timer = PhaseTimer(phase_bar)
    model_seconds_before = players.model_seconds() + engine.wait_seconds  # (waiting for actors is model time)
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
        generated = score_tasks(cfg, generated, groups)
        if curriculum.trains_simulator and cfg.env.pg.gate == "greedy":   # (a gate implies env.update=pg)
            generated = check_greedy(cfg, domain, players.agent, generated, engine)
    teacher_stats = dict(NO_TEACHER)
    if curriculum.trains_simulator and cfg.env.update == "pg" and cfg.env.pg.signal != "alpha":
        with timer("credit"):
            generated, teacher_stats = credit_tasks(cfg, domain, players.agent, state, generated, epoch)
    with timer("agent_update"):
        agent_stats = update_agent(cfg, players, state, groups + drawn_groups, epoch)
        if agent_stats["agent_updates"]:
            engine.weights_changed("agent")
    with timer("pools"):
        grow_pools(cfg, state, generated, drawn_tasks, drawn_groups, epoch)
    with timer("env_update"):
        trains = curriculum.trains_simulator
        env_stats = {**(update_simulator(cfg, domain, players, state, generated, epoch) if trains
                        else dict(NO_ENV_UPDATE)), **teacher_stats}
        if env_stats["env_steps"]:
            engine.weights_changed("env")
    eval_stats = dict(NO_EVALUATION)
    if (epoch + 1) % cfg.eval_every == 0 or epoch + 1 == cfg.epochs:
        with timer("evaluate"):
            eval_stats = evaluate_all(cfg, domain, players.agent, split, engine)

    all_groups = groups + drawn_groups
    state.total_rollouts += sum(len(g) for g in all_groups)
    state.total_generated += len(generated)
    drawn = drawn_candidates(cfg, drawn_tasks, drawn_groups)
    model_seconds = players.model_seconds() + engine.wait_seconds
    metrics = epoch_metrics(cfg, domain, curriculum.generates, state, epoch, generated, all_groups, drawn,
                            agent_stats, env_stats, eval_stats, timer, model_seconds - model_seconds_before)
    state.last_p_hat_mean = metrics["p_hat_mean"] if metrics["p_hat_mean"] is not None else state.last_p_hat_mean
    return metrics, generated if curriculum.generates else drawn


# ============================================================================ the run

FIXED_SET_JOURNAL = "fixed_set.partial.jsonl"   # a fixed set's shards as they are written, until the first checkpoint


def run(cfg: RunConfig, run_dir: str | Path | None = None, resume: bool = False, log=None) -> Path:
    """Run (or resume) a whole co-evolution; returns the run folder."""
    run_dir = Path(run_dir) if run_dir else Path(cfg.out_dir) / cfg.name
    log = log or (lambda msg: tqdm.write(msg))
    torch.set_num_threads(cfg.threads)
    # the run's CPU threads are torch's: the tokenizer encodes on the calling thread unless the user says
    # otherwise (its own thread pool fought torch's for the cores: +50% time per prompt on average, measured)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    curriculum = make_curriculum(cfg.curriculum)
    domain = make_domain(cfg.domain.name, **cfg.domain.options)
    curriculum.check(domain)
    check_domain_capabilities(cfg, curriculum, domain)
    split = data_split(cfg, domain)
    with run_lock(run_dir):   # one process writes a run folder at a time (a second one stops, naming the first)
        return _run_locked(cfg, curriculum, domain, split, run_dir, resume, log)


def _run_locked(cfg: RunConfig, curriculum: Curriculum, domain: Domain, split: DataSplit, run_dir: Path,
                resume: bool, log) -> Path:
    ckpt = latest_checkpoint(run_dir) if resume else None
    if ckpt is not None:
        players, state = load_checkpoint(cfg, ckpt, run_dir)
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
            return run_dir
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

    bar = progress_bar(cfg.epochs, "epochs", enabled=cfg.progress, initial=state.epoch)
    engine = make_engine(cfg, domain, players)
    if engine.workers:
        log(f"engine: {engine.workers} Ray actors on {cfg.engine.address or 'a local Ray'} write tasks, roll out "
            "and evaluate")
    trackers = Trackers(cfg, run_dir, state.epoch, log)
    try:
        run_epochs(cfg, curriculum, domain, players, state, split, engine, run_dir, bar, log, trackers)
        trackers.summary(run_summary(run_dir), cfg.epochs)
    finally:
        engine.close()
        trackers.close()
    bar.close()
    export_final(players, run_dir)
    return run_dir


def run_summary(run_dir: Path) -> dict:
    """What the trackers get at the end: success after the warm start and at the last evaluation."""
    warm = json.loads((run_dir / "warmstart.json").read_text()) if (run_dir / "warmstart.json").exists() else {}
    rows = [row for row in read_jsonl(run_dir / "metrics.jsonl") if row.get("heldout_success") is not None]
    last = rows[-1] if rows else {}
    return {"warmstart_heldout_success": warm.get("heldout_success"), "warmstart_dev_success": warm.get("dev_success"),
            "final_heldout_success": last.get("heldout_success"), "final_dev_success": last.get("dev_success"),
            "rollouts": last.get("rollouts")}


def run_epochs(cfg: RunConfig, curriculum: Curriculum, domain: Domain, players: Players, state: RunState,
               split: DataSplit, engine: Engine, run_dir: Path, bar, log, trackers: Trackers | None = None) -> None:
    """Epochs from ``state.epoch`` to the end, each logged; a checkpoint every ``checkpoint_every_s`` seconds
    and after the last epoch (a resume repeats the epochs after the last checkpoint, with the same metrics).

    The metrics rows and samples files are written at once (a killed process loses none of them) but reach the
    disk (fsync) only before each checkpoint: the epochs after it are repeated on resume anyway."""
    recent, idle = [], 0   # the last epochs' metrics, and how many in a row made no agent update
    rejections = 0         # epochs in a row where most generations were rejected for one reason
    last_checkpoint = time.monotonic()
    metrics_path = run_dir / "metrics.jsonl"
    unsynced = [metrics_path]
    for epoch in range(state.epoch, cfg.epochs):
        metrics, chosen = run_epoch(cfg, curriculum, domain, players, state, split, epoch, engine, phase_bar=bar)
        state.epoch = epoch + 1
        reset_peak_rss()
        start = time.perf_counter()
        unsynced.append(write_samples(cfg, run_dir, epoch, chosen, durable=False))
        if state.epoch == cfg.epochs or time.monotonic() - last_checkpoint >= cfg.checkpoint_every_s:
            # the rows and samples this checkpoint covers reach the disk before it (one parallel fsync batch)
            save_checkpoint(players, state, run_dir, last_metrics=metrics, sync_first=unsynced)
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


def check_domain_capabilities(cfg: RunConfig, curriculum: Curriculum, domain: Domain) -> None:
    """A ConfigError before anything is trained when a setting needs what ``domain`` does not declare, or a
    curriculum would train a simulator that cannot be trained (a remote endpoint)."""
    if curriculum.trains_simulator and cfg.env.backend == "openai":
        raise ConfigError(f"env.backend: 'openai' is a frozen simulator (the endpoint's model is never trained), and "
                          f"curriculum {cfg.curriculum!r} trains it; use curriculum=random (the authors' setup), "
                          "static or learnability with it")
    if cfg.env.backend == "openai" and not cfg.env.openai.model:
        raise ConfigError("env.openai.model: name the model the endpoint serves (env.backend=openai)")
    if curriculum.trains_simulator and cfg.env.pg.gate == "levels" and not domain.ordered_levels:
        raise ConfigError(f"env.pg.gate: 'levels' reads the domain's difficulty levels, and {domain.name!r} does not "
                          "declare them ordered (Domain.ordered_levels); use env.pg.gate=greedy (no levels needed) "
                          "or none")


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
    with progress_bar(cfg.agent.warmstart.steps, "warm start: agent", enabled=cfg.progress, leave=False) as bar:
        agent, agent_info = warm_start_agent(cfg, domain, progress=bar, log=log, seeds=seeds)
    with progress_bar(cfg.env.warmstart.steps, "warm start: simulator", enabled=cfg.progress,
                      leave=False) as bar:
        env, env_info = warm_start_simulator(cfg, domain, progress=bar, log=log)
    atomic_write_json(run_dir / "warmstart_info.json", {"agent": agent_info, "env": env_info,
                                                        "agent_parameters": agent.num_parameters(),
                                                        "env_parameters": env.num_parameters()})
    save_initial(agent, env, run_dir)
    players = make_players(cfg, agent, env)
    state = RunState()
    for task in seeds:
        state.task_pool.add(task, "seed", -1)
    fixed = curriculum.fixed_set(cfg, domain, players.env, seeds, phase_rng(cfg.seed, -1, "fixed_set"),
                                 journal=run_dir / FIXED_SET_JOURNAL)
    if fixed is not None:
        add_fixed_set(cfg, domain, state.task_pool, seeds, split, *fixed, run_dir, log)
    return players, state

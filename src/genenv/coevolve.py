"""The GenEnv co-evolution loop (paper Algorithm 1), one named function per phase.

Per epoch t:
  1. generate_tasks    the simulator writes `variations` tasks for each of `seeds_per_epoch` seed tasks
  2. validate_tasks    parse + ground each one, reject held-out and dev tasks; invalid ones are counted, get
                       R_env = 0, never reach the agent
  3. rollout_agent     `group_size` agent rollouts per valid task (plus replay tasks from the training pool)
  4. score_batches     p_hat per seed batch (or per task) and R_env = exp(-beta (p_hat - alpha)^2)
  5. update_agent      GRPO on informative groups (dynamic sampling buffer)
  6. select_env_batch  keep in-band generations (|p_hat - alpha| <= k_min), weight exp(lam R_env)
  7. update_simulator  reward-weighted regression with KL to the initial simulator and a max-KL cap
  8. grow_pools        valid tasks join D_train with their p_hat; the weighted set joins D_env
  9. evaluate          greedy held-out success, overall and per level, every `eval_every` epochs
Every random stream is derived from (seed, epoch, phase), so a resumed run repeats exactly.
"""

from __future__ import annotations

import gc
import json
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import yaml
from tqdm.auto import tqdm

from genenv import curriculum as cur
from genenv.algos.grpo import PolicySample, group_advantages, grpo_step, is_informative
from genenv.algos.rwr import WeightedExample, rwr_update
from genenv.config import GENERATIVE_CURRICULA, RunConfig, from_dict, to_dict
from genenv.domains import Invalid, Task, make_domain
from genenv.domains.base import Domain
from genenv.io import append_jsonl, atomic_replace_dir, atomic_write_json, atomic_write_jsonl, read_jsonl
from genenv.models.policy import Policy
from genenv.pool import EnvExample, EnvPool, TaskPool
from genenv.progress import progress_bar
from genenv.rollout import Episode, rollout, single_step_accuracy
from genenv.seeding import phase_rng, phase_seed
from genenv.splits import DataSplit, data_split, level_accounts, training_seed_tasks
from genenv.warmstart import warm_start_agent, warm_start_simulator

PHASES = ("seeds", "generate", "replay", "rollout", "agent_update", "env_update", "evaluate")
TIMING_KEYS = ("seconds_by_phase", "seconds_total", "generated_tokens_per_second", "model_time_fraction")


# ============================================================================ state

@dataclass
class Players:
    agent: Policy
    agent_ref: Policy
    env: Policy
    env_ref: Policy
    agent_opt: torch.optim.Optimizer
    env_opt: torch.optim.Optimizer


@dataclass
class RunState:
    epoch: int = 0                         # next epoch to run
    task_pool: TaskPool = field(default_factory=TaskPool)
    env_pool: EnvPool = field(default_factory=EnvPool)
    grpo_buffer: list = field(default_factory=list)   # informative groups waiting for an update
    last_p_hat_mean: float | None = None
    total_rollouts: int = 0
    total_agent_updates: int = 0
    total_generated: int = 0
    nonfinite_skips: int = 0
    # bytes of each pool's append-only log that belong to the last checkpoint written or resumed from
    pool_log_bytes: dict = field(default_factory=lambda: {"task_pool": 0, "env_pool": 0})

    def to_json(self) -> dict:
        """Everything but the pools, which live in append-only logs next to the checkpoint."""
        return {"epoch": self.epoch, "grpo_buffer": [[s.__dict__ for s in g] for g in self.grpo_buffer],
                "last_p_hat_mean": self.last_p_hat_mean, "total_rollouts": self.total_rollouts,
                "total_agent_updates": self.total_agent_updates, "total_generated": self.total_generated,
                "nonfinite_skips": self.nonfinite_skips, "pool_log_bytes": dict(self.pool_log_bytes)}

    @classmethod
    def from_json(cls, data: dict) -> "RunState":
        state = cls(epoch=data["epoch"], grpo_buffer=[[PolicySample(**s) for s in g] for g in data["grpo_buffer"]])
        for key in ("last_p_hat_mean", "total_rollouts", "total_agent_updates", "total_generated",
                    "nonfinite_skips", "pool_log_bytes"):
            setattr(state, key, data[key])
        return state


@dataclass
class Generated:
    """One simulator output and everything learned about it during the epoch."""
    batch: int                  # index of the seed it was written from
    seed: Task
    context: str
    prompt_ids: list[int]
    token_ids: list[int]
    raw: str
    parsed: Task | Invalid
    episodes: list[Episode] = field(default_factory=list)
    p_hat_task: float | None = None
    p_hat: float | None = None   # the p_hat that sets R_env (batch or task level)
    r_env: float = 0.0
    in_band: bool = False
    source: str = "simulator"   # or "drawn": a task a fixed-data curriculum drew from its set

    @property
    def valid(self) -> bool:
        return isinstance(self.parsed, Task)


# ============================================================================ phases

def sample_seeds(cfg: RunConfig, state: RunState, epoch: int) -> list[Task]:
    return state.task_pool.sample(phase_rng(cfg.seed, epoch, "seeds"), cfg.seeds_per_epoch)


def rollout_budget(cfg: RunConfig) -> tuple[int, int]:
    """(fresh task slots, replay task slots) per epoch: the same for every curriculum, so comparisons are fair.

    Fresh slots are the simulator's ``seeds_per_epoch * variations`` generations; replay slots are
    ``replay_fraction`` of that. Agent rollouts per epoch = (fresh + replay) * group_size, always."""
    fresh = cfg.seeds_per_epoch * cfg.env.variations
    return fresh, int(round(cfg.agent.replay_fraction * fresh))


def draw_training_tasks(cfg: RunConfig, state: RunState, epoch: int, fresh_valid: int) -> list[Task]:
    """Tasks from the training pool that fill the epoch's rollout budget.

    Generative curricula: the replay slots plus one task per invalid generation (an invalid task never
    reaches the agent, but its rollouts are not lost to the budget). Fixed-data curricula: every slot,
    uniformly (static, offline) or by learnability p (1 - p) (learnability)."""
    fresh, replay = rollout_budget(cfg)
    n = fresh + replay - fresh_valid
    rng = phase_rng(cfg.seed, epoch, "replay")
    if cfg.curriculum == "learnability":
        return state.task_pool.sample_by_learnability(rng, n, cfg.baseline.learnability_floor)
    return state.task_pool.sample(rng, n)


def generate_tasks(cfg: RunConfig, domain: Domain, env: Policy, state: RunState, seeds: list[Task],
                   epoch: int) -> list[Generated]:
    """Phase 1: the simulator writes `variations` tasks per seed, conditioned on seed + success stats."""
    rates = []
    for seed in seeds:
        rate = state.task_pool.last_p_hat(seed)
        rates.append(rate if rate is not None else state.last_p_hat_mean)
    return write_tasks(cfg, domain, env, seeds, rates, cfg.env.variations, phase_seed(cfg.seed, epoch, "generate"))


def write_tasks(cfg: RunConfig, domain: Domain, env: Policy, seeds: list[Task], rates: list[float | None], n: int,
                sample_seed: int) -> list[Generated]:
    """``n`` simulator generations per seed, prompted with the seed and its success rate (unparsed yet)."""
    contexts = [domain.simulator_prompt(seed, {"success_rate": rate}) for seed, rate in zip(seeds, rates)]
    gens = env.generate(contexts, n=n, max_new_tokens=min(cfg.env.max_new_tokens, domain.env_max_new_tokens),
                        temperature=cfg.env.temperature, seed=sample_seed, batch_size=cfg.env.generation_batch)
    return [Generated(batch, seed, context, g.prompt_ids, g.token_ids, g.text, Invalid("unparsed"))
            for batch, (seed, context, samples) in enumerate(zip(seeds, contexts, gens)) for g in samples]


def validate_tasks(domain: Domain, generated: list[Generated], split: DataSplit) -> None:
    """Phase 2: parse and ground every generation; a held-out or dev task is rejected. Never raises on
    arbitrary text."""
    for item in generated:
        item.parsed = split.exclude(domain.parse_and_validate(item.raw))


def rollout_agent(cfg: RunConfig, domain: Domain, agent: Policy, tasks: list[Task], epoch: int,
                  phase: str) -> list[list[Episode]]:
    """Phase 3: `group_size` sampled rollouts per task."""
    if not tasks:
        return []
    return rollout(domain, agent, tasks, group_size=cfg.agent.group_size,
                   max_new_tokens=min(cfg.agent.max_new_tokens, domain.agent_max_new_tokens),
                   temperature=cfg.agent.temperature, seed=phase_seed(cfg.seed, epoch, phase),
                   batch_size=cfg.agent.generation_batch, max_context_tokens=cfg.agent.max_context_tokens)


def score_batches(cfg: RunConfig, generated: list[Generated]) -> None:
    """Phase 4: p_hat per task and per seed batch, then R_env and the in-band flag (invalid: R_env = 0)."""
    cr = cfg.curriculum_reward
    successes_by_batch: dict[int, list[float]] = {}
    for item in generated:
        if item.valid and item.episodes:
            rewards = [e.reward for e in item.episodes]
            item.p_hat_task = cur.success_rate(rewards, cr.success_threshold, cr.posterior)
            successes_by_batch.setdefault(item.batch, []).extend(rewards)
    for item in generated:
        if item.p_hat_task is None:
            continue
        if cr.p_hat_level == "batch":
            item.p_hat = cur.success_rate(successes_by_batch[item.batch], cr.success_threshold, cr.posterior)
        else:
            item.p_hat = item.p_hat_task
        item.r_env = cur.alpha_reward(item.p_hat, cr.alpha, cr.beta)
        item.in_band = cur.in_band(item.p_hat, cr.alpha, cr.k_min)


def policy_samples(groups: list[list[Episode]]) -> tuple[list[list[PolicySample]], int]:
    """GRPO samples of the informative groups (every turn of an episode shares its advantage)."""
    informative = []
    for group in groups:
        rewards = [e.reward for e in group]
        if not is_informative(rewards):
            continue
        advantages = group_advantages(rewards)
        samples = [PolicySample(t.prompt_ids, t.response_ids, t.logprobs, float(a))
                   for e, a in zip(group, advantages) for t in e.turns]
        informative.append(samples)
    return informative, len(groups)


def update_agent(cfg: RunConfig, players: Players, state: RunState, groups: list[list[Episode]],
                 epoch: int) -> dict:
    """Phase 5: GRPO. Informative groups are buffered; an update runs once enough are buffered."""
    informative, total = policy_samples(groups)
    state.grpo_buffer.extend(informative)
    stats = {"effective_fraction": len(informative) / total if total else 0.0, "agent_updates": 0,
             "agent_loss": None, "agent_kl": None, "clip_fraction": None, "entropy": None,
             "buffered_groups": len(state.grpo_buffer)}
    ac = cfg.agent
    if len(state.grpo_buffer) < ac.min_informative_groups:
        return stats
    rng = phase_rng(cfg.seed, epoch, "agent_update")
    steps = []
    for _ in range(ac.update_epochs):
        order = rng.permutation(len(state.grpo_buffer))
        for start in range(0, len(order), ac.minibatch_groups):
            chunk = [s for i in order[start:start + ac.minibatch_groups] for s in state.grpo_buffer[i]]
            step = grpo_step(players.agent, players.agent_ref, players.agent_opt, chunk, clip_eps=ac.clip_eps,
                             kl_coef=ac.kl_coef, entropy_coef=ac.entropy_coef, grad_clip=ac.grad_clip,
                             temperature=ac.temperature)
            state.nonfinite_skips += step["skipped"]
            if not step["skipped"]:
                steps.append(step)
    state.grpo_buffer = []
    state.total_agent_updates += len(steps)
    if steps:
        stats.update(agent_updates=len(steps), agent_loss=_mean(s["loss"] for s in steps),
                     agent_kl=_mean(s["kl"] for s in steps), clip_fraction=_mean(s["clip_fraction"] for s in steps),
                     entropy=_mean(s["entropy"] for s in steps))
    return stats


def select_env_batch(cfg: RunConfig, generated: list[Generated], epoch: int) -> list[EnvExample]:
    """Phase 6: the in-band valid generations, each with its R_env (turned into exp(lam R_env) weights)."""
    return [EnvExample(g.context, g.prompt_ids, g.token_ids, float(g.r_env), epoch)
            for g in generated if g.valid and g.in_band and g.token_ids]


def update_simulator(cfg: RunConfig, players: Players, state: RunState, selected: list[EnvExample],
                     epoch: int) -> dict:
    """Phase 7: reward-weighted regression of the simulator toward in-band generations."""
    stats = {"env_loss": None, "env_kl": None, "env_update_kl": None, "env_kl_to_initial": None, "env_steps": 0,
             "env_kl_capped": 0, "env_rejected_kl": None}
    if cfg.curriculum != "genenv" or not selected:
        return stats
    ec = cfg.env
    rng = phase_rng(cfg.seed, epoch, "env_update")
    examples = list(selected)
    older = state.env_pool.before(epoch)
    if ec.pool_replay > 0 and older:
        extra = int(round(len(selected) * ec.pool_replay / (1 - ec.pool_replay))) if ec.pool_replay < 1 else len(older)
        picks = rng.choice(len(older), size=min(extra, len(older)), replace=False)
        examples += [older[i] for i in picks]
    weights = cur.rwr_weights([e.r_env for e in examples], cfg.curriculum_reward.lam)
    weighted = [WeightedExample(e.prompt_ids, e.target_ids, float(w)) for e, w in zip(examples, weights)]
    result = rwr_update(players.env, players.env_ref, players.env_opt, weighted, steps=ec.rwr_steps,
                        batch_size=ec.rwr_batch, kl_coef=ec.kl_coef, max_kl=ec.max_kl, grad_clip=ec.grad_clip,
                        rng=rng)
    state.nonfinite_skips += result["skipped"]
    stats.update(env_loss=_finite_or_none(result["loss"]), env_kl=_finite_or_none(result["kl"]),
                 env_update_kl=result["update_kl"], env_kl_to_initial=_finite_or_none(result["kl_to_initial"]),
                 env_steps=result["steps"], env_kl_capped=result["kl_capped"],
                 env_rejected_kl=_finite_or_none(result["rejected_kl"]))
    return stats


def grow_pools(state: RunState, generated: list[Generated], selected: list[EnvExample], epoch: int) -> None:
    """Phases 8-9: D_train gets the valid tasks with their p_hat; D_env the weighted set."""
    for item in generated:
        if item.valid and item.p_hat_task is not None:
            state.task_pool.add(item.parsed, "generated", epoch, item.p_hat_task)
    state.env_pool.extend(selected)


def evaluate(cfg: RunConfig, domain: Domain, agent: Policy, heldout: list[Task], prefix: str = "heldout") -> dict:
    """Greedy success on a fixed set, overall and per level."""
    groups = rollout(domain, agent, heldout, group_size=1, greedy=True,
                     max_new_tokens=min(cfg.agent.max_new_tokens, domain.agent_max_new_tokens),
                     batch_size=cfg.agent.generation_batch, max_context_tokens=cfg.agent.max_context_tokens)
    threshold = cfg.curriculum_reward.success_threshold
    by_level: dict[int, list[float]] = {}
    for task, group in zip(heldout, groups):
        by_level.setdefault(task.level, []).append(float(group[0].reward >= threshold))
    if not by_level:
        return {f"{prefix}_success": None, f"{prefix}_by_level": None}
    result = {f"{prefix}_success": float(np.mean([v for vals in by_level.values() for v in vals])),
              f"{prefix}_by_level": {str(k): float(np.mean(v)) for k, v in sorted(by_level.items())}}
    steps = single_step_accuracy(domain, agent, heldout, batch_size=cfg.agent.generation_batch,
                                 max_new_tokens=min(cfg.agent.max_new_tokens, domain.agent_max_new_tokens),
                                 max_context_tokens=cfg.agent.max_context_tokens)
    if steps is not None:  # the paper's single-step protocol, for domains with an expert
        step_by_level: dict[int, list[bool]] = {}
        for task, verdicts in zip(heldout, steps):
            step_by_level.setdefault(task.level, []).extend(verdicts)
        result[f"{prefix}_step_accuracy"] = float(np.mean([v for vs in step_by_level.values() for v in vs]))
        result[f"{prefix}_step_accuracy_by_level"] = {str(k): float(np.mean(v))
                                                      for k, v in sorted(step_by_level.items()) if v}
    return result


def evaluate_all(cfg: RunConfig, domain: Domain, agent: Policy, heldout: list[Task], dev: list[Task]) -> dict:
    """Held-out (report only) and dev (for tuning) success."""
    return {**evaluate(cfg, domain, agent, dev, "dev"), **evaluate(cfg, domain, agent, heldout, "heldout")}


# ============================================================================ the epoch

def run_epoch(cfg: RunConfig, domain: Domain, players: Players, state: RunState, split: DataSplit, epoch: int,
              phase_bar=None) -> tuple[dict, list[Generated]]:
    timer = PhaseTimer(phase_bar)
    model_seconds_before = _model_seconds(players)

    with timer("generate"):
        generated = []
        if cfg.curriculum in GENERATIVE_CURRICULA:
            seeds = sample_seeds(cfg, state, epoch)
            generated = generate_tasks(cfg, domain, players.env, state, seeds, epoch)
    with timer("validate"):
        validate_tasks(domain, generated, split)
    valid = [g for g in generated if g.valid]
    with timer("rollout"):
        groups = rollout_agent(cfg, domain, players.agent, [g.parsed for g in valid], epoch, "rollout")
        for item, group in zip(valid, groups):
            item.episodes = group
        drawn_tasks = draw_training_tasks(cfg, state, epoch, len(valid))
        drawn_groups = rollout_agent(cfg, domain, players.agent, drawn_tasks, epoch, "replay")
    with timer("score"):
        score_batches(cfg, generated)
    with timer("agent_update"):
        agent_stats = update_agent(cfg, players, state, groups + drawn_groups, epoch)
    with timer("env_update"):
        selected = select_env_batch(cfg, generated, epoch)
        env_stats = update_simulator(cfg, players, state, selected, epoch)
    with timer("pools"):
        cr = cfg.curriculum_reward
        for task, group in zip(drawn_tasks, drawn_groups):
            rewards = [e.reward for e in group]
            state.task_pool.add(task, "generated", epoch, cur.success_rate(rewards, cr.success_threshold,
                                                                           cr.posterior))
        grow_pools(state, generated, selected, epoch)
    eval_stats = {"dev_success": None, "dev_by_level": None, "heldout_success": None, "heldout_by_level": None}
    if (epoch + 1) % cfg.eval_every == 0 or epoch + 1 == cfg.epochs:
        with timer("evaluate"):
            eval_stats = evaluate_all(cfg, domain, players.agent, split.heldout, split.dev)

    all_groups = groups + drawn_groups
    state.total_rollouts += sum(len(g) for g in all_groups)
    state.total_generated += len(generated)
    drawn = _drawn_records(drawn_tasks, drawn_groups, cfg)
    metrics = epoch_metrics(cfg, domain, state, epoch, generated, all_groups, drawn, agent_stats, env_stats,
                            eval_stats, timer, _model_seconds(players) - model_seconds_before)
    state.last_p_hat_mean = metrics["p_hat_mean"] if metrics["p_hat_mean"] is not None else state.last_p_hat_mean
    if cfg.curriculum not in GENERATIVE_CURRICULA:
        generated = drawn  # the samples file then shows what the fixed-data curriculum drew
    return metrics, generated


def _drawn_records(tasks: list[Task], groups: list[list[Episode]], cfg: RunConfig) -> list[Generated]:
    """The tasks a fixed-data curriculum drew this epoch, as records like the simulator's generations.

    Consecutive draws are grouped in batches of ``env.variations`` tasks, so that with ``p_hat_level=batch``
    their p_hat has the granularity of a simulator seed batch and band-hit rates compare across curricula."""
    out = [Generated(index // cfg.env.variations, task, "", [], [], task.text, task, group, source="drawn")
           for index, (task, group) in enumerate(zip(tasks, groups))]
    score_batches(cfg, out)
    return out


def epoch_metrics(cfg, domain, state, epoch, generated, groups, drawn, agent_stats, env_stats, eval_stats,
                  timer, model_seconds) -> dict:
    """One row of metrics.jsonl.

    The curriculum's own statistics (p_hat, band hit rate, R_env, difficulty, levels) describe the tasks the
    curriculum chose this epoch: the simulator's valid generations for generative curricula, the drawn tasks
    (in batches of ``env.variations``) for fixed-data curricula; p_hat per batch or per task as configured.
    ``train_*`` keys describe every task the agent rolled out (replay included), alike for all curricula."""
    cr = cfg.curriculum_reward
    generative = cfg.curriculum in GENERATIVE_CURRICULA
    items = [g for g in generated if g.valid] if generative else drawn
    batches: dict[int, Generated] = {}
    for g in items:
        if g.p_hat is not None:
            batches.setdefault(g.batch if cr.p_hat_level == "batch" else id(g), g)
    batch_p = [g.p_hat for g in batches.values()]
    tokens_generated = sum(len(g.token_ids) for g in generated) + sum(e.response_tokens for grp in groups
                                                                      for e in grp)
    fresh_episodes = [e for g in items for e in g.episodes]
    all_episodes = [e for grp in groups for e in grp]
    reasons = Counter(g.parsed.reason for g in generated if not g.valid)
    valid_count = len(generated) - sum(reasons.values())
    total = timer.total
    gen_seconds = timer.seconds.get("generate", 0.0) + timer.seconds.get("rollout", 0.0)
    return {
        "epoch": epoch,
        "curriculum": cfg.curriculum,
        "generated": len(generated),
        "valid": valid_count,
        "invalid_rate": (1.0 - valid_count / len(generated)) if generated else (0.0 if generative else None),
        "invalid_reasons": dict(reasons),
        "p_hat_mean": _mean(batch_p),
        "band_hit_rate": _mean([float(cur.in_band(p, cr.alpha, cr.k_min)) for p in batch_p]),
        "r_env_mean": _mean([g.r_env for g in (generated if generative else drawn)]),
        "in_band_tasks": sum(1 for g in items if g.in_band),
        "difficulty_mean": _mean([domain.difficulty(g.parsed) for g in items]),
        "level_histogram": dict(sorted(Counter(str(g.parsed.level) for g in items).items())),
        "task_length_mean": _mean([len(g.token_ids) for g in generated]),
        "rollout_success_mean": _mean([float(e.reward >= cr.success_threshold) for e in fresh_episodes]),
        "response_length_mean": _mean([e.response_tokens for e in fresh_episodes]),
        "drawn_tasks": len(drawn),
        "rollouts_this_epoch": len(all_episodes),
        "train_success_mean": _mean([float(e.reward >= cr.success_threshold) for e in all_episodes]),
        "train_difficulty_mean": _mean([domain.difficulty(grp[0].task) for grp in groups if grp]),
        **eval_stats,
        **agent_stats,
        **env_stats,
        "rollouts": state.total_rollouts,
        "total_agent_updates": state.total_agent_updates,
        "task_pool_size": len(state.task_pool),
        "env_pool_size": len(state.env_pool),
        "nonfinite_skips": state.nonfinite_skips,
        "seconds_by_phase": {k: round(v, 4) for k, v in timer.seconds.items()},
        "seconds_total": round(total, 4),
        "generated_tokens_per_second": tokens_generated / gen_seconds if gen_seconds > 0 else None,
        "model_time_fraction": model_seconds / total if total > 0 else None,
    }


# ============================================================================ the run

def run(cfg: RunConfig, run_dir: str | Path | None = None, resume: bool = False, log=None) -> Path:
    """Run (or resume) a whole co-evolution; returns the run folder."""
    run_dir = Path(run_dir) if run_dir else Path(cfg.out_dir) / cfg.name
    log = log or (lambda msg: tqdm.write(msg))
    torch.set_num_threads(cfg.threads)
    domain = make_domain(cfg.domain.name, **cfg.domain.options)
    split = data_split(cfg, domain)
    ckpt = run_dir / "checkpoints" / "latest"
    if resume and not ckpt.exists() and ckpt.with_name("latest.old").exists():
        # killed between the two renames of a checkpoint swap: the previous checkpoint takes its name back
        os.replace(ckpt.with_name("latest.old"), ckpt)
    if resume and ckpt.exists():
        players, state = load_checkpoint(cfg, ckpt, run_dir)
        log(f"resuming {run_dir} at epoch {state.epoch}")
    else:
        if run_dir.exists() and (run_dir / "metrics.jsonl").exists() and not resume:
            raise FileExistsError(f"{run_dir} already holds a run; use --resume or another name/--out")
        run_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text_yaml(run_dir / "config.yaml", to_dict(cfg))
        players, state = initial_players(cfg, domain, split, run_dir, log)
        (run_dir / "metrics.jsonl").write_text("")
        warm = evaluate_all(cfg, domain, players.agent, split.heldout, split.dev)
        atomic_write_json(run_dir / "warmstart.json", {**json.loads((run_dir / "warmstart_info.json").read_text()),
                                                        **warm})
        log(f"after warm start: held-out success {warm['heldout_success']:.3f} "
            f"by level {_fmt_levels(warm['heldout_by_level'])}")
        save_checkpoint(players, state, run_dir)

    bar = progress_bar(cfg.epochs, "epochs", enabled=cfg.progress, initial=state.epoch)
    for epoch in range(state.epoch, cfg.epochs):
        metrics, generated = run_epoch(cfg, domain, players, state, split, epoch, phase_bar=bar)
        state.epoch = epoch + 1
        start = time.perf_counter()
        write_samples(cfg, run_dir, epoch, generated)
        save_checkpoint(players, state, run_dir, last_metrics=metrics)
        _add_phase(metrics, "checkpoint", time.perf_counter() - start)
        append_jsonl(run_dir / "metrics.jsonl", metrics)
        bar.update(1)
        log(summary_line(metrics))
        # Pools, caches and models live for the whole run: moving them out of the collector's reach stops
        # gen-2 collections from rescanning them (measured: 45% of one epoch's time otherwise).
        gc.freeze()
    bar.close()
    export_final(players, run_dir)
    return run_dir


def export_final(players: Players, run_dir: Path) -> None:
    """The trained players as ordinary Hugging Face folders: runs/<name>/final/{agent,env}."""
    for name, policy in (("agent", players.agent), ("env", players.env)):
        build = run_dir / "final" / f".{name}.build"
        if build.exists():
            import shutil
            shutil.rmtree(build)
        policy.save(build)
        atomic_replace_dir(build, run_dir / "final" / name)


def initial_players(cfg: RunConfig, domain: Domain, split: DataSplit, run_dir: Path,
                    log) -> tuple[Players, RunState]:
    """The warm-started players and the first state: the seed tasks in the pool (and a fixed-data curriculum's
    set). The seed set never holds a held-out or dev task; ``data_split.json`` says what the split cost."""
    seeds = training_seed_tasks(cfg, domain, split)
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
    agent.save(run_dir / "checkpoints" / "initial" / "agent")
    env.save(run_dir / "checkpoints" / "initial" / "env")
    players = _make_players(cfg, agent, env)
    state = RunState()
    for task in seeds:
        state.task_pool.add(task, "seed", -1)
    if cfg.curriculum not in GENERATIVE_CURRICULA:
        build_fixed_set(cfg, domain, players.env, state, seeds, split, run_dir, log)
    return players, state


def build_fixed_set(cfg: RunConfig, domain: Domain, env: Policy, state: RunState, seeds: list[Task],
                    split: DataSplit, run_dir: Path, log) -> dict:
    """The training set of a fixed-data curriculum, written once before training (paper's ablation rows).

    static / learnability: ``baseline.static_variations`` simulator generations per seed task (GenEnv-Static);
    offline: ``(baseline.offline_multiplier - 1) * len(seeds)`` extra tasks from the frozen generator
    (Gemini-Offline). Generations are validated like any other; valid ones join the training pool next to the
    seeds, invalid ones are counted. The set is recorded in ``fixed_set.json`` and ``samples/fixed_set.jsonl``."""
    bc = cfg.baseline
    rng = phase_rng(cfg.seed, -1, "fixed_set")
    if cfg.curriculum == "offline":
        extra = int(round((bc.offline_multiplier - 1.0) * len(seeds)))
        if bc.offline_generator == "domain":
            generated = [Generated(-1, task, "", [], [], task.text, task)
                         for task in domain.reference_tasks(rng, extra)]
        else:
            picks = rng.choice(len(seeds), size=extra, replace=True)
            generated = _write_once(cfg, domain, env, [seeds[i] for i in picks], 1)
    else:
        generated = _write_once(cfg, domain, env, seeds, bc.static_variations)
    validate_tasks(domain, generated, split)
    before = len(state.task_pool)
    for item in generated:
        if item.valid:
            state.task_pool.add(item.parsed, cfg.curriculum, -1)
    valid = [g for g in generated if g.valid]
    summary = {"curriculum": cfg.curriculum, "seed_tasks": len(seeds), "generated": len(generated),
               "valid": len(valid), "added": len(state.task_pool) - before, "size": len(state.task_pool),
               "invalid_reasons": dict(Counter(g.parsed.reason for g in generated if not g.valid)),
               "level_histogram": dict(sorted(Counter(str(g.parsed.level) for g in valid).items())),
               "generator": bc.offline_generator if cfg.curriculum == "offline" else "simulator"}
    atomic_write_json(run_dir / "fixed_set.json", summary)
    atomic_write_jsonl(run_dir / "samples" / "fixed_set.jsonl",
                       [{"seed": g.seed.text, "generated": g.raw, "valid": g.valid,
                         "reason": None if g.valid else g.parsed.reason,
                         "level": g.parsed.level if g.valid else None} for g in generated])
    log(f"{cfg.curriculum} training set: {summary['size']} tasks ({len(seeds)} seeds + {summary['added']} "
        f"written once; {len(generated) - len(valid)} of {len(generated)} generations invalid)")
    return summary


def _write_once(cfg: RunConfig, domain: Domain, env: Policy, seeds: list[Task], n: int) -> list[Generated]:
    """A fixed set's generations: no success statistics in the prompt (nothing is known before training)."""
    return write_tasks(cfg, domain, env, seeds, [None] * len(seeds), n, phase_seed(cfg.seed, -1, "fixed_set_generate"))


def _make_players(cfg: RunConfig, agent: Policy, env: Policy, refs: tuple[Policy, Policy] | None = None) -> Players:
    """Frozen references of the warm-started players, optional LoRA adapters, and the optimisers."""
    agent_ref, env_ref = refs or (agent.frozen_copy(), env.frozen_copy())
    _apply_lora(cfg, agent, env)
    agent_opt = torch.optim.AdamW(agent.trainable_parameters(), lr=cfg.agent.lr, weight_decay=cfg.agent.weight_decay)
    env_opt = torch.optim.AdamW(env.trainable_parameters(), lr=cfg.env.lr, weight_decay=cfg.env.weight_decay)
    return Players(agent, agent_ref, env, env_ref, agent_opt, env_opt)


def _apply_lora(cfg: RunConfig, agent: Policy, env: Policy) -> None:
    for name, policy, rank in (("agent", agent, cfg.agent.lora_rank), ("env", env, cfg.env.lora_rank)):
        if rank > 0 and not policy.has_lora:
            policy.apply_lora(rank, seed=phase_seed(cfg.seed, -1, f"lora_{name}"))


# ============================================================================ persistence

def _add_phase(metrics: dict, name: str, seconds: float) -> None:
    """Fold a phase timed outside run_epoch into the epoch's timings."""
    model_seconds = (metrics["model_time_fraction"] or 0.0) * metrics["seconds_total"]
    metrics["seconds_by_phase"][name] = round(seconds, 4)
    metrics["seconds_total"] = round(metrics["seconds_total"] + seconds, 4)
    metrics["model_time_fraction"] = model_seconds / metrics["seconds_total"] if metrics["seconds_total"] else None


def save_checkpoint(players: Players, state: RunState, run_dir: Path, last_metrics: dict | None = None) -> None:
    """Write checkpoints/latest atomically: build a new folder, then swap it in.

    The epoch's metrics row travels with the checkpoint, so a run killed between the checkpoint and the
    metrics append gets the row back on resume."""
    root = run_dir / "checkpoints"
    build = root / f".build-{state.epoch}"
    if build.exists():
        import shutil
        shutil.rmtree(build)
    build.mkdir(parents=True)
    # weights only: config and tokenizer never change and live in checkpoints/initial/
    players.agent.save_weights(build / "agent.safetensors")
    players.env.save_weights(build / "env.safetensors")
    torch.save({"agent": players.agent_opt.state_dict(), "env": players.env_opt.state_dict(),
                "torch_rng": torch.get_rng_state()}, build / "optimizers.pt")
    # Pools: append this epoch's events to the logs first, after cutting them back to the bytes the previous
    # checkpoint owns (kept in the state, never re-read from a folder a kill may have renamed); the new
    # checkpoint records its own sizes, so bytes appended by a run killed before the swap are dropped on resume.
    for name, pool in (("task_pool", state.task_pool), ("env_pool", state.env_pool)):
        state.pool_log_bytes[name] = append_pool_log(root / f"{name}.log.jsonl", pool.pending,
                                                     state.pool_log_bytes[name])
        pool.pending = []
    (build / "state.json").write_text(json.dumps({**state.to_json(), "last_metrics": last_metrics}))
    atomic_replace_dir(build, root / "latest")


def append_pool_log(path: Path, events: list[dict], keep_bytes: int) -> int:
    """Cut the log back to ``keep_bytes`` (what the last checkpoint owns), append ``events``; return its size."""
    with open(path, "ab") as handle:
        handle.truncate(keep_bytes)
        handle.seek(keep_bytes)
        handle.write("".join(json.dumps(e) + "\n" for e in events).encode())
        handle.flush()
        os.fsync(handle.fileno())
        return handle.tell()


def read_pool_log(path: Path, size: int) -> list[dict]:
    if not path.exists():
        return []
    with open(path, "rb") as handle:
        data = handle.read(size)
    return [json.loads(line) for line in data.decode().splitlines() if line]


def load_checkpoint(cfg: RunConfig, ckpt: Path, run_dir: Path) -> tuple[Players, RunState]:
    initial = run_dir / "checkpoints" / "initial"
    agent = Policy.load(initial / "agent", device=cfg.device, dtype=cfg.agent.dtype)
    env = Policy.load(initial / "env", device=cfg.device, dtype=cfg.env.dtype)
    refs = agent.frozen_copy(), env.frozen_copy()
    _apply_lora(cfg, agent, env)  # the checkpoint holds the adapted model's weights
    agent.load_weights(ckpt / "agent.safetensors")
    env.load_weights(ckpt / "env.safetensors")
    players = _make_players(cfg, agent, env, refs)
    saved = torch.load(ckpt / "optimizers.pt", weights_only=False)
    players.agent_opt.load_state_dict(saved["agent"])
    players.env_opt.load_state_dict(saved["env"])
    torch.set_rng_state(saved["torch_rng"])
    saved_state = json.loads((ckpt / "state.json").read_text())
    state = RunState.from_json(saved_state)
    root = run_dir / "checkpoints"
    for name, pool in (("task_pool", state.task_pool), ("env_pool", state.env_pool)):
        for event in read_pool_log(root / f"{name}.log.jsonl", saved_state["pool_log_bytes"][name]):
            pool.apply(event)
    _restore_metrics(run_dir / "metrics.jsonl", state.epoch, saved_state.get("last_metrics"))
    return players, state


def load_run_config(run_dir: str | Path, overrides=()) -> RunConfig:
    from genenv.config import _deep_merge, parse_override, read_yaml
    data = read_yaml(Path(run_dir) / "config.yaml")
    for item in overrides:
        data = _deep_merge(data, parse_override(item))
    return from_dict(RunConfig, data)


def write_samples(cfg: RunConfig, run_dir: Path, epoch: int, generated: list[Generated]) -> None:
    rows = []
    for g in generated:
        row = {"source": g.source, "batch": g.batch, "seed": g.seed.text, "context": g.context, "generated": g.raw,
               "valid": g.valid, "reason": None if g.valid else g.parsed.reason}
        if g.valid:
            row.update(task=g.parsed.text, answer=g.parsed.answer, level=g.parsed.level, p_hat_task=g.p_hat_task,
                       p_hat=g.p_hat, r_env=g.r_env, in_band=g.in_band,
                       rollouts=[{"response": e.final_action, "reward": e.reward,
                                  "terminated": e.terminated, "truncated": e.truncated}
                                 for e in g.episodes[:cfg.samples_rollouts_shown]])
        else:
            row.update(r_env=0.0, in_band=False)
        rows.append(row)
    atomic_write_jsonl(run_dir / "samples" / f"epoch_{epoch}.jsonl", rows)


def atomic_write_text_yaml(path: Path, data: dict) -> None:
    from genenv.io import atomic_write_text
    atomic_write_text(path, yaml.safe_dump(data, sort_keys=False))


def _restore_metrics(path: Path, epochs_done: int, last_metrics: dict | None) -> None:
    """Keep the metrics of checkpointed epochs only; put back the last one if the kill came before it."""
    rows = [r for r in read_jsonl(path) if r.get("epoch", 1 << 30) < epochs_done]
    if last_metrics is not None and last_metrics["epoch"] == epochs_done - 1 and (
            not rows or rows[-1]["epoch"] != last_metrics["epoch"]):
        rows.append(last_metrics)
    atomic_write_jsonl(path, rows)


# ============================================================================ helpers

class PhaseTimer:
    def __init__(self, bar=None):
        self.seconds: dict[str, float] = {}
        self.bar = bar
        self._start = time.perf_counter()

    def __call__(self, name: str):
        timer = self

        class _Phase:
            def __enter__(self_inner):
                if timer.bar is not None:
                    timer.bar.set_postfix_str(name, refresh=True)
                self_inner.t0 = time.perf_counter()

            def __exit__(self_inner, *exc):
                timer.seconds[name] = timer.seconds.get(name, 0.0) + time.perf_counter() - self_inner.t0
                return False
        return _Phase()

    @property
    def total(self) -> float:
        return time.perf_counter() - self._start


def _model_seconds(players: Players) -> float:
    return sum(p.model_seconds for p in (players.agent, players.agent_ref, players.env, players.env_ref))


def _mean(values):
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def _finite_or_none(value):
    return None if value is None or not np.isfinite(value) else float(value)


def _fmt(value, spec=".3f"):
    return "  -  " if value is None else format(value, spec)


def _fmt_levels(levels: dict | None) -> str:
    return " ".join(f"{v:.2f}" for v in levels.values()) if levels else "-"


def summary_line(m: dict) -> str:
    tasks = (f"valid {m['valid']:3d}/{m['generated']:3d}" if m.get("curriculum", "genenv") in GENERATIVE_CURRICULA
             else f"drawn {m['drawn_tasks']:3d}")
    return (f"epoch {m['epoch']:3d} | {tasks} | p_hat {_fmt(m['p_hat_mean'])} "
            f"| band {_fmt(m['band_hit_rate'], '.2f')} | R_env {_fmt(m['r_env_mean'])} "
            f"| level {_fmt(m['difficulty_mean'], '.2f')} | eff {_fmt(m['effective_fraction'], '.2f')} "
            f"| upd {m['agent_updates']} | env steps {m['env_steps']} "
            f"| dev {_fmt(m['dev_success'])} | held-out {_fmt(m['heldout_success'])} | {m['seconds_total']:.1f}s")

"""One row of ``metrics.jsonl`` per epoch, the one-line summary printed after it, the samples file, timings."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import numpy as np

from genenv.domains.base import Domain
from genenv.generation import Candidate
from genenv.io import atomic_write_jsonl
from genenv.memory import peak_rss_bytes, reset_peak_rss
from genenv.reward import in_band
from genenv.rollout import Episode

# measurements of the machine (time, memory): they differ between machines and runs of the same seed
TIMING_KEYS = ("seconds_by_phase", "seconds_total", "generated_tokens_per_second", "model_time_fraction",
               "peak_rss_mb_by_phase")
NO_ENV_UPDATE = {"env_loss": None, "env_kl": None, "env_update_kl": None, "env_kl_to_initial": None, "env_steps": 0,
                 "env_kl_capped": 0, "env_rejected_kl": None}
NO_EVALUATION = {"dev_success": None, "dev_by_level": None, "dev_reward_mean": None,
                 "heldout_success": None, "heldout_by_level": None, "heldout_reward_mean": None}


class PhaseTimer:
    """Wall time and peak resident memory per named phase (``with timer("rollout"): ...``); the phase's name
    is shown on the progress bar as it runs."""

    def __init__(self, bar=None):
        self.seconds: dict[str, float] = {}
        self.peak_rss_mb: dict[str, float] = {}
        self.bar = bar
        self._start = time.perf_counter()

    def __call__(self, name: str):
        return _Phase(self, name)

    @property
    def total(self) -> float:
        return time.perf_counter() - self._start


class _Phase:
    def __init__(self, timer: PhaseTimer, name: str):
        self.timer, self.name = timer, name

    def __enter__(self):
        if self.timer.bar is not None:
            self.timer.bar.set_postfix_str(self.name, refresh=True)
        reset_peak_rss()
        self.start = time.perf_counter()

    def __exit__(self, *exc):
        seconds = self.timer.seconds
        seconds[self.name] = seconds.get(self.name, 0.0) + time.perf_counter() - self.start
        peak = peak_rss_bytes()
        if peak is not None:
            peaks = self.timer.peak_rss_mb
            peaks[self.name] = max(peaks.get(self.name, 0.0), round(peak / 2**20, 1))
        return False


def epoch_metrics(curriculum: str, scoring: dict, domain: Domain, generates: bool, state, epoch: int,
                  generated: list[Candidate], groups: list[list[Episode]], drawn: list[Candidate], agent_stats: dict,
                  env_stats: dict, eval_stats: dict, timer: PhaseTimer, model_seconds: float) -> dict:
    """One row of metrics.jsonl, for the run's ``curriculum`` (its name) with the values p_hat, R_env and the band
    are computed with (``scoring``: alpha, k_min, success_threshold, p_hat_level, as
    :func:`genenv.reward.scored` takes them).

    The curriculum's own statistics (p_hat, band hit rate, R_env, difficulty, levels) describe the tasks the
    curriculum chose this epoch: the simulator's valid generations when it ``generates``, else the drawn tasks
    (in batches of ``env.variations``); p_hat per batch or per task as configured. ``train_*`` keys describe
    every task the agent rolled out (replay included), alike for all curricula."""
    alpha, k_min, threshold = scoring["alpha"], scoring["k_min"], scoring["success_threshold"]
    items = [g for g in generated if g.valid] if generates else drawn
    batches: dict[int, Candidate] = {}
    for g in items:
        if g.p_hat is not None:
            batches.setdefault(g.batch if scoring["p_hat_level"] == "batch" else id(g), g)
    batch_p = [g.p_hat for g in batches.values()]
    fresh_episodes = [e for g in items for e in g.episodes]
    all_episodes = [e for grp in groups for e in grp]
    all_success = [float(e.reward >= threshold) for e in all_episodes]   # each episode's verdict, once
    tokens_generated = sum(len(g.token_ids) for g in generated) + sum(e.response_tokens for e in all_episodes)
    reasons = Counter(g.parsed.reason for g in generated if not g.valid)
    valid_count = len(generated) - sum(reasons.values())
    total = timer.total
    gen_seconds = timer.seconds.get("generate", 0.0) + timer.seconds.get("rollout", 0.0)
    return {
        "epoch": epoch,
        "curriculum": curriculum,
        "generated": len(generated),
        "valid": valid_count,
        "invalid_rate": (1.0 - valid_count / len(generated)) if generated else (0.0 if generates else None),
        "invalid_reasons": dict(reasons),
        "p_hat_mean": mean(batch_p),
        "band_hit_rate": mean([float(in_band(p, alpha, k_min)) for p in batch_p]),
        "r_env_mean": mean([g.r_env for g in (generated if generates else drawn)]),
        "in_band_tasks": sum(1 for g in items if g.in_band),
        "p_hat_histogram": p_hat_histogram([g.p_hat_task for g in items]),
        "difficulty_mean": mean([domain.difficulty(g.parsed) for g in items]),
        "level_histogram": dict(sorted(Counter(str(g.parsed.level) for g in items).items())),
        "task_length_mean": mean([len(g.token_ids) for g in generated]),
        "rollout_success_mean": mean([float(e.reward >= threshold) for e in fresh_episodes]),
        # every rollout of the epoch (replay included): a run whose simulator wrote no valid task still has some
        "response_length_mean": mean([e.response_tokens for e in all_episodes]),
        "drawn_tasks": len(drawn),
        "rollouts_this_epoch": len(all_episodes),
        "train_success_mean": mean(all_success),
        "train_difficulty_mean": mean([domain.difficulty(grp[0].task) for grp in groups if grp]),
        "train_success_by_level": level_means(zip([e.task.level for e in all_episodes], all_success)),
        # rollouts a step of which was cut short (Domain.checked_step: an action too long, a step too slow or one
        # that raised), by kind: each earned 0
        "answer_errors": dict(Counter(reason_kind(e.error) for e in all_episodes if e.error)),
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
        "peak_rss_mb_by_phase": dict(timer.peak_rss_mb),
    }


def reason_kind(reason: str) -> str:
    """One kind of reason, whatever the text it quotes: its first two colon-separated parts ("parser error:
    KeyError: 'x'" -> "parser error: KeyError"; "step error: KeyError: 'x'" -> "step error: KeyError")."""
    return ":".join(reason.split(":")[:2])


def level_means(pairs) -> dict[str, float]:
    """The mean value per level of (level, value) pairs, levels in order (keys are strings, as in JSON)."""
    by_level: dict[int, list[float]] = {}
    for level, value in pairs:
        by_level.setdefault(level, []).append(value)
    return {str(k): float(np.mean(v)) for k, v in sorted(by_level.items())}


P_HAT_BINS = 5


def p_hat_histogram(p_hats) -> list[int]:
    """How many of the curriculum's tasks had a per-task p_hat in [0, 0.2), [0.2, 0.4), ... [0.8, 1]."""
    counts = [0] * P_HAT_BINS
    for p in p_hats:
        if p is not None:
            counts[min(P_HAT_BINS - 1, int(p * P_HAT_BINS))] += 1
    return counts


def add_phase(metrics: dict, name: str, seconds: float, peak_rss: int | None = None) -> None:
    """Fold a phase timed outside the epoch (the checkpoint) into the epoch's timings (and its peak memory,
    in bytes, when measured)."""
    model_seconds = (metrics["model_time_fraction"] or 0.0) * metrics["seconds_total"]
    metrics["seconds_by_phase"][name] = round(seconds, 4)
    metrics["seconds_total"] = round(metrics["seconds_total"] + seconds, 4)
    metrics["model_time_fraction"] = model_seconds / metrics["seconds_total"] if metrics["seconds_total"] else None
    if peak_rss is not None:
        metrics["peak_rss_mb_by_phase"][name] = round(peak_rss / 2**20, 1)


def write_samples(run_dir: Path, epoch: int, candidates: list[Candidate], rollouts_shown: int,
                  durable: bool = True) -> Path:
    """samples/epoch_N.jsonl: every candidate task of the epoch, its verdict, scores and its first
    ``rollouts_shown`` rollouts. Returns the file's path."""
    rows = []
    for g in candidates:
        row = {"source": g.source, "batch": g.batch, "seed": g.seed.text, "context": g.context, "generated": g.raw,
               "valid": g.valid, "reason": None if g.valid else g.parsed.reason}
        if g.valid:
            row.update(task=g.parsed.text, answer=g.parsed.answer, level=g.parsed.level, p_hat_task=g.p_hat_task,
                       p_hat=g.p_hat, r_env=g.r_env, in_band=g.in_band,
                       rollouts=[{"response": e.final_action, "reward": e.reward,
                                  "terminated": e.terminated, "truncated": e.truncated, "error": e.error}
                                 for e in g.episodes[:rollouts_shown]])
        else:
            row.update(r_env=0.0, in_band=False)
        rows.append(row)
    path = run_dir / "samples" / f"epoch_{epoch}.jsonl"
    atomic_write_jsonl(path, rows, durable=durable)
    return path


def mean(values):
    """The mean of the values that are not None (None when there are none)."""
    values = [v for v in values if v is not None]
    return float(np.mean(values)) if values else None


def finite_or_none(value):
    return None if value is None or not np.isfinite(value) else float(value)


def fmt(value, spec=".3f"):
    return "  -  " if value is None else format(value, spec)


def fmt_levels(levels: dict | None) -> str:
    return " ".join(f"{v:.2f}" for v in levels.values()) if levels else "-"


STALL_EPOCHS = 10


def stall_warning(recent: list[dict], min_informative_groups: int) -> str | None:
    """When the last ``STALL_EPOCHS`` epochs made no agent update, why: no group had mixed rewards (every
    rollout of every task succeeded, or every one failed: nothing for GRPO to learn from), or too few did to
    fill the dynamic-sampling buffer. None otherwise."""
    if len(recent) < STALL_EPOCHS or any(row["agent_updates"] for row in recent[-STALL_EPOCHS:]):
        return None
    rows = recent[-STALL_EPOCHS:]
    groups = sum(row["rollouts_this_epoch"] for row in rows)
    mixed = mean([row["effective_fraction"] for row in rows]) or 0.0
    span = f"epochs {rows[0]['epoch']}-{rows[-1]['epoch']}"
    if mixed == 0.0:
        return (f"no agent update in {span}: no group of rollouts had mixed rewards (each task was always solved "
                f"or never; {groups} rollouts, mean train success {fmt(mean([r['train_success_mean'] for r in rows]))})"
                ", so GRPO has nothing to learn from. The agent needs tasks it solves sometimes: check the warm "
                "start's success on the levels it is given, the sampling temperature, or the domain's format")
    return (f"no agent update in {span}: {rows[-1]['buffered_groups']} groups with mixed rewards are buffered "
            f"({100 * mixed:.1f}% of groups), fewer than agent.min_informative_groups={min_informative_groups}")


def rejection_warning(m: dict, share: float = 0.5) -> str | None:
    """When more than ``share`` of an epoch's generations were rejected for one reason, that reason and an example
    of where to look; None otherwise (or when fewer than 4 were written)."""
    generated = m.get("generated") or 0
    reasons: Counter = Counter()
    for reason, count in (m.get("invalid_reasons") or {}).items():
        reasons[reason_kind(reason)] += count
    if generated < 4 or not reasons:
        return None
    reason, count = reasons.most_common(1)[0]
    if count <= share * generated:
        return None
    return (f"epoch {m['epoch']}: {count} of {generated} generations rejected for one reason: {reason!r} (every "
            f"rejection, with the simulator's text: samples/epoch_{m['epoch']}.jsonl; a parser error is a bug in the "
            "domain's parse_task or validate)")


def band_line(reward_cfg) -> str:
    """What the epoch line's ``band`` counts, said once at a run's start: the p_hat interval a task is in band for
    (``alpha +- k_min``, cut to [0, 1]), and when it covers every p_hat, that it does."""
    low, high = max(0.0, reward_cfg.alpha - reward_cfg.k_min), min(1.0, reward_cfg.alpha + reward_cfg.k_min)
    every = " (every task: a wide band, for checking the plumbing)" if (low, high) == (0.0, 1.0) else ""
    return (f"band: the share of tasks with {low:.2f} <= p_hat <= {high:.2f} (curriculum_reward.alpha "
            f"{reward_cfg.alpha:g} +- k_min {reward_cfg.k_min:g}){every}")


# What a run that trains the simulator with the paper's information on a domain without ordered difficulty levels
# (Domain.ordered_levels) is told at its start: what was measured there instead (docs/results.md; BCa interval).
LEVEL_FREE_NOTE = ("note: domain {domain!r} declares no ordered difficulty levels; there no level-free way of "
                   "training the simulator has beaten the untrained one, and the measured alternative is the untrained "
                   "simulator with the learnt seed draw, curriculum=random env.seed_draw=learnt_frontier (+0.080 "
                   "[+0.055, +0.111] over the uniform draw at 600 epochs over 24 fresh seeds on addition with its "
                   "levels hidden: docs/results.md)")


def level_free_note(curriculum: str, domain: Domain) -> str | None:
    """:data:`LEVEL_FREE_NOTE` for ``curriculum=genenv`` on a domain that declares no ordered levels; else None."""
    return LEVEL_FREE_NOTE.format(domain=domain.name) if curriculum == "genenv" and not domain.ordered_levels else None


def summary_line(m: dict, generates: bool) -> str:
    """The epoch in one line of at most 100 characters (printed after every epoch; docs/run-folder.md explains
    each field): valid/written tasks (or drawn), mean p_hat and the share in the band, mean level, the share of
    rollout groups with mixed rewards (GRPO's signal), agent + simulator optimiser steps, dev and held-out
    success when evaluated, seconds."""
    def short(value, spec=".2f"):   # 0.62 -> .62: rates in [0, 1], three columns fewer each
        return fmt(value, spec).replace("0.", ".", 1) if value is not None else "-"
    tasks = f"{m['valid']}/{m['generated']} valid" if generates else f"{m['drawn_tasks']} drawn"
    evaluated = (f" dev {short(m['dev_success'], '.3f')} held-out {short(m['heldout_success'], '.3f')}"
                 if m.get("heldout_success") is not None else "")
    return (f"epoch {m['epoch']} {tasks} p_hat {short(m['p_hat_mean'])} band {short(m['band_hit_rate'])} "
            f"level {fmt(m['difficulty_mean'], '.1f')} mixed {short(m['effective_fraction'])} "
            f"steps {m['agent_updates']}+{m['env_steps']}{evaluated} {m['seconds_total']:.1f}s")

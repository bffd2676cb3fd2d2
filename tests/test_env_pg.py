"""The policy-gradient simulator update (env.update=pg): groups, advantages, direction, the KL cap."""

import numpy as np
import pytest
import torch

from genenv.algos.env_pg import pg_update, reward_groups
from genenv.coevolve import run
from genenv.config import ConfigError, load_config
from genenv.domains import Invalid, Task
from genenv.generation import Candidate
from genenv.io import read_jsonl


def challenger_groups(candidates, alpha=0.5, beta=2.0, invalid_reward=0.0, shape="rescaled", gate=None, repeat=None):
    """The loop's two steps: each generation's reward (genenv.reward; an invalid_reward or repeat: the penalised
    signal's), then the update's seed groups (env_pg)."""
    from genenv.experimental.options import interior_reward, penalised_rewards
    from genenv.reward import rescaled
    reward = rescaled(alpha, beta) if shape == "rescaled" else (lambda c: float(interior_reward(c.p_hat, alpha, beta)))
    return reward_groups(candidates, penalised_rewards(candidates, reward, invalid_reward, gate, repeat))



def _candidate(batch, valid, r_env, tokens=(5, 6), p_hat=None, level=1):
    parsed = Task("t", "t", "a", level) if valid else Invalid("bad")
    return Candidate(batch, Task("s", "s"), "ctx", [1, 2], list(tokens), "raw", parsed, r_env=r_env,
                     p_hat=p_hat, logprobs=tuple(-1.0 for _ in tokens))


def test_interior_rewards_prefer_mostly_failed_tasks_and_pay_nothing_for_never_solved_ones():
    """pg_reward=interior with alpha 0.25: within a seed group a task solved 1 in 8 beats one solved 7 in 8, and
    a task never solved earns what an invalid one does (the simulator cannot drift to impossible tasks)."""
    groups = challenger_groups([_candidate(0, True, 0.0, p_hat=0.125), _candidate(0, True, 0.0, p_hat=0.875),
                                _candidate(1, True, 0.0, p_hat=0.0), _candidate(1, False, 0.0)],  # 0 and 0: none
                               alpha=0.25, beta=8.0, shape="interior")
    assert len(groups) == 1
    high, low = np.exp(-8 * 0.015625), np.exp(-8 * 0.390625)
    assert [s.advantage for s in groups[0]] == pytest.approx([(high - low) / 2, (low - high) / 2])


def test_groups_reward_rescaled_r_env_and_invalid_tasks_like_useless_ones():
    floor = float(np.exp(-2.0 * 0.25))                          # R_env of p_hat 0 or 1 at beta 2
    groups = challenger_groups([_candidate(0, True, 0.8), _candidate(0, False, 0.0),
                                _candidate(1, False, 0.0), _candidate(1, False, 0.0),   # all 0: no signal
                                _candidate(2, True, 0.5), _candidate(2, True, 0.5),     # equal: no signal
                                _candidate(3, True, floor), _candidate(3, False, 0.0)],  # useless == invalid
                               alpha=0.5, beta=2.0)
    assert len(groups) == 1
    reward = (0.8 - floor) / (1.0 - floor)                      # 0.4914, the other member 0
    assert [s.advantage for s in groups[0]] == pytest.approx([reward / 2, -reward / 2])  # minus the mean, no std
    assert groups[0][0].response_ids == [5, 6] and groups[0][0].old_logprobs == [-1.0, -1.0]


def test_the_level_gate_pays_only_for_levels_not_mastered():
    """env.pg.gate=levels: a mastered level's in-band task earns what a useless one does, so a group of level-2
    noise is no signal and a group mixing levels 2 and 3 favours the level-3 task."""
    from genenv.reward import LevelSuccess, level_gate, open_levels
    stats = {1: LevelSuccess(1.0, 0.0), 2: LevelSuccess(0.8, 0.2), 3: LevelSuccess(0.3, 0.1), 4: None}
    gate = open_levels(stats, mastered=0.75)
    assert gate == {3, 4}
    assert open_levels({1: LevelSuccess(1.0, 0.0), 2: LevelSuccess(0.9, 0.0)}, 0.75) == {2}   # all mastered
    floor = float(np.exp(-2.0 * 0.25))
    reward = (1.0 - floor) / (1.0 - floor)
    groups = challenger_groups([_candidate(0, True, 1.0, level=2), _candidate(0, True, floor, level=2),
                                _candidate(1, True, 1.0, level=2), _candidate(1, True, 1.0, level=3)],
                               alpha=0.5, beta=2.0, gate=level_gate(gate))
    assert len(groups) == 1                              # group 0: both level 2, both 0 under the gate
    assert [s.advantage for s in groups[0]] == pytest.approx([-reward / 2, reward / 2])
    ungated = challenger_groups([_candidate(0, True, 1.0, level=2), _candidate(0, True, floor, level=2)],
                                alpha=0.5, beta=2.0)
    assert len(ungated) == 1                             # without the gate level-2 noise is a signal


def test_a_negative_invalid_reward_makes_validity_a_signal():
    floor = float(np.exp(-2.0 * 0.25))
    groups = challenger_groups([_candidate(0, True, floor), _candidate(0, False, 0.0)], alpha=0.5, beta=2.0,
                               invalid_reward=-0.5)
    assert [s.advantage for s in groups[0]] == pytest.approx([0.25, -0.25])



def test_a_repeated_task_earns_what_an_invalid_one_earns():
    """experimental.signal=penalised with repeats: a valid task already in the pool before the epoch, or written
    earlier in the same epoch, earns invalid_reward; its first writing this epoch and new tasks keep R_env rescaled."""
    from genenv.experimental.options import penalised_rewards, repeated_generations
    from genenv.pool import TaskPool
    from genenv.reward import rescaled
    pool = TaskPool()
    pool.add(Task("old", "old"), "seed", -1)
    pool.add(Task("now", "now"), "generated", 3)        # joined this epoch (grow_pools runs before the update)

    def cand(text, r_env=0.6065306597126334):
        return Candidate(0, Task("s", "s"), "ctx", [1], [2], text, Task(text, text) if text else Invalid("bad"),
                         r_env=r_env)
    generated = [cand("old"), cand("now"), cand("now"), cand(None), cand("new", 1.0)]
    repeat = repeated_generations(generated, lambda text: pool.joined_before(text, 3))
    assert [repeat(c) for c in generated] == [True, False, True, False, False]
    assert penalised_rewards(generated, rescaled(0.5, 2.0), -0.5, repeat=repeat) == \
        pytest.approx([-0.5, 0.0, -0.5, -0.5, 1.0])
    assert penalised_rewards(generated, rescaled(0.5, 2.0), -0.5) == pytest.approx([0.0, 0.0, 0.0, -0.5, 1.0])


def test_a_run_with_repeats_paid_as_invalid(tmp_path, monkeypatch):
    """The option wired through a run: every epoch's update asks which generations repeat a task known before the
    epoch, one verdict per valid generation."""
    from genenv.experimental import options
    from genenv.experimental.options import repeated_generations
    verdicts = []

    def recorded(candidates, known):
        repeat = repeated_generations(candidates, known)
        verdicts.append([repeat(c) for c in candidates if c.valid])
        return repeat
    monkeypatch.setattr(options, "repeated_generations", recorded)
    cfg = load_config("smoke", ["threads=1", "env.update=pg", "env.pg.minibatch_groups=2",
                                "experimental.signal=penalised", "experimental.penalised.invalid_reward=-0.5",
                                "experimental.penalised.repeats=true"])
    rows = read_jsonl(run(cfg, run_dir=tmp_path / "repeat", log=lambda m: None) / "metrics.jsonl")
    assert len(verdicts) == len(rows) == cfg.epochs and sum(r["env_steps"] for r in rows) > 0
    assert [len(v) for v in verdicts] == [r["valid"] for r in rows]


def test_the_old_penalty_knobs_select_the_penalised_signal():
    """env.pg.invalid_reward and env.pg.repeat_is_invalid (moved in issue 76) read as experimental.signal=penalised with
    their values, with a FutureWarning; at their old defaults they select nothing; beside another signal they are
    one ConfigError naming the knob."""
    with pytest.warns(FutureWarning, match="experimental.signal=penalised"):
        cfg = load_config("smoke", ["env.pg.invalid_reward=-0.5", "env.pg.repeat_is_invalid=true"])
    from genenv.signals import check_config
    check_config(cfg)
    assert cfg.experimental["signal"] == "penalised"
    assert (cfg.experimental["penalised"].invalid_reward, cfg.experimental["penalised"].repeats) == (-0.5, True)
    with pytest.warns(FutureWarning, match="changed nothing"):
        cfg = load_config("smoke", ["env.pg.invalid_reward=0.0", "env.pg.repeat_is_invalid=false"])
    check_config(cfg)
    assert cfg.experimental == {}
    with pytest.raises(ConfigError, match="env.pg.invalid_reward.*interior"):
        load_config("smoke", ["experimental.signal=interior", "env.pg.invalid_reward=-0.5"])

def _group(policy, good, bad):
    """One seed group: the simulator wrote ``good`` (advantage +1) and ``bad`` (-1) after the same context."""
    context = policy.encode_prompt("s5|1200+3400>")
    out = []
    for text, reward in ((good, 1.0), (bad, 0.0)):
        target = policy.encode_target(text)
        batch = policy.build_batch([context], [target])
        with torch.no_grad():
            logp = policy.token_logprobs(batch)[0][0, :len(target)].tolist()
        parsed = Task(text, text, "a", 1) if reward else Invalid("bad")
        out.append(Candidate(0, Task("s", "s"), "ctx", context, target, text, parsed, r_env=reward,
                             logprobs=tuple(logp)))
    return challenger_groups(out)


def _logp(policy, context, text):
    target = policy.encode_target(text)
    batch = policy.build_batch([context], [target])
    with torch.no_grad():
        return policy.token_logprobs(batch)[0].sum().item()


def test_steps_move_the_simulator_toward_the_better_task(tiny_policy):
    groups = _group(tiny_policy, "1111+1111", "9999+9999")
    context = groups[0][0].prompt_ids
    margin = _logp(tiny_policy, context, "1111+1111") - _logp(tiny_policy, context, "9999+9999")
    opt = torch.optim.AdamW(tiny_policy.model.parameters(), lr=3e-3)
    stats = pg_update(tiny_policy, tiny_policy.frozen_copy(), opt, groups, steps=4, minibatch_groups=1, clip_eps=0.2,
                      kl_coef=0.0, max_kl=100.0, grad_clip=1.0, temperature=1.0, rng=np.random.default_rng(0))
    assert stats["steps"] == 4 and stats["kl_capped"] == 0 and stats["kl_to_initial"] > 0
    assert _logp(tiny_policy, context, "1111+1111") - _logp(tiny_policy, context, "9999+9999") > margin + 0.1


def test_kl_cap_undoes_a_step_past_it(tiny_policy):
    groups = _group(tiny_policy, "1111+1111", "9999+9999")
    start = {k: v.clone() for k, v in tiny_policy.model.state_dict().items()}
    opt = torch.optim.AdamW(tiny_policy.model.parameters(), lr=0.5)
    stats = pg_update(tiny_policy, tiny_policy.frozen_copy(), opt, groups, steps=3, minibatch_groups=1, clip_eps=0.2,
                      kl_coef=0.0, max_kl=1e-4, grad_clip=1.0, temperature=1.0, rng=np.random.default_rng(0))
    assert stats["kl_capped"] == 1 and stats["steps"] == 0 and stats["rejected_kl"] > 1e-4
    assert all(v.equal(start[k]) for k, v in tiny_policy.model.state_dict().items())


def test_a_run_with_the_pg_simulator_update(tmp_path):
    cfg = load_config("smoke", ["threads=1", "env.update=pg", "env.pg.minibatch_groups=2"])
    out = run(cfg, run_dir=tmp_path / "pg", log=lambda m: None)
    rows = read_jsonl(out / "metrics.jsonl")
    assert sum(r["env_steps"] for r in rows) > 0
    assert all(r["env_kl_to_initial"] is not None for r in rows if r["env_steps"])


def test_a_run_with_the_level_gate(tmp_path):
    """env.pg.gate=levels reads the pool's per-level success in the loop (wiring: the run finishes and its
    simulator still takes steps on the levels left open)."""
    cfg = load_config("smoke", ["threads=1", "env.update=pg", "env.pg.minibatch_groups=2", "env.pg.gate=levels"])
    rows = read_jsonl(run(cfg, run_dir=tmp_path / "gate", log=lambda m: None) / "metrics.jsonl")
    assert len(rows) == cfg.epochs and sum(r["env_steps"] for r in rows) > 0

"""The level-free teacher signals (experimental.signal, genenv.experimental.teacher): hand-computed values, the
first-order gain checked against a real step, and a run that pays them."""

import math

import pytest
import torch

from genenv.algos.rwr import WeightedExample
from genenv.config import TinyModelConfig, load_config
from genenv.domains import Task
from genenv.experimental.options import penalised_rewards
from genenv.experimental.teacher import (
    likelihood_reward,
    logit,
    probe_direction,
    probe_gains,
    scaled_by_largest,
    sequence_logprobs,
    task_logprobs,
)
from genenv.generation import Candidate
from genenv.io import read_jsonl
from genenv.rollout import Episode, Turn


def test_likelihood_reward_by_hand():
    assert likelihood_reward(math.log(0.5)) == pytest.approx(1.0)
    # logit(0.1) = ln(1/9) = -2.197225; exp(-4.827796 / 8) = 0.546908; symmetric at 0.9
    assert likelihood_reward(math.log(0.1)) == pytest.approx(0.546908, abs=1e-6)
    assert likelihood_reward(math.log(0.9)) == pytest.approx(0.546908, abs=1e-6)
    assert likelihood_reward(math.log(0.01), width=2.0) == pytest.approx(math.exp(-(math.log(99) ** 2) / 8))
    # directional where p_hat is blind: nearly within reach earns far more than hopeless, as almost mastered
    # earns more than trivial
    assert likelihood_reward(math.log(0.05)) > 100 * likelihood_reward(math.log(1e-6))
    assert likelihood_reward(math.log(0.95)) > 100 * likelihood_reward(math.log(1 - 1e-6))
    for impossible in (-math.inf, 0.0, 0.5, math.nan):   # P = 0, P = 1, an impossible log-prob, NaN
        assert likelihood_reward(impossible) == 0.0
    assert likelihood_reward(math.log(0.25), alpha=0.25) == pytest.approx(1.0)
    assert logit(0.5) == 0.0 and logit(0.0) == -math.inf and logit(1.0) == math.inf


def test_scaled_by_largest():
    assert scaled_by_largest([2.0, -4.0, 0.0]) == [0.5, -1.0, 0.0]
    assert scaled_by_largest([0.0, 0.0]) == [0.0, 0.0]
    assert scaled_by_largest([]) == []


def _policy():
    from genenv.models.tiny import build_tiny_policy
    return build_tiny_policy(TinyModelConfig(hidden_size=16, intermediate_size=32, num_layers=1, num_heads=2,
                                             max_positions=32), "0123456789+=", seed=3)


def _examples(policy, pairs):
    return [WeightedExample(policy.encode_prompt(p), policy.encode_target(t)) for p, t in pairs]


def test_task_logprobs_sum_each_tasks_examples():
    policy = _policy()
    examples = _examples(policy, [("12+", "3"), ("4+4=", "8"), ("5=", "55")])
    each = sequence_logprobs(policy, examples).detach().double().numpy()
    assert task_logprobs(policy, examples, [2, 1]) == pytest.approx([each[0] + each[1], each[2]])
    assert all(value < 0 for value in each)


def _episode(policy, prompt, response, reward):
    ids = policy.encode_target(response)
    return Episode(Task(prompt, prompt), [Turn(policy.encode_prompt(prompt), ids, [0.0] * len(ids), response, reward)],
                   reward=reward, terminated=True)


def test_probe_gain_is_the_first_order_change_of_the_probe_sets_expected_success():
    """A small ascent step along a group's policy gradient changes the probe set's mean probability of its verified
    responses by step * gain (first order), and a group whose rollouts agree gains exactly 0 with no backward."""
    torch.manual_seed(0)
    policy = _policy()
    probe = _examples(policy, [("12+", "3"), ("4+4=", "8"), ("7=", "71")])
    counts = [1, 2]
    group = [_episode(policy, "12+", "3", 1.0), _episode(policy, "12+", "9", 0.0),
             _episode(policy, "12+", "33", 0.0), _episode(policy, "12+", "3", 1.0)]
    agree = [_episode(policy, "4+", "8", 1.0), _episode(policy, "4+", "8", 1.0)]
    direction = probe_direction(policy, probe, counts)
    gains, passes, sequences = probe_gains(policy, [group, agree], direction)
    assert gains[1] == 0.0 and passes == 1 and sequences == len(group) and gains[0] != 0.0

    def probe_value():
        with torch.no_grad():
            logp = sequence_logprobs(policy, probe).double()
            return float((torch.exp(logp[0]) + torch.exp(logp[1] + logp[2])) / 2)

    from genenv.algos.grpo import informative_samples
    samples = informative_samples([group])[0]
    params = policy.trainable_parameters()
    seq = policy.build_batch([s.prompt_ids for s in samples], [s.response_ids for s in samples])
    logp, _ = policy.token_logprobs(seq)
    adv = torch.tensor([s.advantage for s in samples])
    objective = (logp * seq.response_mask * adv[:, None]).sum() / seq.response_mask.sum()
    grads = torch.autograd.grad(objective, params)
    before, step = probe_value(), 1e-3
    with torch.no_grad():
        for p, g in zip(params, grads):
            p.add_(step * g)
    assert probe_value() - before == pytest.approx(step * gains[0], rel=0.05)


def test_a_teacher_reward_is_what_a_valid_task_earns_and_invalid_ones_earn_the_invalid_reward():
    """What the hook credited a candidate is what it earns; a candidate it did not credit earns the rescaled R_env,
    an invalid one the invalid reward."""
    from genenv.domains import Invalid
    from genenv.signals import part
    seed = Task("s", "s")
    made = [Candidate(0, seed, "c", [1], [2], "r", Task("t", "t", "a", 1), r_env=0.9),
            Candidate(0, seed, "c", [1], [2], "r", Invalid("bad")),
            Candidate(0, seed, "c", [1], [2], "r", Task("u", "u", "a", 1), r_env=1.0)]
    cfg = load_config("smoke", ["experimental.signal=probe_gain"])
    signal = part(cfg, "signal")(cfg)
    signal.credited = {id(made[0]): -0.4}
    assert penalised_rewards(made, signal.paid, invalid_reward=-0.5) == [-0.4, -0.5, 1.0]
    assert signal.rewards(made, None) == [-0.4, 0.0, 1.0]   # (an invalid one earns 0 here)


def _run(tmp_path, name, *overrides, monkeypatch):
    """A 3-epoch smoke run: its metrics rows and, per epoch, (p_hat_task, credited reward or None) of each valid
    generation the credit signal's hook saw (the hook wrapped to record what it kept for the pg update)."""
    from genenv.coevolve import run
    from genenv.experimental.credit import CreditSignal
    credited = []
    hook = CreditSignal.before_agent_update

    def recording(self, domain, agent, state, generated, epoch):
        stats = hook(self, domain, agent, state, generated, epoch)
        credited.append([(c.p_hat_task, self.credited.get(id(c))) for c in generated if c.valid and c.episodes])
        return stats
    monkeypatch.setattr(CreditSignal, "before_agent_update", recording)
    out = run(load_config("smoke", ["threads=1", "epochs=3", *overrides]), run_dir=tmp_path / name, log=lambda m: None)
    return read_jsonl(out / "metrics.jsonl"), credited


def test_a_run_pays_probe_gains_only_to_mixed_tasks(tmp_path, monkeypatch):
    """probe_gain in the loop: every valid task is credited its teacher reward, 0 unless its rollouts were mixed,
    the largest magnitude 1 in an epoch with any mixed task; the extra model calls are one backward pass over the
    probe set and one per mixed task, and the simulator takes steps on them."""
    rows, epochs = _run(tmp_path, "probe", "experimental.signal=probe_gain", "experimental.probe_gain.tasks=32",
                        monkeypatch=monkeypatch)
    assert len(epochs) == len(rows) == 3
    for row, tasks in zip(rows, epochs):
        mixed = [reward for p_hat, reward in tasks if 0.0 < p_hat < 1.0]
        assert row["teacher_probe_tasks"] == 32 and row["teacher_backward_passes"] == 1 + len(mixed)
        assert all(reward == 0.0 for p_hat, reward in tasks if p_hat in (0.0, 1.0))
        if mixed:
            assert max(abs(reward) for reward in mixed) == pytest.approx(1.0)
        assert row["teacher_reward_mean"] == pytest.approx(sum(reward for _, reward in tasks) / len(tasks))
    assert sum(r["env_steps"] for r in rows) > 0


def test_a_run_pays_answer_likelihood_and_an_untrained_simulator_reads_nothing(tmp_path, monkeypatch):
    rows, epochs = _run(tmp_path, "likelihood", "experimental.signal=answer_likelihood", monkeypatch=monkeypatch)
    for row, tasks in zip(rows, epochs):
        assert row["teacher_forward_sequences"] == len(tasks) and row["teacher_backward_passes"] == 0
        assert tasks and all(0.0 <= reward <= 1.0 for _, reward in tasks)
    assert sum(r["env_steps"] for r in rows) > 0
    random_rows, random_epochs = _run(tmp_path, "random", "curriculum=random", "experimental.signal=answer_likelihood",
                                      monkeypatch=monkeypatch)
    assert not any(key.startswith("teacher_") for r in random_rows for key in r)   # (the hook read nothing)
    assert random_epochs == []   # (the simulator is never trained: the paper's signal, whose hook is a no-op)


def test_the_probe_is_drawn_from_the_pool_or_its_hard_side():
    """probe_side=all is the pool's own uniform draw (the same random calls as before the knob); hard draws only
    tasks rolled out with a last p_hat below alpha (never a task not yet rolled out), and the whole pool while no
    task is hard."""
    import numpy as np

    from genenv.experimental.teacher import draw_probe
    from genenv.pool import TaskPool
    pool = TaskPool()
    for text, p_hat in (("easy", 1.0), ("half", 0.5), ("near", 0.375), ("hopeless", 0.0), ("new", None)):
        pool.add(Task(text, text), "generated", 0, p_hat)
    assert draw_probe(pool, np.random.default_rng(3), 7) == pool.sample(np.random.default_rng(3), 7)
    assert {t.text for t in draw_probe(pool, np.random.default_rng(0), 50, "hard", 0.5)} == {"near", "hopeless"}
    assert {t.text for t in draw_probe(pool, np.random.default_rng(0), 50, "hard", 0.25)} == {"hopeless"}
    assert len(draw_probe(pool, np.random.default_rng(0), 1, "hard")) == 1
    settled = TaskPool()
    settled.add(Task("easy", "easy"), "seed", -1, 1.0)
    assert [t.text for t in draw_probe(settled, np.random.default_rng(0), 2, "hard")] == ["easy", "easy"]


def test_a_signals_knob_without_its_signal_is_refused():
    from genenv.config import ConfigError, load_config
    from genenv.signals import check_config
    load_config("smoke", ["experimental.signal=probe_gain", "experimental.probe_gain.side=hard"])
    for override, signal in (("experimental.probe_gain.side=hard", "probe_gain"),
                             ("experimental.probe_gain.tasks=8", "probe_gain"),
                             ("experimental.answer_likelihood.width=1", "answer_likelihood")):
        with pytest.raises(ConfigError, match=f"a knob of experimental.signal={signal}"):
            check_config(load_config("smoke", [override]))


def test_a_run_with_the_hard_probe_reads_it(tmp_path, monkeypatch):
    rows, _ = _run(tmp_path, "hard", "experimental.signal=probe_gain", "experimental.probe_gain.side=hard",
                   "experimental.probe_gain.tasks=16", monkeypatch=monkeypatch)
    assert all(r["teacher_probe_tasks"] == 16 and r["teacher_backward_passes"] >= 1 for r in rows)


def test_the_loop_calls_the_signals_one_hook_every_epoch_and_its_metrics_join_the_row(tmp_path, monkeypatch):
    """Issue 88, item 1: a signal keeps rewards(...) and one hook, before_agent_update, that the loop always calls
    (a no-op for the paper's signal, whose rows hold no teacher_* keys); what a signal's hook returns joins the row,
    and what its rewards return is what the pg update pays. A plugin's signal takes the main path's place through
    the one hook for experiments, genenv.signals.add_replacement."""
    from genenv import signals
    from genenv.coevolve import run
    calls = []

    class Counting(signals.AlphaSignal):
        def before_agent_update(self, domain, agent, state, generated, epoch):
            calls.append((epoch, agent is not None))
            return {"counting_valid": sum(c.valid for c in generated)}

    plain = read_jsonl(run(load_config("smoke", ["threads=1", "epochs=2"]), run_dir=tmp_path / "plain",
                           log=lambda m: None) / "metrics.jsonl")
    assert not any(key.startswith("teacher_") or key == "counting_valid" for row in plain for key in row)
    monkeypatch.setattr(signals, "REPLACEMENTS", [lambda cfg, name: Counting if name == "signal" else None,
                                                  *signals.REPLACEMENTS])
    rows = read_jsonl(run(load_config("smoke", ["threads=1", "epochs=2"]),
                          run_dir=tmp_path / "counting", log=lambda m: None) / "metrics.jsonl")
    assert calls == [(0, True), (1, True)]
    assert [row["counting_valid"] for row in rows] == [row["valid"] for row in rows]
    keep = ("agent_loss", "env_loss", "dev_success", "valid")   # the same signal otherwise: the same run
    assert [{k: row[k] for k in keep} for row in rows] == [{k: row[k] for k in keep} for row in plain]

"""Learning progress over clusters of look-alike tasks (experimental.signal=learning_progress, env.seed_draw=progress,
genenv.experimental.learning_progress): hand-computed progress, the pool's record of observations (rebuilt on
resume), clusters that follow what changes, and a run that pays it."""

import math

import numpy as np
import pytest

from genenv.config import ConfigError, load_config
from genenv.domains import Task
from genenv.experimental.learning_progress import (
    cluster_progress,
    filled,
    half_progress,
    progress_seeds,
    window_observations,
)
from genenv.pool import TaskPool


def test_half_progress_by_hand():
    labels = np.array([0, 1, 0, 0, 1, 0, 2, 2, 2])
    outcomes = np.array([0.0, 1.0, 0.25, 0.75, 1.0, 1.0, 0.5, 0.5, 0.5])
    # cluster 0 in order: 0, .25 | .75, 1 -> |0.875 - 0.125| = 0.75; cluster 1: two observations, 1 | 1 -> 0;
    # cluster 2: three, .5 | .5 .5 (the middle one in the newer half) -> 0; cluster 3: none
    assert half_progress(labels, outcomes, 4, min_count=1).tolist()[:3] == [0.75, 0.0, 0.0]
    assert math.isnan(half_progress(labels, outcomes, 4, min_count=1)[3])
    # min_count 2: a cluster needs 4 observations
    progress = half_progress(labels, outcomes, 4, min_count=2)
    assert progress[0] == 0.75 and all(math.isnan(p) for p in progress[1:])
    # falling success is progress too (forgetting is a change the agent is going through)
    assert half_progress(np.zeros(4, int), np.array([1.0, 1.0, 0.0, 0.5]), 1, 1).tolist() == [0.75]


def test_unmeasured_clusters_count_as_the_most_progressing():
    assert filled(np.array([0.2, np.nan, 0.0])).tolist() == [0.2, 0.2, 0.0]
    assert filled(np.array([np.nan, np.nan])).tolist() == [1.0, 1.0]
    assert filled(np.array([0.0, np.nan])).tolist() == [0.0, 1.0]


def test_the_pool_records_every_observation_in_order_and_a_resumed_pool_the_same():
    pool = TaskPool()
    pool.add(Task("a", "a"), "seed", -1)
    pool.add(Task("b", "b"), "generated", 0, 0.5)
    pool.add(Task("a", "a"), "generated", 0, 1.0)   # a replay of a pool task records a new p_hat
    pool.add(Task("b", "b"), "generated", 1, 0.25)
    assert pool.outcomes == [(1, 0.5), (0, 1.0), (1, 0.25)]
    assert window_observations(pool, 2) == ([0, 1], [1.0, 0.25])
    resumed = TaskPool()
    for event in pool.pending:
        resumed.apply(event)
    assert resumed.outcomes == pool.outcomes


def _two_kinds_pool():
    """Additions whose success rises over the window (older half 0, newer half 1) and words whose success stays 1."""
    pool = TaskPool()
    sums = [f"{a}+{b}" for a, b in zip(range(10, 50), range(60, 100))]
    for k, s in enumerate(sums):
        pool.add(Task(s, s), "generated", k, 0.0 if k < 20 else 1.0)
        pool.add(Task(f"spell the word banana, copy {k}", "banana"), "generated", k, 1.0)
    return pool


def test_clusters_follow_the_kind_of_task_whose_success_changes():
    pool = _two_kinds_pool()
    found = cluster_progress(pool, 7, clusters=2, window=80, min_count=4)
    assert sorted(found.progress.tolist()) == [0.0, 1.0]
    assert found.rewards(["12+34", "spell the word banana, copy 7"]) == [1.0, 0.0]
    # the same pool, seed and arguments: the same clusters (one fit shared by an epoch's seed draw and reward)
    assert cluster_progress(pool, 7, clusters=2, window=80, min_count=4) is found
    seeds = progress_seeds(pool, 20, np.random.default_rng(0), cluster_seed=7, clusters=2, window=80, min_count=4,
                           exploration=0.0)
    assert all("+" in t.text for t in seeds)
    explored = progress_seeds(pool, 200, np.random.default_rng(0), cluster_seed=7, clusters=2, window=80,
                              min_count=4, exploration=1.0)
    assert 60 < sum("+" in t.text for t in explored) < 140   # uniform over the two clusters
    # before any observation: the pool's uniform draw
    fresh = TaskPool()
    fresh.add(Task("x", "x"), "seed", -1)
    assert cluster_progress(fresh, 0, clusters=2, window=80, min_count=4) is None
    assert progress_seeds(fresh, 3, np.random.default_rng(1), cluster_seed=0, clusters=2, window=80, min_count=4,
                          exploration=0.2) == fresh.sample(np.random.default_rng(1), 3)


def test_a_progress_knob_without_its_signal_or_draw_is_refused():
    load_config("smoke", ["experimental.signal=learning_progress", "experimental.progress.clusters=4"])
    load_config("smoke", ["curriculum=random", "env.seed_draw=progress", "experimental.progress.exploration=0.5"])
    from genenv.signals import check_config
    with pytest.raises(ConfigError, match="experimental.progress.clusters: set to 4, a knob of env.seed_draw=progress "
                                          "and experimental.signal=learning_progress"):
        check_config(load_config("smoke", ["experimental.progress.clusters=4"]))


def test_a_run_pays_learning_progress_with_no_model_calls(tmp_path, monkeypatch):
    from genenv.coevolve import run
    from genenv.experimental.credit import CreditSignal
    from genenv.io import read_jsonl
    credited, hook = [], CreditSignal.before_agent_update

    def recording(self, domain, agent, state, generated, epoch):   # what the hook keeps for the pg update
        stats = hook(self, domain, agent, state, generated, epoch)
        credited.append([self.credited[id(c)] for c in generated if c.valid and c.episodes])
        return stats
    monkeypatch.setattr(CreditSignal, "before_agent_update", recording)
    overrides = ["threads=1", "epochs=3", "experimental.signal=learning_progress", "env.seed_draw=progress",
                 "experimental.progress.clusters=2", "experimental.progress.min_count=1"]
    out = run(load_config("smoke", overrides), run_dir=tmp_path / "lp", log=lambda m: None)
    rows = read_jsonl(out / "metrics.jsonl")
    assert all(r["teacher_forward_sequences"] == 0 and r["teacher_backward_passes"] == 0 for r in rows)
    assert len(credited) == 3
    for epoch, rewards in enumerate(credited):
        assert all(0.0 <= r <= 1.0 for r in rewards)
        if epoch == 0:   # nothing observed yet: every task is exploration and earns the most
            assert rewards and set(rewards) == {1.0}
        elif rewards:
            assert max(rewards) == 1.0
    assert rows[-1]["teacher_reward_mean"] == pytest.approx(sum(credited[-1]) / len(credited[-1]))
    # the untrained simulator with the same information: the seed draw alone, no reward
    out = run(load_config("smoke", ["threads=1", "epochs=2", "curriculum=random", "env.seed_draw=progress"]),
              run_dir=tmp_path / "random", log=lambda m: None)
    assert not any(key.startswith("teacher_") for r in read_jsonl(out / "metrics.jsonl") for key in r)

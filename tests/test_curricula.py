"""The curricula of the paper's ablation over one loop, and the budget that makes them comparable."""

import json

import numpy as np
import pytest

from genenv.coevolve import rollout_budget, run
from genenv.config import ConfigError, load_config
from genenv.curricula import curriculum_names
from genenv.domains import Task
from genenv.io import read_jsonl
from genenv.pool import TaskPool
from genenv.splits import DEV_REASON, HELDOUT_REASON

BUILT_IN = ("genenv", "random", "static", "offline", "learnability", "oracle")


@pytest.fixture(scope="module")
def curriculum_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("curricula")
    return {c: run(load_config("smoke", ["threads=1", f"curriculum={c}"]), run_dir=root / c, log=lambda m: None)
            for c in BUILT_IN}


def test_every_curriculum_gets_the_same_agent_rollouts(curriculum_runs):
    cfg = load_config("smoke")
    fresh, replay = rollout_budget(cfg)
    per_epoch = (fresh + replay) * cfg.agent.group_size
    assert per_epoch == (4 * 2 + 4) * 4  # seeds_per_epoch * variations, + half of that replayed, x group size
    totals = {}
    for curriculum, run_dir in curriculum_runs.items():
        rows = read_jsonl(run_dir / "metrics.jsonl")
        assert [r["curriculum"] for r in rows] == [curriculum] * cfg.epochs
        assert [r["rollouts_this_epoch"] for r in rows] == [per_epoch] * cfg.epochs, curriculum
        totals[curriculum] = rows[-1]["rollouts"]
    assert set(totals.values()) == {per_epoch * cfg.epochs}


def test_only_genenv_trains_the_simulator(curriculum_runs):
    for curriculum, run_dir in curriculum_runs.items():
        steps = sum(r["env_steps"] for r in read_jsonl(run_dir / "metrics.jsonl"))
        assert (steps > 0) == (curriculum == "genenv"), curriculum


def test_fixed_data_curricula_never_generate_and_keep_their_set(curriculum_runs):
    cfg = load_config("smoke")
    for curriculum in ("static", "offline", "learnability"):
        run_dir = curriculum_runs[curriculum]
        fixed = json.loads((run_dir / "fixed_set.json").read_text())
        rows = read_jsonl(run_dir / "metrics.jsonl")
        assert all(r["generated"] == 0 and r["invalid_rate"] is None for r in rows)
        assert {r["task_pool_size"] for r in rows} == {fixed["size"]}  # the set never grows
        assert all(r["drawn_tasks"] == 12 and r["p_hat_mean"] is not None for r in rows)
        assert fixed["seed_tasks"] == cfg.domain.num_seed_tasks
        if curriculum == "offline":  # (1.8 - 1) x the seeds, from the domain's own generator: all valid but the
            # held-out and dev tasks among them, which are rejected
            assert fixed["generated"] == round(0.8 * cfg.domain.num_seed_tasks)
            assert set(fixed["invalid_reasons"]) <= {HELDOUT_REASON, DEV_REASON}
            assert fixed["valid"] == fixed["generated"] - sum(fixed["invalid_reasons"].values())
        else:  # static_variations (5) simulator generations per seed, validated
            assert fixed["generated"] == 5 * cfg.domain.num_seed_tasks
        assert fixed["size"] == cfg.domain.num_seed_tasks + fixed["added"]
        samples = read_jsonl(run_dir / "samples" / "epoch_0.jsonl")
        assert len(samples) == 12 and all(s["source"] == "drawn" for s in samples)
        assert len(read_jsonl(run_dir / "samples" / "fixed_set.jsonl")) == fixed["generated"]


def test_static_and_learnability_share_one_set(curriculum_runs):
    static = json.loads((curriculum_runs["static"] / "fixed_set.json").read_text())
    learn = json.loads((curriculum_runs["learnability"] / "fixed_set.json").read_text())
    assert static["size"] == learn["size"] and static["level_histogram"] == learn["level_histogram"]


def test_offline_multiplier_sets_the_size(tmp_path):
    out = run(load_config("smoke", ["threads=1", "curriculum=offline", "baseline.offline_multiplier=3.3",
                                    "epochs=1"]), run_dir=tmp_path / "o", log=lambda m: None)
    fixed = json.loads((out / "fixed_set.json").read_text())
    assert fixed["generated"] == round(2.3 * 64)
    assert fixed["size"] <= round(3.3 * 64) and fixed["size"] > 2 * 64  # duplicates of seeds are not re-added


def test_invalid_generations_are_replaced_by_pool_tasks(tmp_path):
    """A simulator that writes nothing valid does not shrink the agent's rollout budget."""
    out = run(load_config("smoke", ["threads=1", "epochs=2", "env.max_new_tokens=2"]), run_dir=tmp_path / "bad",
              log=lambda m: None)
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["valid"] for r in rows] == [0, 0]
    assert [r["drawn_tasks"] for r in rows] == [12, 12]
    assert [r["rollouts_this_epoch"] for r in rows] == [48, 48]


def test_learnability_sampler_prefers_uncertain_tasks():
    pool = TaskPool()
    for i, p in enumerate([0.0, 1.0, 0.5, None]):
        pool.add(Task(str(i), str(i)), "seed", -1, p)
    draws = [t.text for seed in range(200) for t in pool.sample_by_learnability(np.random.default_rng(seed), 1, 0.01)]
    counts = {k: draws.count(k) for k in "0123"}
    # weights 0.01, 0.01, 0.25, 0.25 (never rolled out counts as p = 0.5): expected 4, 4, 96, 96 of 200
    assert counts["2"] > 60 and counts["3"] > 60
    assert counts["0"] + counts["1"] < 30
    # without replacement within one draw
    assert sorted(t.text for t in pool.sample_by_learnability(np.random.default_rng(0), 4, 0.0)) == list("0123")


def test_seed_draw_picks_the_simulators_prompts_as_configured():
    """env.seed_draw=uniform is the pool's uniform draw (the same rng calls as before the knob); learnability
    draws the seeds the agent sometimes solves."""
    from genenv.coevolve import draw_seeds
    pool = TaskPool()
    for i, p in enumerate([0.0, 1.0, 0.5, 1.0, 0.0, 1.0]):
        pool.add(Task(str(i), str(i)), "seed", -1, p)
    uniform = load_config("smoke", ["seeds_per_epoch=3"])
    assert draw_seeds(uniform, pool, np.random.default_rng(5)) == pool.sample(np.random.default_rng(5), 3)
    mixed = load_config("smoke", ["seeds_per_epoch=1", "experimental.learnability_seeds=true",
                                  "baseline.learnability_floor=0"])
    assert {draw_seeds(mixed, pool, np.random.default_rng(s))[0].text for s in range(20)} == {"2"}


def test_frontier_seed_draw_varies_the_easiest_level_not_yet_mastered():
    """env.seed_draw=frontier: every seed from the pool's tasks of the level the oracle's frontier rule picks
    (level 1 mastered, levels 2 and 3 not: level 2); a level never rolled out is tried first."""
    from genenv.coevolve import draw_seeds
    pool = TaskPool()
    for i, (level, p) in enumerate([(1, 1.0), (1, 0.875), (2, 0.125), (2, 0.0), (3, 0.0), (1, 1.0)]):
        pool.add(Task(f"t{i}", f"t{i}", "a", level), "seed", -1, p)
    cfg = load_config("smoke", ["seeds_per_epoch=6", "env.seed_draw=frontier", "baseline.oracle_exploration=0",
                                "curriculum_reward.k_min=0.25"])  # mastered: mean success above 0.75
    for s in range(5):
        assert {t.level for t in draw_seeds(cfg, pool, np.random.default_rng(s))} == {2}
    assert {t.text for s in range(5) for t in draw_seeds(cfg, pool, np.random.default_rng(s))} == {"t2", "t3"}
    pool.add(Task("new", "new", "a", 4), "generated", 0)   # level 4: in the pool, never rolled out
    assert {t.text for t in draw_seeds(cfg, pool, np.random.default_rng(0))} == {"new"}
    explore = load_config("smoke", ["seeds_per_epoch=50", "env.seed_draw=frontier", "baseline.oracle_exploration=1"])
    assert {t.level for t in draw_seeds(explore, pool, np.random.default_rng(0))} == {1, 2, 3, 4}


def test_predicted_seed_draw_varies_the_easiest_learned_group_not_yet_mastered():
    """experimental.predicted_seeds (no levels): the pool ranked by a difficulty model fit on its p_hat and cut
    into experimental.predicted_seed_bins groups; the frontier rule picks the easiest group not mastered. Three
    kinds of task text, always solved, sometimes solved, never solved: every seed is of the middle kind. Before
    any rollout there is nothing to fit: the uniform draw."""
    from genenv.coevolve import draw_seeds
    pool = TaskPool()
    cfg = load_config("smoke", ["seeds_per_epoch=6", "experimental.predicted_seeds=true",
                                "experimental.predicted_seed_bins=3",
                                "baseline.oracle_exploration=0", "curriculum_reward.k_min=0.25"])
    for i in range(4):
        pool.add(Task(f"add {i} plus {i}", "x"), "seed", -1)
    assert draw_seeds(cfg, pool, np.random.default_rng(3)) == pool.sample(np.random.default_rng(3), 6)
    pool = TaskPool()
    for i in range(5):
        for text, p in ((f"add {i} plus {i}", 1.0), (f"multiply {i}{i} by {i}{i}", 0.25),
                        (f"integrate x^{i} sin(x) dx", 0.0)):
            pool.add(Task(text, "x"), "seed", -1, p)
    for s in range(5):
        assert {t.text.split()[0] for t in draw_seeds(cfg, pool, np.random.default_rng(s))} == {"multiply"}
    # once the middle kind is mastered too, the frontier moves on to the hardest kind
    for entry in pool.entries:
        if entry.task.text.startswith("multiply"):
            entry.p_hat_history.append(0.875)
    assert {t.text.split()[0] for t in draw_seeds(cfg, pool, np.random.default_rng(0))} == {"integrate"}


def test_learnability_sampler_falls_back_to_uniform():
    pool = TaskPool()
    for i in range(3):
        pool.add(Task(str(i), str(i)), "seed", -1, 1.0)
    assert len(pool.sample_by_learnability(np.random.default_rng(0), 2, 0.0)) == 2


def test_level_success_is_the_mean_and_band_share_of_recent_tasks():
    from genenv.reward import LevelSuccess, level_success
    pool = TaskPool()
    for i, (level, p_hats) in enumerate([(1, [0.0, 1.0]), (1, [0.5]), (2, [0.25]), (2, []), (1, [0.0])]):
        task = Task(f"t{i}", f"t{i}", "a", level)
        pool.add(task, "generated", 0)
        for p in p_hats:
            pool.add(task, "generated", 0, p)
    stats = level_success(pool, [1, 2, 3], window=64, alpha=0.5, k_min=0.25)
    assert stats[1] == LevelSuccess(pytest.approx((1.0 + 0.5 + 0.0) / 3), pytest.approx(1 / 3))  # 0.5 in band
    assert stats[2] == LevelSuccess(0.25, 1.0) and stats[3] is None                  # 0.25 on the band's edge
    assert level_success(pool, [1, 2, 3], window=2)[1] == LevelSuccess(0.25, 0.5)   # the 2 latest of level 1


def test_choose_level_frontier_rule_moves_past_a_mastered_level_to_one_not_yet_solved():
    from genenv.reward import LevelSuccess as S
    from genenv.signals import choose_level
    rng = np.random.default_rng(0)
    # level 2 mastered (0.9), level 3 unsolved (0.05, nothing in the band): the frontier picks 3
    stats = {1: S(0.99, 0.0), 2: S(0.9, 0.1), 3: S(0.05, 0.0), 4: S(0.0, 0.0)}
    assert {choose_level(stats, 0.0, rng, mastered=0.75) for _ in range(20)} == {3}
    # an easier level that slipped below mastery comes back first; the threshold is strict
    assert choose_level({**stats, 1: S(0.7, 1.0)}, 0.0, rng, mastered=0.75) == 1
    assert choose_level({**stats, 2: S(0.75, 1.0)}, 0.0, rng, mastered=0.75) == 3
    # everything mastered: the hardest level; untried levels and exploration come before the rule
    done = {lv: S(0.95, 0.0) for lv in (1, 2, 3)}
    assert choose_level(done, 0.0, rng) == 3
    assert choose_level({**done, 2: None}, 0.0, rng) == 2
    assert len({choose_level(stats, 1.0, rng) for _ in range(200)}) == 4


def test_the_retired_band_rule_and_posterior_estimate_name_the_commit_that_runs_them():
    """Issue 94: experimental.oracle_rule=band and experimental.p_hat_estimate=posterior left the main path (two
    replacement slots it kept for them); under any spelling, one error naming the commit whose code runs them."""
    from genenv.experimental import REMOVED
    for override in ("experimental.oracle_rule=band", "baseline.oracle_rule=band",
                     "experimental.p_hat_estimate=posterior", "curriculum_reward.posterior=true"):
        with pytest.raises(ConfigError, match=r"was removed .* commit [0-9a-f]{7}"):
            load_config("smoke", [override])
    assert {"experimental.oracle_rule=band", "experimental.p_hat_estimate=posterior"} <= set(REMOVED)


def test_oracle_writes_domain_tasks_at_the_frontier_and_never_trains_the_simulator(tmp_path):
    cfg = load_config("smoke", ["threads=1", "curriculum=oracle", "epochs=3", "baseline.oracle_exploration=0"])
    out = run(cfg, run_dir=tmp_path / "oracle", log=lambda m: None)
    rows = read_jsonl(out / "metrics.jsonl")
    assert all(r["env_steps"] == 0 and r["generated"] == 8 for r in rows)
    # every fresh task is the domain's own: valid unless it is a held-out or dev task
    for epoch in range(3):
        samples = read_jsonl(out / "samples" / f"epoch_{epoch}.jsonl")
        assert all(s["valid"] or s["reason"] in (HELDOUT_REASON, DEV_REASON) for s in samples)
        assert all(s["context"] == "" for s in samples)  # no simulator prompt
        # one level per seed batch (the oracle picks a level, then writes env.variations tasks at it)
        by_batch = {}
        for s in samples:
            if s["valid"]:
                by_batch.setdefault(s["batch"], set()).add(s["level"])
        assert all(len(levels) == 1 for levels in by_batch.values())


def test_oracle_refuses_a_domain_without_levels(tmp_path):
    from genenv.config import ConfigError
    with pytest.raises(ConfigError, match="oracle needs a domain that draws a task at a given level"):
        run(load_config("toolcall-smoke", ["curriculum=oracle"]), run_dir=tmp_path / "r", log=lambda m: None)


def test_built_in_curricula_are_registered():
    assert set(BUILT_IN) <= set(curriculum_names())


def test_a_run_stopped_while_writing_its_fixed_set_resumes_with_the_same_set(tmp_path, monkeypatch):
    """The static set is written shard by shard into a journal; a run stopped after 3 shards writes only the rest
    on resume, and ends exactly as an uninterrupted run (the same set, the same metrics); the journal goes once the
    first checkpoint holds the set."""
    import genenv.generation as generation
    from genenv.metrics import TIMING_KEYS
    from genenv.run_folder import FIXED_SET_JOURNAL
    cfg = load_config("smoke", ["threads=1", "curriculum=static", "epochs=1", "env.generation_batch=20"])
    whole = run(cfg, run_dir=tmp_path / "whole", log=lambda m: None)
    real, calls = generation.write_shard, []

    def stops_after_three(*args, **kwargs):
        if len(calls) == 3:
            raise RuntimeError("killed")
        calls.append(1)
        return real(*args, **kwargs)
    monkeypatch.setattr(generation, "write_shard", stops_after_three)
    stopped = tmp_path / "stopped"
    with pytest.raises(RuntimeError, match="killed"):
        run(cfg, run_dir=stopped, log=lambda m: None)
    assert len(read_jsonl(stopped / FIXED_SET_JOURNAL)) == 3
    calls.clear()
    monkeypatch.setattr(generation, "write_shard", lambda *a, **k: calls.append(1) or real(*a, **k))
    run(cfg, run_dir=stopped, resume=True, log=lambda m: None)
    shards = -(-64 // (20 // cfg.baseline.static_variations))   # 64 seeds, 4 per shard
    assert len(calls) == shards - 3
    assert (stopped / "samples" / "fixed_set.jsonl").read_text() == (whole / "samples" / "fixed_set.jsonl").read_text()
    stable = [[{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in read_jsonl(d / "metrics.jsonl")]
              for d in (whole, stopped)]
    assert stable[0] == stable[1]
    assert not (stopped / FIXED_SET_JOURNAL).exists()

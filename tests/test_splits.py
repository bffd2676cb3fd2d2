"""No task of the held-out or dev set is ever trained on, for every domain and curriculum, at any size."""

import json

import pytest

from genenv.coevolve import run, validate_tasks
from genenv.config import load_config
from genenv.domains import Task, make_domain
from genenv.generation import Candidate
from genenv.splits import DEV_REASON, HELDOUT_REASON, data_split, level_accounts, training_seed_tasks


def _evaluation_texts(split):
    return split.heldout_texts | split.dev_texts


@pytest.mark.parametrize("per_level", [50, 200])
def test_addition_seed_set_avoids_heldout_and_dev_at_any_size(per_level):
    """At 50 per level 21 of the 50 level-2 held-out tasks were seed tasks, at 200 it was 90 of 200; the dev
    set was never excluded."""
    cfg = load_config(None, [f"domain.heldout_per_level={per_level}", "domain.num_seed_tasks=4000"])
    domain = make_domain("addition")
    split = data_split(cfg, domain)
    seeds = training_seed_tasks(cfg, domain, split)
    assert len(seeds) == 4000 and len({t.text for t in seeds}) == 4000
    assert not {t.text for t in seeds} & _evaluation_texts(split)
    assert {t.level for t in seeds} == {1, 2}


def test_household_seed_set_avoids_heldout_and_dev():
    cfg = load_config("household-smoke", ["domain.heldout_per_level=6", "domain.num_seed_tasks=60"])
    domain = make_domain("household", **cfg.domain.options)
    split = data_split(cfg, domain)
    seeds = training_seed_tasks(cfg, domain, split)
    assert len(seeds) == 60 and not {t.text for t in seeds} & _evaluation_texts(split)


def test_generated_evaluation_tasks_are_rejected_with_a_reason():
    cfg = load_config("smoke")
    domain = make_domain("addition", **cfg.domain.options)
    split = data_split(cfg, domain)
    heldout, dev = split.heldout[5], next(t for t in split.dev if t.text not in split.heldout_texts)
    fresh = next(domain.make_task(a, 77) for a in range(100, 1000)
                 if domain.make_task(a, 77).text not in _evaluation_texts(split))
    generated = [Candidate(0, fresh, "", [], [], text, None) for text in (heldout.text, dev.text, fresh.text)]
    generated = validate_tasks(domain, generated, split)
    assert [g.parsed.reason if not g.valid else "valid" for g in generated] == [HELDOUT_REASON, DEV_REASON, "valid"]


def test_small_levels_are_reported():
    cfg = load_config(None, ["domain.heldout_per_level=100"])
    domain = make_domain("addition")
    split = data_split(cfg, domain)
    accounts = level_accounts(domain, split, training_seed_tasks(cfg, domain, split))
    level_one = accounts["levels"]["1"]
    taken = len({t.text for t in [*split.heldout, *split.dev] if t.level == 1})
    assert level_one["level_size"] == 100 and level_one["left_for_training"] == 100 - taken > 0
    assert level_one["seed"] <= 100 - taken
    assert len(accounts["small_levels"]) == 1 and accounts["small_levels"][0].startswith("level 1 has 100")
    assert accounts["levels"]["2"]["left_for_training"] == 9900 - len(
        {t.text for t in [*split.heldout, *split.dev] if t.level == 2})


@pytest.mark.slow
def test_offline_teacher_set_holds_no_evaluation_task(tmp_path):
    """The offline 3.3x set held 10 level-2 held-out tasks; now they are rejected, counted and reported."""
    cfg = load_config("smoke", ["threads=1", "curriculum=offline", "baseline.offline_multiplier=3.3", "epochs=1",
                                "domain.heldout_per_level=40"])
    out = run(cfg, run_dir=tmp_path / "offline", log=lambda m: None)
    split = data_split(cfg, make_domain("addition", **cfg.domain.options))
    pool_log = (out / "checkpoints" / "task_pool.log.jsonl").read_text().splitlines()
    trained = {Task.from_json(event["add"]).text for event in map(json.loads, pool_log) if "add" in event}
    assert len(trained) > cfg.domain.num_seed_tasks and not trained & _evaluation_texts(split)
    fixed = json.loads((out / "fixed_set.json").read_text())
    assert fixed["invalid_reasons"].get(HELDOUT_REASON, 0) > 0  # level 1 (100 tasks) is largely held out
    accounts = json.loads((out / "data_split.json").read_text())
    assert accounts["small_levels"] and accounts["seed_tasks"] == cfg.domain.num_seed_tasks


def test_a_candidate_updated_is_dataclasses_replace_without_touching_the_original():
    import dataclasses

    task = Task("1+2", "1+2=", answer="3", level=1)
    original = Candidate(3, task, "ctx", [1, 2], [3], "raw", None, logprobs=(-0.5,))
    changes = {"parsed": task, "p_hat_task": 0.25, "p_hat": 0.5, "r_env": 1.0, "in_band": True}
    updated = original.updated(**changes)
    assert updated == dataclasses.replace(original, **changes)
    assert original.parsed is None and original.p_hat is None   # the original is unchanged
    with pytest.raises(dataclasses.FrozenInstanceError):
        updated.p_hat = 0.1   # still immutable
    with pytest.raises(TypeError, match="p_hut"):
        original.updated(p_hut=0.5)

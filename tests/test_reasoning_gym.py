"""Issue 43, item 4: reasoning-gym's families as a domain; the simulator writes a specification the domain grounds
with reasoning-gym and scores with the family's own verifier."""

import numpy as np
import pytest

pytest.importorskip("reasoning_gym")

from genenv.domain_check import check_domain  # noqa: E402
from genenv.domains import Invalid, make_domain  # noqa: E402
from genenv.domains.reasoning_gym.domain import DEV_SEEDS, HELDOUT_SEEDS, TRAIN_SEEDS  # noqa: E402

FAMILIES = ["basic_arithmetic", "base_conversion"]


@pytest.fixture(scope="module")
def domain():
    return make_domain("reasoning_gym", datasets=FAMILIES)


def test_a_specification_grounds_to_the_familys_item(domain):
    import reasoning_gym
    task = domain.parse_task("basic_arithmetic num_terms=1 num_digits=2 seed=250000")
    assert task.level == 4 and task.meta == {"dataset": "basic_arithmetic", "levels": {"num_terms": 1,
                                                                                       "num_digits": 2},
                                             "seed": 250000}
    # the item reasoning-gym itself builds at those curriculum levels and seed
    curriculum = reasoning_gym.factory.create_curriculum("basic_arithmetic")
    curriculum.set_attr_level("num_terms", 1)
    curriculum.set_attr_level("num_digits", 2)
    item = reasoning_gym.create_dataset("basic_arithmetic",
                                        **vars(curriculum.generate_configuration({"seed": 250000, "size": 1})))[0]
    assert task.prompt.startswith(item["question"]) and task.answer == str(item["answer"])
    assert domain.score(task, item["answer"]) == 1.0 and domain.score(task, "not it") == 0.0


def test_spell_backward_scores_like_its_own_scorer_and_builds_it_once(monkeypatch):
    """The family's scorer is built once per family, not per score (reasoning-gym's get_score_answer_fn builds the
    whole dataset, 30 ms for spell_backward), and scores as reasoning-gym's own scorer does."""
    import reasoning_gym

    from genenv.domains.reasoning_gym import domain as rg_domain
    rg_domain._scorer.cache_clear()
    built = []
    original = reasoning_gym.factory.get_score_answer_fn
    monkeypatch.setattr(reasoning_gym.factory, "get_score_answer_fn", lambda name: built.append(name) or original(name))
    spell = make_domain("reasoning_gym", datasets=["spell_backward"])
    tasks = [spell.random_task(np.random.default_rng(seed), 2) for seed in range(5)]
    own = original("spell_backward")
    for task in tasks:
        item = rg_domain._item("spell_backward", tuple(task.meta["levels"].items()), task.meta["seed"])
        for response in (task.answer, task.answer[::-1], "", "  " + task.answer + " "):
            assert spell.score(task, response) == float(own(answer=response.strip(), entry=item) >= 1.0)
    assert built == ["spell_backward"]
    rg_domain._scorer.cache_clear()


def test_seed_heldout_and_dev_sets_use_disjoint_generator_seeds(domain):
    seeds = [t.meta["seed"] for t in domain.seed_tasks(np.random.default_rng(0), 50)]
    heldout = [t.meta["seed"] for t in domain.heldout_tasks(3)]
    dev = [t.meta["seed"] for t in domain.dev_tasks(3)]
    assert all(TRAIN_SEEDS[0] <= s < TRAIN_SEEDS[1] for s in seeds)
    assert all(HELDOUT_SEEDS[0] <= s < HELDOUT_SEEDS[1] for s in heldout)
    assert all(DEV_SEEDS[0] <= s < DEV_SEEDS[1] for s in dev)
    assert {t.level for t in domain.heldout_tasks(1)} == set(domain.levels())
    assert {t.level for t in domain.seed_tasks(np.random.default_rng(1), 40)} <= {1, 2}
    assert domain.ordered_levels


@pytest.mark.parametrize("text, reason", [
    ("rm -rf /", "not '<family> <attribute>=<level> ... seed=<n>'"),
    ("number_sorting numbers=0 decimals=0 min_value=0 max_value=0 seed=5", "family not in domain.options.datasets"),
    ("basic_arithmetic num_terms=1 seed=5", "not each of the family's attributes once"),
    ("basic_arithmetic num_terms=1 num_terms=2 seed=5", "not each of the family's attributes once"),
    ("basic_arithmetic num_terms=7 num_digits=0 seed=5", "an attribute level out of range"),
    ("basic_arithmetic num_terms=1 num_digits=0 seed=1000000", "seed out of range"),
])
def test_bad_specifications_are_rejected_with_their_reason(domain, text, reason):
    parsed = domain.parse_task(text)
    assert isinstance(parsed, Invalid) and parsed.reason == reason


def test_max_level_caps_the_levels_and_what_the_simulator_may_write():
    capped = make_domain("reasoning_gym", datasets=["basic_arithmetic"], max_level=3)
    assert capped.levels() == [1, 2, 3]
    assert capped.parse_task("basic_arithmetic num_terms=2 num_digits=1 seed=5").reason == \
        "above domain.options.max_level"


def test_partial_reward_passes_the_familys_own_score_through():
    exact = make_domain("reasoning_gym", datasets=["basic_arithmetic"])
    partial = make_domain("reasoning_gym", datasets=["basic_arithmetic"], reward="partial")
    task = exact.parse_task("basic_arithmetic num_terms=0 num_digits=1 seed=67148")
    near = task.answer + "0"   # the family gives a near miss partial credit (0.8 for 47250 against 4725)
    assert exact.score(task, near) == 0.0 and 0.0 < partial.score(task, near) < 1.0
    assert exact.score(task, task.answer) == partial.score(task, task.answer) == 1.0


def test_unknown_families_name_themselves():
    with pytest.raises(ValueError, match="no_such_family"):
        make_domain("reasoning_gym", datasets=["no_such_family"])


def test_the_domain_holds_genenvs_properties_on_untrusted_text(domain):
    report = check_domain(domain, examples=100, seed=0)
    assert report.ok, report.failures
    assert report.counts["task_shape"] == report.counts["seed_round_trip"] > 0   # its regex holds its seeds


@pytest.mark.slow
def test_a_run_on_reasoning_gym(tmp_path):
    from genenv.coevolve import run
    from genenv.config import load_config
    from genenv.io import read_jsonl
    rows = read_jsonl(run(load_config("smoke", ["domain.name=reasoning_gym"]), tmp_path / "run",
                          log=lambda _: None) / "metrics.jsonl")
    assert len(rows) == 3 and sum(r["valid"] for r in rows) > 0
    assert set(rows[-1]["heldout_by_level"]) == {str(level) for level in range(1, 9)}


@pytest.mark.parametrize("family", ["basic_arithmetic", "spell_backward"])
def test_the_tiny_preset_fits_each_measured_familys_tasks_in_its_models(family):
    """--preset reasoning-gym (tiny models): every level's question and answer fit the agent's positions, and the
    simulator's prompt with a specification fits its own (a longer task would be cut, not learnt)."""
    from genenv.config import load_config
    from genenv.models.tiny import build_tiny_tokenizer
    cfg = load_config("reasoning-gym", [f"domain.options.datasets=[{family}]"])
    fam = make_domain(cfg.domain.name, **cfg.domain.options)
    tokenizer = build_tiny_tokenizer(fam.alphabet, fam.tiny_words)
    rng = np.random.default_rng(0)
    tasks = [fam.random_task(rng, level) for level in fam.levels() for _ in range(20)]
    agent = max(len(tokenizer(t.prompt + t.answer).input_ids) + 2 for t in tasks)
    env = max(len(tokenizer(fam.simulator_prompt(t, {"success_rate": 0.5}) + t.text).input_ids) + 2 for t in tasks)
    assert agent <= cfg.agent.tiny.max_positions and env <= cfg.env.tiny.max_positions

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from genenv.domains import Invalid, Task, make_domain


def test_task_format_lsd_first():
    domain = make_domain("addition", width=4)
    task = domain.make_task(12, 995)
    assert task.text == "2100+5990"
    assert task.answer == "70010"  # 1007 LSD-first in 5 digits
    assert task.level == 3
    assert domain.score(task, "70010") == 1.0 and domain.score(task, "70011") == 0.0


def test_digits_reward_is_the_share_of_positions_right_and_success_stays_exact():
    domain = make_domain("addition", width=4, reward="digits")
    task = domain.make_task(12, 995)  # answer 70010
    assert domain.score(task, " 70010 ") == 1.0
    assert domain.score(task, "70011") == 0.8            # 4 of 5 positions
    assert domain.score(task, "701") == 0.4              # 2 of 5: missing positions count wrong
    assert domain.score(task, "7001000") == 5 / 7        # extra characters count wrong
    assert domain.score(task, "") == 0.0 and domain.score(task, "hello") == 0.0
    assert all(domain.score(task, r) < 1.0 for r in ("70011", "7001", "700100"))  # only the sum succeeds


def test_parse_grounds_answer_and_rejects_with_reasons():
    domain = make_domain("addition", width=4)
    parsed = domain.parse_and_validate("2100+5990")
    assert isinstance(parsed, Task) and parsed.answer == "70010"
    for text, reason in [("2100-5990", "'+'"), ("21x0+5990", "non-digit"), ("210+5990", "exactly 4"),
                         ("", "'+'")]:
        result = domain.parse_and_validate(text)
        assert isinstance(result, Invalid) and reason in result.reason, (text, result)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_parse_never_raises_on_arbitrary_text(text):
    domain = make_domain("addition", width=4)
    result = domain.parse_and_validate(text)
    assert isinstance(result, (Task, Invalid))
    if isinstance(result, Task):
        a, b = result.meta["a"], result.meta["b"]
        assert result.answer == str(a + b).zfill(5)[::-1]


def test_seed_and_heldout_sets():
    domain = make_domain("addition")
    seeds = domain.seed_tasks(np.random.default_rng(0), 500)
    assert {t.level for t in seeds} == {1, 2}
    heldout = domain.heldout_tasks(10)
    assert sorted({t.level for t in heldout}) == list(range(1, 9))
    assert [t.text for t in heldout] == [t.text for t in domain.heldout_tasks(10)]  # fixed
    assert len({t.text for t in seeds}) == 500  # distinct (the library keeps them off the held-out set)
    assert [domain.level_size(level) for level in (1, 2, 3)] == [100, 9900, 990000]
    for level in (1, 2):  # the size is the number of distinct tasks random_task can draw at the level
        rng = np.random.default_rng(level)
        draws = 2000 if level == 1 else 150000
        assert len({domain.random_task(rng, level).text for _ in range(draws)}) == domain.level_size(level)


def test_simulator_prompt_and_corpus_cover_all_levels():
    domain = make_domain("addition")
    seed = domain.make_task(3, 4)
    assert domain.simulator_prompt(seed, {"success_rate": 0.55}) == "s5|30000000+40000000>"
    assert domain.simulator_prompt(seed, {"success_rate": None}).startswith("s?|")
    corpus = domain.simulator_corpus(np.random.default_rng(0), 400)
    assert {task.level for _, _, task in corpus} == set(range(1, 9))


def test_variation_span_keeps_each_corpus_task_near_its_seed():
    independent = make_domain("addition").simulator_corpus(np.random.default_rng(0), 400)
    assert max(abs(task.level - seed.level) for seed, _, task in independent) >= 5   # the seed does not matter
    near = make_domain("addition", variation_span=1).simulator_corpus(np.random.default_rng(0), 400)
    gaps = [task.level - seed.level for seed, _, task in near]
    assert set(gaps) == {-1, 0, 1}
    assert {task.level for _, _, task in near} == set(range(1, 9))
    # at the edges only the levels that exist: a level-1 seed gets level 1 or 2, never 0
    assert {task.level for seed, _, task in near if seed.level == 1} == {1, 2}


def test_bad_domain_options_are_config_errors():
    import pytest

    from genenv.config import ConfigError
    with pytest.raises(ConfigError, match="domain"):
        make_domain("addition", width=99)
    with pytest.raises(ConfigError, match="reward"):
        make_domain("addition", reward="partial")
    with pytest.raises(ConfigError, match="variation_span"):
        make_domain("addition", variation_span=-1)
    with pytest.raises(ConfigError, match="domain.name"):
        make_domain("nope")


def test_difficulty_measures_hand_values():
    domain = make_domain("addition")
    # 58 + 67 = 125: carries out of the units (8+7) and the tens (5+6+1): 2 carries in a chain of 2
    assert domain.difficulty_measures(domain.make_task(58, 67)) == {
        "level": 2, "shorter_operand_digits": 2, "operand_digits": 4, "carries": 2, "longest_carry_chain": 2}
    # 905 + 95 = 1000: units 5+5 carry, tens 0+9+1 carry, hundreds 9+0+1 carry
    assert domain.difficulty_measures(domain.make_task(905, 95))["longest_carry_chain"] == 3
    # 19 + 10 = 29: no carry; 0 + 7: one digit each
    assert domain.difficulty_measures(domain.make_task(19, 10))["carries"] == 0
    assert domain.difficulty_measures(domain.make_task(0, 7))["operand_digits"] == 2

"""The household domain: ALFWorld's rules and texts, grounding with reasons, planner, episodes, protocols."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from genenv.domains import Invalid, make_domain
from genenv.domains.household import engine
from genenv.domains.household.domain import level_of
from genenv.models.policy import Generation
from genenv.prompts import fit_history
from genenv.rollout import rollout, single_step_accuracy

HEAT = {"goal": {"type": "pick_heat_then_place_in_recep", "object": "apple", "receptacle": "countertop"},
        "receptacles": ["countertop 1", "fridge 1", "microwave 1", "cabinet 1"],
        "objects": {"apple 1": "fridge 1", "mug 1": "countertop 1"}, "closed": ["fridge 1", "cabinet 1"]}


def _world(data=HEAT, **changes):
    data = json.loads(json.dumps(data))
    data.update(changes)
    return json.dumps(data)


@pytest.fixture(scope="module")
def domain():
    return make_domain("household", max_steps=12)


def test_rules_and_observation_texts_follow_alfworld():
    world = engine.parse_world(_world())
    assert engine.intro(world) == (
        "-= Welcome to TextWorld, ALFRED! =-\n\nYou are in the middle of a room. Looking quickly around you, you "
        "see a cabinet 1, a countertop 1, a fridge 1, and a microwave 1.\n\nYour task is to: put a hot apple in "
        "countertop.")
    state = engine.initial_state(world)
    script = [("take apple 1 from fridge 1", "Nothing happens."),            # not there yet
              ("go to fridge 1", "You arrive at fridge 1. The fridge 1 is closed."),
              ("take apple 1 from fridge 1", "Nothing happens."),            # closed
              ("open fridge 1", "You open the fridge 1. The fridge 1 is open. In it, you see a apple 1."),
              ("take apple 1 from fridge 1", "You pick up the apple 1 from the fridge 1."),
              ("inventory", "You are carrying: a apple 1."),
              ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a mug 1."),
              ("take mug 1 from countertop 1", "Nothing happens."),          # hands full
              ("go to microwave 1", "You arrive at microwave 1. The microwave 1 is open. In it, you see nothing."),
              ("heat apple 1 with microwave 1", "You heat the apple 1 using the microwave 1."),
              ("go to countertop 1", "You arrive at countertop 1. On the countertop 1, you see a mug 1."),
              ("move apple 1 to countertop 1", "You move the apple 1 to the countertop 1."),
              ("look", "You are facing the countertop 1. Next to it, you see nothing."),
              ("dance", "Nothing happens.")]
    for action, expected in script:
        assert not engine.goal_holds(world, state) or action in ("look", "dance")
        state, observation = engine.step(world, state, action)
        assert observation == expected, action
    assert engine.goal_holds(world, state)
    cooled, _ = engine._apply(world, state, "go to fridge 1", describe=False)
    assert engine.goal_holds(world, cooled)  # the goal is a fact about the world, not the agent's position


def test_heating_clears_cool_and_lamps_toggle():
    world = engine.parse_world(_world(objects={"apple 1": "countertop 1"}, states={"apple 1": ["cool"]}))
    state = engine.initial_state(world)
    for action in ("go to countertop 1", "take apple 1 from countertop 1", "go to microwave 1",
                   "heat apple 1 with microwave 1"):
        state, _ = engine.step(world, state, action)
    assert state.states[0] == frozenset({"hot"})
    look = engine.parse_world(json.dumps({
        "goal": {"type": "look_at_obj_in_light", "object": "book", "lamp": "desklamp"},
        "receptacles": ["desk 1", "bed 1"], "objects": {"book 1": "bed 1", "desklamp 1": "desk 1"}}))
    assert engine.plan(look) == ["go to bed 1", "take book 1 from bed 1", "go to desk 1", "use desklamp 1"]
    state = engine.initial_state(look)
    for action, text in (("go to desk 1", None), ("use desklamp 1", "You turn on the desklamp 1."),
                         ("use desklamp 1", "You turn off the desklamp 1.")):
        state, observation = engine.step(look, state, action)
        assert text is None or observation == text


@pytest.mark.parametrize("data, length", [
    (HEAT, 7),
    ({**HEAT, "closed": []}, 6),
    ({"goal": {"type": "pick_two_obj_and_place", "object": "cd", "receptacle": "shelf"},
      "receptacles": ["shelf 1", "drawer 1", "desk 1"], "objects": {"cd 1": "drawer 1", "cd 2": "desk 1"},
      "closed": ["drawer 1"]}, 9),
    ({"goal": {"type": "pick_two_obj_and_place", "object": "cd", "receptacle": "shelf"},
      "receptacles": ["shelf 1", "desk 1"], "objects": {"cd 1": "shelf 1", "cd 2": "desk 1"}}, 4),
    ({"goal": {"type": "pick_clean_then_place_in_recep", "object": "mug", "receptacle": "countertop"},
      "receptacles": ["countertop 1", "sinkbasin 1"], "objects": {"mug 1": "countertop 1"},
      "states": {}}, 6),
])
def test_planner_finds_shortest_plans(data, length):
    world = engine.parse_world(json.dumps(data))
    actions = engine.plan(world)
    assert len(actions) == length
    state = engine.initial_state(world)
    for action in actions:
        state, observation = engine.step(world, state, action)
        assert observation != engine.NOTHING_HAPPENS
    assert engine.goal_holds(world, state)
    assert engine.plan(world, max_length=length - 1) is None


@pytest.mark.parametrize("text, reason", [
    ("no json here", "no JSON object"),
    ('{"goal": {"type": ', "malformed JSON"),
    (_world(receptacles=["countertop 1", "countertop 1", "fridge 1", "microwave 1"]), "duplicate receptacle"),
    ('{"goal": {"type": "pick_and_place_simple", "object": "apple", "receptacle": "shelf"}, "receptacles": '
     '["shelf 1", "desk 1"], "objects": {"apple 1": "desk 1", "apple 1": "shelf 1"}}', "duplicate name"),
    (_world(objects={"apple 1": "fridge 9"}), "not a receptacle of this world"),
    (_world(objects={"dragon 1": "fridge 1", "apple 1": "fridge 1"}), "unknown type 'dragon'"),
    (_world(receptacles=["countertop 1", "fridge 1", "microwave 1", "cabinet one"]), "is not '<type> <number>'"),
    (_world(closed=["countertop 1"]), "cannot be closed"),
    (_world(closed=["fridge 2"]), "closed names 'fridge 2', which is not a receptacle of this world"),
    (_world(receptacles=["countertop 1", "fridge 1", "cabinet 1"], objects={"apple 1": "fridge 1"}),
     "needs a microwave"),
    (_world(goal={"type": "pick_two_obj_and_place", "object": "apple", "receptacle": "countertop"}),
     "the goal needs 2"),
    (_world(goal={"type": "pick_heat_then_place_in_recep", "object": "apple", "receptacle": "bed"}),
     "not a receptacle type of this world"),
    (_world(goal={"type": "fly", "object": "apple", "receptacle": "countertop"}), "goal.type"),
    (_world(weather="sunny"), "unknown key 'weather'"),
    (_world(states={"apple 1": ["hot", "cool"]}), "both hot and cool"),
    (_world(objects={"apple 1": "countertop 1"}, states={"apple 1": ["hot"]}), "goal already holds"),
    (_world(receptacles=[f"cabinet {k}" for k in range(1, 18)]), "more than 16 receptacles"),
    # a list or an object where the goal names a type raised TypeError (unhashable; issue 58's stronger check)
    (_world(goal={"type": "pick_heat_then_place_in_recep", "object": [1, 2], "receptacle": "countertop"}),
     "goal.object must be a string, got list"),
    (_world(goal={"type": {}, "object": "apple", "receptacle": "countertop"}), "goal.type must be a string, got dict"),
])
def test_bad_worlds_are_rejected_with_reasons(domain, text, reason):
    result = domain.parse_and_validate(text)
    assert isinstance(result, Invalid) and reason in result.reason, result


def test_a_good_world_is_grounded_with_plan_and_level(domain):
    task = domain.parse_and_validate("Sure! " + _world() + " hope that helps")
    assert not isinstance(task, Invalid)
    assert task.meta["plan_length"] == 7 and task.level == level_of(7) == 4
    assert task.answer.split("\n") == [  # the expert inspects receptacles in the listed order until it can plan
        "go to cabinet 1", "open cabinet 1", "go to countertop 1", "go to fridge 1", "open fridge 1",
        "take apple 1 from fridge 1", "go to microwave 1", "heat apple 1 with microwave 1", "go to countertop 1",
        "move apple 1 to countertop 1"]
    assert task.meta["expert_length"] == 10
    assert json.loads(task.text)["goal"]["type"] == "pick_heat_then_place_in_recep"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_parsing_never_raises(text):
    result = make_domain("household").parse_and_validate(text)
    assert isinstance(result, Invalid) or result.meta["plan_length"] >= 1


@settings(max_examples=60, deadline=None)
@given(st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=12),
                    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children,
                                                                                        max_size=4), max_leaves=12))
def test_any_json_is_grounded_or_rejected(data):
    result = make_domain("household").parse_and_validate(json.dumps({"goal": data, "receptacles": data,
                                                                     "objects": data}))
    assert isinstance(result, Invalid)


def test_task_sets_are_fixed_cover_all_levels_and_seeds_avoid_heldout(domain):
    heldout = domain.heldout_tasks(3)
    assert [t.text for t in heldout] == [t.text for t in domain.heldout_tasks(3)]
    assert sorted({t.level for t in heldout}) == [1, 2, 3, 4, 5, 6]
    assert all(t.meta["expert_length"] == len(t.answer.split("\n")) >= t.meta["plan_length"] for t in heldout)
    for task in heldout:  # the expert's trajectory reaches the goal (within the default 30 steps)
        assert make_domain("household").score(task, task.answer) == 1.0
    seeds = domain.seed_tasks(np.random.default_rng(0), 40)
    assert {t.level for t in seeds} <= {1, 2, 3} and len({t.text for t in seeds}) == 40
    dev = domain.dev_tasks(3)
    assert not {t.text for t in dev} & {t.text for t in heldout}
    corpus = domain.simulator_corpus(np.random.default_rng(1), 30)
    assert len({t.level for _, _, t in corpus}) >= 4  # the simulator's world knowledge spans the levels
    for _, _, task in corpus:  # every corpus world is what the simulator should learn to write: valid
        assert domain.parse_and_validate(task.text).text == task.text


def test_episodes_terminate_on_the_goal_and_truncate_at_the_step_limit(domain):
    task = domain.parse_and_validate(_world())
    state, observation = domain.reset(task)
    assert observation == task.prompt
    for k, action in enumerate(task.answer.split("\n")):
        result = domain.step(state, f"> {action}\nextra text ignored")
        state = result.state
        assert result.terminated == (k == 9) and not result.truncated
    assert result.reward == 1.0
    state, _ = domain.reset(task)
    for k in range(12):
        result = domain.step(state, "fly to the moon")  # max_steps=12 in this module's domain
        state = result.state
        assert result.observation == "Nothing happens." and result.reward == 0.0 and not result.terminated
    assert result.truncated
    assert domain.score(task, task.answer) == 1.0 and domain.score(task, "look") == 0.0


class ExpertPolicy:
    """Answers each expert step from its prompt (the number of '> ' turns in it picks the plan's action);
    counts tokens as characters."""

    def __init__(self, domain, tasks):
        self.tasks = tasks
        self.prompts = []

    def encode_prompts(self, prompts):
        return [[ord(c) for c in p] for p in prompts]

    def generate(self, prompts, n=1, **kwargs):
        self.prompts.extend(prompts)
        out = []
        for prompt in prompts:
            task = next(t for t in self.tasks if prompt.startswith(t.prompt))
            plan = task.answer.split("\n")
            out.append([Generation([1], [2], plan[prompt.count("\n> ") - 1], [-0.1], True)])
        return out


class PlanPlayer(ExpertPolicy):
    """Plays one task's plan, one action per generate call (every episode in the batch is at the same turn)."""

    def generate(self, prompts, n=1, **kwargs):
        self.prompts.extend(prompts)
        action = self.tasks[0].answer.split("\n")[len(self.prompts) // len(prompts) - 1]
        return [[Generation([1], [2], action, [-0.1], True)] for _ in prompts]


def test_multi_turn_rollout_plays_worlds_and_trims_history_to_the_budget(domain):
    tasks = [domain.parse_and_validate(_world())]
    policy = PlanPlayer(domain, tasks)
    groups = rollout(domain, policy, tasks, group_size=2, max_new_tokens=8, max_context_tokens=400)
    for episode in groups[0]:
        assert episode.terminated and episode.reward == 1.0 and len(episode.turns) == 10
    assert all(len(p) <= 400 for p in policy.prompts) and max(len(p) for p in policy.prompts) > 300
    assert all(p.startswith(tasks[0].prompt) for p in policy.prompts)  # the task is never trimmed away
    long_history = [(tasks[0].prompt, "look")] + [("You arrive at fridge 1. The fridge 1 is closed.", "look")] * 30
    context, ids = fit_history(domain, policy, long_history, "Nothing happens.", budget=500)
    assert len(ids) <= 500 and context.startswith(tasks[0].prompt) and context.endswith("Nothing happens.\n> ")
    assert context.count("> look") == (500 - len(tasks[0].prompt) - 19) // 57  # as many turns as fit


def test_single_step_protocol_scores_each_expert_step(domain):
    tasks = domain.heldout_tasks(1)
    verdicts = single_step_accuracy(domain, ExpertPolicy(domain, tasks), tasks, max_new_tokens=8)
    assert [len(v) for v in verdicts] == [t.meta["expert_length"] for t in tasks]
    assert all(all(v) for v in verdicts)

    class Looker(ExpertPolicy):
        def generate(self, prompts, n=1, **kwargs):
            return [[Generation([1], [2], "look", [-0.1], True)] for _ in prompts]
    assert not any(any(v) for v in single_step_accuracy(domain, Looker(domain, tasks), tasks))
    assert domain.action_matches(">  Go to  fridge 1\nmore", "go to fridge 1")


def test_every_word_of_the_domain_is_one_tiny_token(domain):
    """The tiny tokenizer's word list covers every word the domain writes (texts after every admissible action of
    the expert's states, look/inventory/examine/a nonsense action, world JSON, the simulator prompt), so a name
    the agent copies is a few tokens; a word added to the texts later fails here."""
    import re

    from genenv.domains.household.domain import TINY_WORDS
    from genenv.models.tiny import build_tiny_tokenizer
    texts = []
    tasks = domain.heldout_tasks(2)
    assert {t.meta["type"] for t in tasks} == set(engine.TASK_TYPES)
    for task in tasks:
        world = engine.parse_world(task.text)
        texts += [task.text, task.prompt, domain.simulator_prompt(task, {"success_rate": 0.5}),
                  domain.simulator_prompt(task, {})]
        state = engine.initial_state(world)
        for action in task.answer.split("\n"):
            for other in engine.admissible(world, state) + ["look", "inventory"]:
                texts += [other, engine.step(world, state, other)[1]]
            texts.append(engine.step(world, state, "jump")[1])
            state = engine.step(world, state, action)[0]
    words = {w for text in texts for w in re.findall(r"[A-Za-z0-9_]+", text)}
    assert words <= set(TINY_WORDS), sorted(words - set(TINY_WORDS))
    tokenizer = build_tiny_tokenizer(domain.alphabet, domain.tiny_words)
    ids = tokenizer(tasks[0].prompt).input_ids
    assert len(ids) < len(tasks[0].prompt) / 3
    assert tokenizer.decode(ids, skip_special_tokens=True) == tasks[0].prompt


@pytest.mark.slow
def test_household_smoke_run_with_tiny_models(tmp_path):
    from genenv.coevolve import run
    from genenv.config import load_config
    from genenv.io import read_jsonl
    out = run(load_config("household-smoke", ["threads=1"]), run_dir=tmp_path / "hh", log=lambda m: None)
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["generated"] for r in rows] == [4, 4]
    assert all(0.0 <= r["heldout_step_accuracy"] <= 1.0 for r in rows)
    assert set(rows[-1]["heldout_step_accuracy_by_level"]) == {"1", "2", "3", "4", "5", "6"}
    assert all(r["rollouts_this_epoch"] == (4 + 2) * 2 for r in rows)
    samples = read_jsonl(out / "samples" / "epoch_0.jsonl")
    assert all(s["valid"] or s["reason"] for s in samples)


def test_bad_household_options_are_one_clear_error():
    from genenv.config import ConfigError
    with pytest.raises(ConfigError, match="domain.options: max_steps must be an integer in \\[10, 200\\]"):
        make_domain("household", max_steps=5)
    with pytest.raises(ConfigError, match="seed_levels"):
        make_domain("household", seed_levels=[9])

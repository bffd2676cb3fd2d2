"""Household worlds exported to ALFWorld's game format and played in ALFWorld's own engine (optional extra)."""

import importlib.util
import json

import pytest

from genenv.domains.household import HouseholdDomain, engine

if importlib.util.find_spec("alfworld") is None or importlib.util.find_spec("textworld") is None:
    pytest.skip("ALFWorld is not installed (pip install 'genenv-coevolve[alfworld]'; `make install` does this)",
                allow_module_level=True)

from genenv.domains.household import alfworld  # noqa: E402
from genenv.models.policy import Generation  # noqa: E402


def _one_world_per_task_type():
    seen = {}
    for task in HouseholdDomain().heldout_tasks(6):
        seen.setdefault(task.meta["type"], task)
    assert len(seen) == 6
    return list(seen.values())


@pytest.mark.parametrize("task", _one_world_per_task_type(), ids=lambda t: t.meta["type"])
def test_exported_world_plays_to_a_win_in_alfworlds_engine_with_the_same_texts(task, tmp_path):
    world = engine.parse_world(task.text)
    plan = task.answer.split("\n")
    detours = ["look", "inventory", f"examine {world.receptacles[0]}", "fly to the moon"]
    commands = plan[:2] + detours + plan[2:]
    game = alfworld.export_game(world, tmp_path)
    data = json.loads(game.read_text())
    assert data["solvable"] and data["walkthrough"] == plan and "UNKNOWN GOAL" not in data["grammar"]
    observations, won = alfworld.play(game, commands)
    assert won
    state, ours = engine.initial_state(world), [engine.intro(world)]
    for command in commands:
        state, observation = engine.step(world, state, command)
        ours.append(observation)
    assert [o.strip() for o in observations] == ours  # every text, including "Nothing happens."


def test_an_unfinished_plan_does_not_win(tmp_path):
    task = _one_world_per_task_type()[0]
    game = alfworld.export_game(engine.parse_world(task.text), tmp_path)
    assert not alfworld.play(game, task.answer.split("\n")[:-1])[1]


class PlanPolicy:
    """Plays the plan of whichever exported world its prompt shows (a char-level token count)."""

    def __init__(self, tasks):
        self.plans = {t.prompt: t.answer.split("\n") for t in tasks}

    def encode_prompts(self, prompts):
        return [[ord(c) for c in p] for p in prompts]

    def generate(self, prompts, **kwargs):
        out = []
        for prompt in prompts:
            intro = next(p for p in self.plans if prompt.startswith(p))
            turn = prompt.count("\n> ") - 1
            out.append([Generation([1], [2], self.plans[intro][turn], [-0.1], True)])
        return out


@pytest.mark.slow
def test_eval_games_scores_full_episodes_and_single_steps(tmp_path):
    from genenv.domains.household.benchmark_eval import eval_alfworld
    tasks = _one_world_per_task_type()[:3]
    for k, task in enumerate(tasks):
        alfworld.export_game(engine.parse_world(task.text), tmp_path / "games" / f"{task.meta['type']}-{k}")
    scores = eval_alfworld("plan", tmp_path / "games", tmp_path / "out", policy=PlanPolicy(tasks),
                           log=lambda m: None)
    assert scores["games"] == 3 and scores["success"] == 1.0 and scores["step_accuracy"] == 1.0
    assert set(scores["by_task_type"]) == {t.meta["type"] for t in tasks}
    assert json.loads((tmp_path / "out" / "scores.json").read_text())["success"] == 1.0


def test_no_games_is_one_clear_error(tmp_path, capsys):
    from genenv.cli import main
    assert main(["eval", "--benchmark", "alfworld", "--model", "smollm2", "--games", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no game.tw-pddl" in err[0]

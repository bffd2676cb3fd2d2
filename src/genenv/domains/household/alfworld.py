"""ALFWorld compatibility: a household world as an ALFWorld game, played in ALFWorld's own engine.

``export_game(world, folder)`` writes ``game.tw-pddl`` in ALFWorld's game format: ALFWorld's PDDL domain
(``alfworld/data/alfred.pddl``), its TextWorld grammar (``alfred.twl2``) with the task sentence filled in
as ALFWorld fills it, and a PDDL problem built from the world: one location per receptacle plus the middle
of the room, ALFRED-style ids that ALFWorld's demangler turns back into our names (``fridge 1``), the
object/receptacle facts its actions test (pickupable, heatable, openable, ...) and the goal as ALFWorld's
goal library states it. ``play`` runs commands in TextWorld's PDDL engine with ALFWorld's wrappers, so what
the simulator writes runs in the benchmark's own engine. ``eval_games`` plays an agent policy on a folder of
official ALFWorld games (``valid_unseen``), full episodes, success per task type.

Optional: ``pip install 'genenv-coevolve[alfworld]'`` (``alfworld==0.4.2``, which brings TextWorld and Fast Downward).
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

from genenv.domains.household import engine
from genenv.domains.household.domain import first_action
from genenv.io import atomic_write_json
from genenv.prompts import context_budget, fit_history

ALFRED_NAMES = {"alarmclock": "AlarmClock", "armchair": "ArmChair", "bathtubbasin": "BathtubBasin",
                "butterknife": "ButterKnife", "cd": "CD", "cellphone": "CellPhone", "coffeemachine": "CoffeeMachine",
                "coffeetable": "CoffeeTable", "countertop": "CounterTop", "creditcard": "CreditCard",
                "desklamp": "DeskLamp", "diningtable": "DiningTable", "floorlamp": "FloorLamp",
                "garbagecan": "GarbageCan", "keychain": "KeyChain", "remotecontrol": "RemoteControl",
                "sidetable": "SideTable", "sinkbasin": "SinkBasin", "soapbar": "SoapBar",
                "stoveburner": "StoveBurner", "tissuebox": "TissueBox", "winebottle": "WineBottle"}
PREDICATE_OF_STATE = {"clean": "isClean", "hot": "isHot", "cool": "isCool"}
TASK_TYPE_FROM_FOLDER = re.compile(r"(pick_and_place_simple|look_at_obj_in_light|pick_clean_then_place_in_recep|"
                                   r"pick_heat_then_place_in_recep|pick_cool_then_place_in_recep|"
                                   r"pick_two_obj_and_place)")


class ALFWorldNotInstalled(RuntimeError):
    pass


def available() -> bool:
    return all(importlib.util.find_spec(m) is not None for m in ("alfworld", "textworld"))


def _require():
    if not available():
        raise ALFWorldNotInstalled("ALFWorld is not installed: `pip install 'genenv-coevolve[alfworld]'` "
                                   "(alfworld==0.4.2, with TextWorld and Fast Downward)")


def alfred_type(kind: str) -> str:
    return ALFRED_NAMES.get(kind, kind.capitalize()) + "Type"


def entity_id(name: str) -> str:
    """An ALFRED-style id whose demangled name is ``name``.

    ALFWorld's demangler names an entity by the part of its id before ``_bar_`` (plus ``basin`` for basins)
    and numbers the instances of a name in sorted-id order from the highest number down, so instance k of
    a kind gets a coordinate that sorts before instance k - 1.
    """
    kind, number = name.rsplit(" ", 1)
    prefix = {"sinkbasin": "sink", "bathtubbasin": "bathtub"}.get(kind, kind)
    suffix = {"sinkbasin": "_bar_sinkbasin", "bathtubbasin": "_bar_bathtubbasin"}.get(kind, "")
    return f"{prefix}_bar__plus_00_dot_{99 - int(number):02d}_bar__plus_00_dot_00_bar__plus_00_dot_00{suffix}"


def _location(index: int) -> str:
    return f"loc_bar_{index}_bar_0_bar_0_bar_0"


def pddl_problem(world: engine.World) -> str:
    """The world as a PDDL problem for ALFWorld's ``alfred`` domain."""
    rid = {r: entity_id(r) for r in world.receptacles}
    oid = {o: entity_id(o) for o in world.objects}
    loc = {r: _location(i + 1) for i, r in enumerate(world.receptacles)}
    otypes = sorted({alfred_type(engine.kind(o)) for o in world.objects} | {alfred_type(world.goal.object)})
    rtypes = sorted({alfred_type(engine.kind(r)) for r in world.receptacles})
    objects = (["agent1 - agent"] + [f"{t} - otype" for t in otypes] + [f"{t} - rtype" for t in rtypes]
               + [f"{oid[o]} - object" for o in world.objects] + [f"{rid[r]} - receptacle" for r in world.receptacles]
               + [f"{_location(i)} - location" for i in range(len(world.receptacles) + 1)])
    init = [f"(atLocation agent1 {_location(0)})"]
    for r in world.receptacles:
        init += [f"(receptacleType {rid[r]} {alfred_type(engine.kind(r))})",
                 f"(receptacleAtLocation {rid[r]} {loc[r]})"]
        if engine.kind(r) in engine.OPENABLE:
            init.append(f"(openable {rid[r]})")
            if r not in world.closed:
                init.append(f"(opened {rid[r]})")
    for o, place, states in zip(world.objects, world.start, world.states):
        kind = engine.kind(o)
        init += [f"(objectType {oid[o]} {alfred_type(kind)})", f"(inReceptacle {oid[o]} {rid[place]})",
                 f"(objectAtLocation {oid[o]} {loc[place]})"]
        if kind in engine.LAMP_TYPES:
            init.append(f"(toggleable {oid[o]})")
        else:
            init.append(f"(pickupable {oid[o]})")
        for able, predicate in ((engine.HEATABLE, "heatable"), (engine.COOLABLE, "coolable"),
                                (engine.CLEANABLE, "cleanable")):
            if kind in able:
                init.append(f"({predicate} {oid[o]})")
        init += [f"({PREDICATE_OF_STATE[word]} {oid[o]})" for word in sorted(states)]
    init += [f"(canContain {rt} {ot})" for rt in rtypes for ot in otypes]
    return ("(define (problem genenv_world)\n(:domain alfred)\n(:objects\n    " + "\n    ".join(objects)
            + "\n)\n(:init\n    " + "\n    ".join(init) + "\n)\n(:goal " + _goal(world.goal) + ")\n)\n")


def _goal(goal: engine.Goal) -> str:
    otype = alfred_type(goal.object)
    if goal.type == "look_at_obj_in_light":
        return (f"(and (exists (?ot - object ?a - agent ?l - location) (and (objectType ?ot {alfred_type(goal.lamp)}) "
                "(toggleable ?ot) (isToggled ?ot) (objectAtLocation ?ot ?l) (atLocation ?a ?l))) "
                f"(exists (?o - object ?a - agent) (and (objectType ?o {otype}) (holds ?a ?o))))")
    rtype = alfred_type(goal.receptacle)
    if goal.type == "pick_two_obj_and_place":
        return (f"(exists (?r - receptacle ?o1 - object ?o2 - object) (and (not (= ?o1 ?o2)) "
                f"(receptacleType ?r {rtype}) (objectType ?o1 {otype}) (objectType ?o2 {otype}) "
                "(inReceptacle ?o1 ?r) (inReceptacle ?o2 ?r)))")
    state = {"pick_clean_then_place_in_recep": " (isClean ?o)", "pick_heat_then_place_in_recep": " (isHot ?o)",
             "pick_cool_then_place_in_recep": " (isCool ?o)"}.get(goal.type, "")
    return (f"(exists (?r - receptacle ?o - object) (and (receptacleType ?r {rtype}) (objectType ?o {otype})"
            f"{state} (inReceptacle ?o ?r)))")


def _package_file(name: str) -> str:
    _require()
    spec = importlib.util.find_spec("alfworld")
    return (Path(list(spec.submodule_search_locations)[0]) / "data" / name).read_text()


def game_data(world: engine.World, walkthrough: list[str] | None = None) -> dict:
    """ALFWorld's game-file contents for a world (domain, grammar with the task sentence, problem)."""
    grammar = _package_file("alfred.twl2").replace("UNKNOWN GOAL", world.goal.text().rstrip("."))
    return {"pddl_domain": _package_file("alfred.pddl"), "grammar": grammar, "pddl_problem": pddl_problem(world),
            "solvable": walkthrough is not None, "walkthrough": walkthrough}


def export_game(world: engine.World, folder: str | Path, walkthrough: list[str] | None = None) -> Path:
    """Write ``folder/game.tw-pddl`` (and a minimal ``traj_data.json`` naming the task type, which ALFWorld's
    loaders read). Returns the game file's path."""
    folder = Path(folder)
    if walkthrough is None:
        walkthrough = engine.search_expert(world) or engine.plan(world)
    path = folder / "game.tw-pddl"
    atomic_write_json(path, game_data(world, walkthrough))
    atomic_write_json(folder / "traj_data.json", {"task_type": world.goal.type, "genenv_world": world.to_json()})
    return path


def make_env(game_file: str | Path, max_steps: int = 50):
    """ALFWorld's text engine on one game file (TextWorld's PDDL env with ALFWorld's demangler)."""
    _require()
    import textworld  # noqa: PLC0415 (optional dependency, imported when used)
    import textworld.gym  # noqa: PLC0415 (optional dependency, imported when used)
    from alfworld.agents.environment.alfred_tw_env import AlfredDemangler, AlfredInfos  # noqa: PLC0415 (optional dependency, imported when used)
    infos = textworld.EnvInfos(won=True, admissible_commands=True, extras=["gamefile"])
    env_id = textworld.gym.register_game(str(game_file), infos, max_episode_steps=max_steps,
                                         wrappers=[AlfredDemangler(), AlfredInfos])
    return textworld.gym.make(env_id)


def play(game_file: str | Path, commands: list[str], max_steps: int = 50) -> tuple[list[str], bool]:
    """Run ``commands`` in ALFWorld's engine: the observations (intro first) and whether the game was won."""
    env = make_env(game_file, max_steps)
    try:
        observation, infos = env.reset()
        observations, won = [observation], bool(infos.get("won"))
        for command in commands:
            if won:
                break
            observation, _, done, infos = env.step(command)
            observations.append(observation)
            won = bool(infos.get("won"))
            if done:
                break
        return observations, won
    finally:
        env.close()


def find_games(folder: str | Path) -> list[Path]:
    games = sorted(Path(folder).rglob("game.tw-pddl"))
    if not games:
        raise ValueError(f"--games: no game.tw-pddl under {folder}")
    return games


def _task_type(game: Path) -> str:
    traj = game.parent / "traj_data.json"
    if traj.exists():
        try:
            return str(json.loads(traj.read_text()).get("task_type", "unknown"))
        except (OSError, ValueError):
            pass
    match = TASK_TYPE_FROM_FOLDER.search(str(game))
    return match.group(1) if match else "unknown"


def _act(policy, domain, history, observation, budget, max_new_tokens) -> str:
    context, ids = fit_history(domain, policy, history, observation, budget)
    return first_action(policy.generate([context], greedy=True, max_new_tokens=max_new_tokens,
                                        prompt_ids=[ids])[0][0].text)


def eval_games(policy, domain, games: list[Path], max_steps: int = 50, max_new_tokens: int = 48,
               max_context_tokens: int = 0, progress=None) -> dict:
    """``policy`` (greedy) on ALFWorld games in ALFWorld's engine, prompted as the household domain prompts.

    Two protocols: full episodes (``success``: the game is won within ``max_steps`` actions) and, for games
    whose file holds a ``walkthrough``, the paper's single-step one (``step_accuracy``: the walkthrough's
    states, each answered with the next action and scored by exact match). Both overall and per task type
    (from the game's ``traj_data.json`` or its folder name, as ALFWorld names them).
    """
    budget = context_budget(policy, max_new_tokens, max_context_tokens)
    results = []
    for game in games:
        env = make_env(game, max_steps)
        try:
            observation, infos = env.reset()
            history, won = [], False
            for _ in range(max_steps):
                action = _act(policy, domain, history, observation, budget, max_new_tokens)
                history.append((observation, action))
                observation, _, done, infos = env.step(action)
                won = bool(infos.get("won"))
                if won or done:
                    break
            episode_steps = len(history)
            walkthrough = load_json(game).get("walkthrough") or []
            steps = []
            if walkthrough:
                observation, _ = env.reset()
                history = []
                for expert in walkthrough:
                    action = _act(policy, domain, history, observation, budget, max_new_tokens)
                    steps.append(action == " ".join(expert.lower().split()))
                    history.append((observation, expert))
                    observation, _, done, _ = env.step(expert)
        finally:
            env.close()
        results.append({"game": str(game), "task_type": _task_type(game), "won": won, "steps": episode_steps,
                        "step_matches": steps})
        if progress:
            progress(1)
    by_type: dict[str, list[dict]] = {}
    for r in results:
        by_type.setdefault(r["task_type"], []).append(r)

    def summary(rows):
        matches = [m for r in rows for m in r["step_matches"]]
        return {"success": sum(r["won"] for r in rows) / len(rows),
                "step_accuracy": sum(matches) / len(matches) if matches else None, "games": len(rows)}
    return {**(summary(results) if results else {"success": None, "step_accuracy": None, "games": 0}),
            "by_task_type": {k: summary(v) for k, v in sorted(by_type.items())}, "per_game": results}


def load_json(path: str | Path) -> dict:
    return json.loads(Path(path).read_text())

"""A pure-Python text household in ALFWorld's vocabulary: worlds, actions, observations, goals, a planner.

A world is what the simulator writes (JSON): receptacles (``"fridge 1"``), objects and where they are, which
openable receptacles start closed, optional object states (clean, hot, cool) and a goal of one of ALFWorld's
six task types. The rules follow ALFWorld's PDDL domain (``alfworld/data/alfred.pddl``): the agent is at one
receptacle or in the middle of the room, holds at most one object, takes from and moves to open receptacles,
heats with a microwave, cools with a fridge, cleans with a sink or bathtub basin (heating clears cool and
cooling clears hot) and toggles a lamp sitting on the receptacle it is at; "look at X under the lamp" holds
while it carries an X at a lamp it has toggled (ALFWorld's goal uses ``isToggled``). Observation texts are those of
ALFWorld's TextWorld grammar (``alfred.twl2``); an action the rules do not admit gets "Nothing happens.".

``plan(world)`` is a breadth-first search over the states that matter for the goal (the objects of the goal's
type and the lamps; other objects can never block or help): it returns a shortest action sequence or None.
Closing is never part of a shortest plan, and look/examine/inventory change nothing, so the search skips them.
"""

from __future__ import annotations

import json
import re
from collections import Counter, deque
from dataclasses import dataclass, field, replace

from genenv.domains.base import Invalid
from genenv.domains.jsontask import loads_untrusted

RECEPTACLE_TYPES = ("armchair", "bathtubbasin", "bed", "cabinet", "coffeemachine", "coffeetable", "countertop",
                    "desk", "diningtable", "drawer", "dresser", "fridge", "garbagecan", "microwave", "safe",
                    "shelf", "sidetable", "sinkbasin", "sofa", "stoveburner", "toilet")
OPENABLE = frozenset({"cabinet", "drawer", "fridge", "microwave", "safe"})
LAMP_TYPES = frozenset({"desklamp", "floorlamp"})
HEATABLE = frozenset({"apple", "bread", "cup", "egg", "lettuce", "mug", "plate", "potato", "tomato"})
COOLABLE = HEATABLE | frozenset({"bowl", "pan", "pot", "winebottle"})
CLEANABLE = frozenset({"apple", "bowl", "butterknife", "cloth", "cup", "egg", "fork", "knife", "ladle", "lettuce",
                       "mug", "pan", "plate", "pot", "potato", "soapbar", "spatula", "spoon", "tomato"})
PORTABLE = (HEATABLE | COOLABLE | CLEANABLE | frozenset(
    {"alarmclock", "book", "candle", "cd", "cellphone", "creditcard", "keychain", "laptop", "newspaper", "pen",
     "pencil", "pillow", "remotecontrol", "statue", "tissuebox", "towel", "vase", "watch"}))
OBJECT_TYPES = tuple(sorted(PORTABLE | LAMP_TYPES))
STATE_WORDS = ("clean", "hot", "cool")
APPLIANCE = {"pick_clean_then_place_in_recep": ("clean", frozenset({"sinkbasin", "bathtubbasin"}), CLEANABLE),
             "pick_heat_then_place_in_recep": ("hot", frozenset({"microwave"}), HEATABLE),
             "pick_cool_then_place_in_recep": ("cool", frozenset({"fridge"}), COOLABLE)}
TASK_TYPES = ("pick_and_place_simple", "look_at_obj_in_light", "pick_clean_then_place_in_recep",
              "pick_heat_then_place_in_recep", "pick_cool_then_place_in_recep", "pick_two_obj_and_place")
GOAL_TEXT = {"pick_and_place_simple": "put a {object} in {receptacle}.",
             "look_at_obj_in_light": "look at {object} under the {lamp}.",
             "pick_clean_then_place_in_recep": "put a clean {object} in {receptacle}.",
             "pick_heat_then_place_in_recep": "put a hot {object} in {receptacle}.",
             "pick_cool_then_place_in_recep": "put a cool {object} in {receptacle}.",
             "pick_two_obj_and_place": "put two {object} in {receptacle}."}
MAX_RECEPTACLES = 16
MAX_OBJECTS = 24
NAME = re.compile(r"^([a-z]+) ([1-9][0-9]?)$")
NOTHING_HAPPENS = "Nothing happens."


class WorldError(ValueError):
    """A world spec that cannot be played, with the reason."""


def kind(name: str) -> str:
    """The type of an instance name: ``"apple 1"`` -> ``"apple"``."""
    return name.rsplit(" ", 1)[0]


@dataclass(frozen=True)
class Goal:
    type: str
    object: str
    receptacle: str | None = None   # a receptacle type (any instance counts), None for look_at_obj_in_light
    lamp: str | None = None         # a lamp type for look_at_obj_in_light

    def text(self) -> str:
        return GOAL_TEXT[self.type].format(object=self.object, receptacle=self.receptacle, lamp=self.lamp)

    def to_json(self) -> dict:
        data = {"type": self.type, "object": self.object}
        data.update({"lamp": self.lamp} if self.type == "look_at_obj_in_light" else {"receptacle": self.receptacle})
        return data


@dataclass(frozen=True)
class World:
    receptacles: tuple[str, ...]
    objects: tuple[str, ...]
    start: tuple[str, ...]                      # where each object starts, aligned with ``objects``
    closed: frozenset[str]
    states: tuple[frozenset[str], ...]          # initial clean/hot/cool words, aligned with ``objects``
    goal: Goal

    def to_json(self) -> dict:
        data = {"receptacles": list(self.receptacles), "objects": dict(zip(self.objects, self.start)),
                "closed": [r for r in self.receptacles if r in self.closed]}
        states = {o: sorted(s) for o, s in zip(self.objects, self.states) if s}
        if states:
            data["states"] = states
        data["goal"] = self.goal.to_json()   # last: what it names is written before it (the simulator's schema)
        return data

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(", ", ": "))


@dataclass(frozen=True)
class State:
    """Everything an action can change. Hashable: the planner's search nodes."""
    location: str | None                        # a receptacle, or None in the middle of the room
    held: int | None                            # index into World.objects
    where: tuple[str | None, ...]               # each object's receptacle (None while held)
    opened: frozenset[str]
    states: tuple[frozenset[str], ...]
    lamps_on: frozenset[int] = field(default_factory=frozenset)
    toggled: frozenset[int] = field(default_factory=frozenset)  # lamps used at least once (ALFWorld's isToggled)


# ------------------------------------------------------------------ parsing and grounding
def _pairs_without_duplicates(pairs):
    counts = Counter(k for k, _ in pairs)   # (counted once: keys.count per key was quadratic in the object's size)
    duplicated = sorted(k for k, count in counts.items() if count > 1)
    if duplicated:
        raise WorldError(f"duplicate name {duplicated[0]!r}")
    return dict(pairs)


def _instance(name, types, what: str) -> str:
    if not isinstance(name, str):
        raise WorldError(f"{what} must be a string like 'fridge 1', got {json.dumps(name)[:40]}")
    match = NAME.match(name.strip())
    if not match:
        raise WorldError(f"{what} {name!r} is not '<type> <number>'")
    if match.group(1) not in types:
        raise WorldError(f"{what} {name!r}: unknown type {match.group(1)!r}")
    return name.strip()


def world_from_json(data) -> World:
    """Build a World from parsed JSON, raising WorldError naming what is wrong."""
    if not isinstance(data, dict):
        raise WorldError("the world is not a JSON object")
    for key in ("goal", "receptacles", "objects"):
        if key not in data:
            raise WorldError(f"missing key {key!r}")
    unknown = sorted(set(data) - {"goal", "receptacles", "objects", "closed", "states"})
    if unknown:
        raise WorldError(f"unknown key {unknown[0]!r}")
    receptacles = data["receptacles"]
    if not isinstance(receptacles, list) or not receptacles:
        raise WorldError("receptacles must be a non-empty list")
    if len(receptacles) > MAX_RECEPTACLES:
        raise WorldError(f"more than {MAX_RECEPTACLES} receptacles")
    receptacles = tuple(_instance(r, RECEPTACLE_TYPES, "receptacle") for r in receptacles)
    if len(set(receptacles)) != len(receptacles):
        raise WorldError(f"duplicate receptacle {next(r for r in receptacles if receptacles.count(r) > 1)!r}")
    objects = data["objects"]
    if not isinstance(objects, dict):
        raise WorldError("objects must map object names to receptacles")
    if len(objects) > MAX_OBJECTS:
        raise WorldError(f"more than {MAX_OBJECTS} objects")
    names, start = [], []
    for name, place in objects.items():
        names.append(_instance(name, OBJECT_TYPES, "object"))
        if place not in receptacles:
            raise WorldError(f"object {name!r} is in {place!r}, which is not a receptacle of this world")
        start.append(place)
    if len(set(names)) != len(names):
        raise WorldError("duplicate object name")
    closed = data.get("closed", [])
    if not isinstance(closed, list):
        raise WorldError("closed must be a list of receptacles")
    for r in closed:
        if r not in receptacles:
            raise WorldError(f"closed names {r!r}, which is not a receptacle of this world")
        if kind(r) not in OPENABLE:
            raise WorldError(f"{r!r} cannot be closed (openable: {', '.join(sorted(OPENABLE))})")
    states_in = data.get("states", {})
    if not isinstance(states_in, dict):
        raise WorldError("states must map object names to lists of clean/hot/cool")
    states = {}
    for name, words in states_in.items():
        if name not in names:
            raise WorldError(f"states names {name!r}, which is not an object of this world")
        if not isinstance(words, list) or any(w not in STATE_WORDS for w in words):
            raise WorldError(f"states of {name!r} must be a list drawn from clean, hot, cool")
        if "hot" in words and "cool" in words:
            raise WorldError(f"{name!r} cannot be both hot and cool")
        states[name] = frozenset(words)
    goal = _goal_from_json(data["goal"], receptacles, names)
    return World(receptacles, tuple(names), tuple(start), frozenset(closed),
                 tuple(states.get(n, frozenset()) for n in names), goal)


def _goal_from_json(goal, receptacles, objects) -> Goal:
    if not isinstance(goal, dict):
        raise WorldError("goal must be an object with type, object and receptacle (or lamp)")
    wrong = [key for key in ("type", "object", "receptacle", "lamp") if key in goal and not isinstance(goal[key], str)]
    if wrong:   # (a list or an object there is unhashable: the set lookups below raised TypeError)
        raise WorldError(f"goal.{wrong[0]} must be a string, got {type(goal[wrong[0]]).__name__}")
    task_type = goal.get("type")
    if task_type not in TASK_TYPES:
        raise WorldError(f"goal.type {task_type!r} is not one of {', '.join(TASK_TYPES)}")
    expected = {"type", "object", "lamp" if task_type == "look_at_obj_in_light" else "receptacle"}
    if set(goal) != expected:
        raise WorldError(f"goal of {task_type} needs exactly the keys {', '.join(sorted(expected))}")
    obj = goal["object"]
    if obj not in PORTABLE:
        raise WorldError(f"goal.object {obj!r} is not a portable object type")
    present = [kind(o) for o in objects]
    needed = 2 if task_type == "pick_two_obj_and_place" else 1
    if present.count(obj) < needed:
        raise WorldError(f"goal.object: the world has {present.count(obj)} {obj}, the goal needs {needed}")
    if task_type == "look_at_obj_in_light":
        if goal["lamp"] not in LAMP_TYPES or goal["lamp"] not in present:
            raise WorldError(f"goal.lamp {goal['lamp']!r} is not a lamp of this world")
        return Goal(task_type, obj, lamp=goal["lamp"])
    target = goal["receptacle"]
    if target not in [kind(r) for r in receptacles]:
        raise WorldError(f"goal.receptacle {target!r} is not a receptacle type of this world")
    if task_type in APPLIANCE:
        word, appliances, able = APPLIANCE[task_type]
        if obj not in able:
            raise WorldError(f"goal.object {obj!r} cannot be made {word}")
        if not any(kind(r) in appliances for r in receptacles):
            raise WorldError(f"goal needs a {' or '.join(sorted(appliances))} to make the {obj} {word}")
    return Goal(task_type, obj, receptacle=target)


def parse_world(text: str) -> World:
    """The first JSON object in ``text`` as a World (raises WorldError with the reason)."""
    if not isinstance(text, str):
        raise WorldError("not text")
    start, end = text.find("{"), text.rfind("}")
    if start < 0:
        raise WorldError("no JSON object")
    if end <= start:
        raise WorldError("malformed JSON: cut off before its closing brace")
    data = loads_untrusted(text[start:end + 1], object_pairs_hook=_pairs_without_duplicates)
    if isinstance(data, Invalid):
        raise WorldError(data.reason)
    return world_from_json(data)


# ------------------------------------------------------------------ rules
def initial_state(world: World) -> State:
    return State(None, None, world.start, frozenset(r for r in world.receptacles if r not in world.closed),
                 world.states)


def _is_open(state: State, receptacle: str) -> bool:
    return kind(receptacle) not in OPENABLE or receptacle in state.opened


def _visible(world: World, state: State, receptacle: str) -> list[int]:
    return [i for i, place in enumerate(state.where) if place == receptacle]


def _listing(names: list[str]) -> str:
    """TextWorld's list: 'a apple 1, a mug 1, and a fork 1' ('a' always, as ALFWorld writes it)."""
    items = [f"a {n}" for n in names]
    if not items:
        return "nothing"
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + ", and " + items[-1]


def _receptacle_view(world: World, state: State, receptacle: str) -> str:
    contents = _listing(alfworld_order([world.objects[i] for i in _visible(world, state, receptacle)]))
    if kind(receptacle) in OPENABLE:
        if receptacle in state.opened:
            return f"The {receptacle} is open. In it, you see {contents}."
        return f"The {receptacle} is closed."
    return f"On the {receptacle}, you see {contents}."


def alfworld_order(names) -> list[str]:
    """Names in the order ALFWorld lists them (its entity-id order): by type, then from the highest number down."""
    return sorted(names, key=lambda n: (kind(n), -int(n.rsplit(" ", 1)[1])))


def _room_view(world: World) -> str:
    return ("You are in the middle of a room. Looking quickly around you, you see "
            f"{_listing(alfworld_order(world.receptacles))}.")


def intro(world: World) -> str:
    return f"-= Welcome to TextWorld, ALFRED! =-\n\n{_room_view(world)}\n\nYour task is to: {world.goal.text()}"


def admissible(world: World, state: State, *, planning: bool = False) -> list[str]:
    """The actions the rules admit in ``state`` (ALFWorld's templates). ``planning`` drops those that can
    never shorten a plan (close, look, examine, inventory, and turning a lamp off)."""
    actions = [f"go to {r}" for r in world.receptacles if r != state.location]
    here = state.location
    if here is not None:
        if kind(here) in OPENABLE:
            if here not in state.opened:
                actions.append(f"open {here}")
            elif not planning:
                actions.append(f"close {here}")
        if _is_open(state, here):
            if state.held is None:
                actions += [f"take {world.objects[i]} from {here}" for i in _visible(world, state, here)
                            if kind(world.objects[i]) in PORTABLE]
            else:
                actions.append(f"move {world.objects[state.held]} to {here}")
        if state.held is not None:
            held, held_type = world.objects[state.held], kind(world.objects[state.held])
            for word, appliances, able in APPLIANCE.values():
                if kind(here) in appliances and held_type in able:
                    verb = {"clean": "clean", "hot": "heat", "cool": "cool"}[word]
                    actions.append(f"{verb} {held} with {here}")
        for i in _visible(world, state, here):
            if kind(world.objects[i]) in LAMP_TYPES and not (planning and i in state.lamps_on):
                actions.append(f"use {world.objects[i]}")
    if not planning:
        actions += ["look", "inventory"] + ([f"examine {here}"] if here is not None else [])
    return actions


def step(world: World, state: State, action: str) -> tuple[State, str]:
    """Apply one action text. An action outside the admissible set changes nothing: "Nothing happens."."""
    action = " ".join(str(action).strip().lower().split())
    if action not in admissible(world, state):
        return state, NOTHING_HAPPENS
    return _apply(world, state, action, describe=True)


def _apply(world: World, state: State, action: str, describe: bool) -> tuple[State, str]:
    """The effect of an admissible action (and, when ``describe``, the observation text)."""
    here = state.location
    if action.startswith("go to "):
        target = action[len("go to "):]
        new = replace(state, location=target)
        return new, f"You arrive at {target}. {_receptacle_view(world, new, target)}" if describe else ""
    if action.startswith("open "):
        new = replace(state, opened=state.opened | {here})
        return new, f"You open the {here}. {_receptacle_view(world, new, here)}" if describe else ""
    if action.startswith("close "):
        return replace(state, opened=state.opened - {here}), f"You close the {here}."
    if action.startswith("take "):
        name = action[len("take "):-len(f" from {here}")]
        index = world.objects.index(name)
        where = state.where[:index] + (None,) + state.where[index + 1:]
        return replace(state, held=index, where=where), f"You pick up the {name} from the {here}."
    if action.startswith("move "):
        index = state.held
        where = state.where[:index] + (here,) + state.where[index + 1:]
        return replace(state, held=None, where=where), f"You move the {world.objects[index]} to the {here}."
    if action.startswith("use "):
        index = world.objects.index(action[len("use "):])
        if index in state.lamps_on:
            return replace(state, lamps_on=state.lamps_on - {index}), f"You turn off the {world.objects[index]}."
        return (replace(state, lamps_on=state.lamps_on | {index}, toggled=state.toggled | {index}),
                f"You turn on the {world.objects[index]}.")
    for verb, word, gone in (("heat", "hot", "cool"), ("cool", "cool", "hot"), ("clean", "clean", None)):
        if action.startswith(verb + " "):
            index = state.held
            words = (state.states[index] - {gone}) | {word}
            states = state.states[:index] + (words,) + state.states[index + 1:]
            return replace(state, states=states), f"You {verb} the {world.objects[index]} using the {here}."
    if action == "inventory":
        if state.held is None:
            return state, "You are not carrying anything."
        return state, f"You are carrying: a {world.objects[state.held]}."
    if action == "look":
        if here is None:
            return state, _room_view(world)
        return state, f"You are facing the {here}. Next to it, you see nothing."
    # examine the receptacle the agent is at
    return state, _receptacle_view(world, state, here)


def goal_holds(world: World, state: State) -> bool:
    goal = world.goal
    if goal.type == "look_at_obj_in_light":
        if state.held is None or kind(world.objects[state.held]) != goal.object:
            return False
        return any(kind(world.objects[i]) == goal.lamp and state.where[i] == state.location
                   for i in state.toggled)
    word = APPLIANCE[goal.type][0] if goal.type in APPLIANCE else None
    placed = [i for i, place in enumerate(state.where)
              if place is not None and kind(place) == goal.receptacle and kind(world.objects[i]) == goal.object
              and (word is None or word in state.states[i])]
    if goal.type == "pick_two_obj_and_place":
        places = [state.where[i] for i in placed]
        return any(places.count(p) >= 2 for p in places)
    return bool(placed)


# ------------------------------------------------------------------ planning
def _restricted(world: World, state: State, visible: set[int] | None) -> tuple[World, State]:
    """The world and state with only the objects that can matter for the goal (its object type, lamps and
    whatever is held), optionally only among ``visible`` ones: other objects never block or help."""
    goal = world.goal
    keep = [i for i, o in enumerate(world.objects)
            if i == state.held or ((visible is None or i in visible)
                                   and (kind(o) == goal.object or (goal.lamp is not None and kind(o) == goal.lamp)))]
    index = {old: new for new, old in enumerate(keep)}
    small = World(world.receptacles, tuple(world.objects[i] for i in keep),
                  tuple(world.start[i] for i in keep), world.closed, tuple(world.states[i] for i in keep), goal)
    small_state = State(state.location, index.get(state.held), tuple(state.where[i] for i in keep), state.opened,
                        tuple(state.states[i] for i in keep),
                        frozenset(index[i] for i in state.lamps_on if i in index),
                        frozenset(index[i] for i in state.toggled if i in index))
    return small, small_state


def plan(world: World, max_length: int = 30, max_nodes: int = 200_000, start: State | None = None,
         visible: set[int] | None = None) -> list[str] | None:
    """A shortest action sequence that makes the goal hold, by breadth-first search; None if there is none
    within ``max_length`` actions and ``max_nodes`` expanded states. ``[]`` if the goal already holds.

    ``start``: plan from this state instead of the initial one; ``visible``: the planner knows only these
    objects (indices into ``world.objects``), as an agent knows what it has seen.
    """
    small, start = _restricted(world, initial_state(world) if start is None else start, visible)
    if goal_holds(small, start):
        return []
    parents: dict[State, tuple[State, str] | None] = {start: None}
    frontier = deque([(start, 0)])
    while frontier:
        state, depth = frontier.popleft()
        if depth >= max_length:
            continue
        for action in admissible(small, state, planning=True):
            new, _ = _apply(small, state, action, describe=False)
            if new in parents:
                continue
            parents[new] = (state, action)
            if goal_holds(small, new):
                actions = []
                node = new
                while parents[node] is not None:
                    node, act = parents[node]
                    actions.append(act)
                return actions[::-1]
            if len(parents) > max_nodes:
                return None
            frontier.append((new, depth + 1))
    return None


def search_expert(world: World, max_steps: int = 60) -> list[str] | None:
    """The expert an agent can imitate: it acts only on what it has seen. While the planner has no plan over
    the objects seen so far, it inspects the next receptacle in the order the room lists them (going there,
    opening it if closed); once it has one, it follows the plan's first action and replans each step.
    Returns its actions, or None if it does not reach the goal within ``max_steps``."""
    state = initial_state(world)
    order = alfworld_order(world.receptacles)
    seen: set[int] = set()
    inspected: set[str] = set()
    actions: list[str] = []
    while len(actions) < max_steps:
        if goal_holds(world, state):
            return actions
        if state.location is not None and _is_open(state, state.location):
            inspected.add(state.location)
            seen.update(_visible(world, state, state.location))
        known = plan(world, start=state, visible=seen, max_length=max_steps)
        if known:
            action = known[0]
        else:
            unseen = [r for r in order if r not in inspected]
            if not unseen:
                return None
            target = unseen[0]
            action = f"open {target}" if state.location == target else f"go to {target}"
        state, _ = step(world, state, action)
        actions.append(action)
    return None

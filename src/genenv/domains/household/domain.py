"""ALFWorld-style household: the simulator writes worlds and goals, the agent acts in them turn by turn.

A task is a world spec (JSON, see :mod:`genenv.domains.household.engine`): receptacles, objects and where
they are, which receptacles start closed, object states and a goal of one of ALFWorld's six task types.
The domain grounds what the simulator writes: names well-formed and unique, every referenced receptacle and
object present, the goal's objects, appliances and lamps present, the goal not already holding, and a
breadth-first planner must reach the goal. The shortest plan's length is the task's difficulty; its
``level`` is that length in buckets (1: 3-4 actions ... 6: 9 or more). The task's ``answer`` is the expert's
trajectory: the planner acting only on what it has seen (``engine.search_expert``), inspecting receptacles in
the order the room lists them until the planner has a plan, as an agent must; the omniscient shortest plan
would walk straight to objects no observation has shown yet, which no agent can imitate.

The agent plays episodes: it sees ALFWorld's intro (the room and the task), answers with one action per
turn ("go to fridge 1", "take apple 1 from fridge 1", ...) and gets the engine's observation; the episode
terminates with reward 1 when the goal holds, and is truncated (reward 0) after ``max_steps`` actions.
Actions outside the admissible set get "Nothing happens." and the episode goes on. Its prompt is the
intro followed by the history as ``> action`` / observation lines (the rollout trims the oldest turns to
the agent's token budget, see :func:`genenv.prompts.fit_history`).

The paper's evaluation protocol is a second mode, :meth:`HouseholdDomain.expert_steps`: the planner's
trajectory decomposed into (state, next action) steps, each scored by exact match.
"""

from __future__ import annotations

import string
from functools import lru_cache

import numpy as np

from genenv.constrained.references import MEMBER_OF, TYPE_OF
from genenv.domains.base import Invalid, LeveledDomain, StepResult, Task, TaskShape, WarmStartKey, register, transcript
from genenv.domains.household import engine

HELDOUT_SEED = 20260501
DEV_SEED = 4242
LEVELS = (1, 2, 3, 4, 5, 6)
SIMPLE_TYPES = ("pick_and_place_simple", "look_at_obj_in_light")
APPLIANCE_TYPES = ("pick_clean_then_place_in_recep", "pick_heat_then_place_in_recep",
                   "pick_cool_then_place_in_recep")
# the receptacles and objects procedural worlds draw from (the simulator may use any known type)
ROOM_RECEPTACLES = ("cabinet", "countertop", "diningtable", "drawer", "fridge", "microwave", "shelf", "sidetable",
                    "sinkbasin", "desk", "garbagecan", "stoveburner", "dresser", "coffeetable", "sofa")
LAMP_STANDS = ("desk", "sidetable", "dresser")   # where procedural worlds put a lamp
PLACE_TARGETS = ("cabinet", "countertop", "diningtable", "drawer", "shelf", "sidetable", "desk", "dresser",
                 "coffeetable", "sofa", "garbagecan")


# the words of ALFWorld's texts, actions, world JSON and the simulator prompt: one token each for tiny models
TEXT_WORDS = ("ALFRED", "Example", "JSON", "Looking", "New", "Next", "Nothing", "On", "In", "TextWorld", "The",
              "Welcome", "Write", "You", "Your", "a", "agent", "aim", "and", "anything", "are", "around", "arrive",
              "as", "at", "carrying", "clean", "close", "closed", "cool", "examine", "facing", "for", "from",
              "go", "goal", "half", "happens", "heat", "hot", "household", "in", "inventory", "is", "it", "lamp",
              "like", "look", "middle", "move", "not", "nothing", "object", "objects", "of", "off", "on", "one",
              "open", "pick", "put", "quickly", "rate", "receptacle", "receptacles", "room", "see", "solved",
              "states", "take", "task", "the", "this", "to", "turn", "two", "type", "under", "unknown", "up", "use",
              "using", "with", "world", "worlds", "you", *map(str, range(21)))
TINY_WORDS = tuple(sorted(set(TEXT_WORDS) | set(engine.RECEPTACLE_TYPES) | set(engine.OBJECT_TYPES)
                          | set(engine.TASK_TYPES)))


def level_of(plan_length: int) -> int:
    """Difficulty bucket of a shortest plan: 3-4 actions -> 1, 5 -> 2, 6 -> 3, 7 -> 4, 8 -> 5, 9+ -> 6."""
    return int(min(6, max(1, plan_length - 3)))


@lru_cache(maxsize=4096)
def _parsed(text: str) -> engine.World:
    return engine.parse_world(text)


def first_action(response: str) -> str:
    """The action in a response: its first non-empty line, without a leading '>' prompt marker."""
    for line in str(response).splitlines():
        line = line.strip().lstrip(">").strip()
        if line:
            return line
    return ""


@register("household")
class HouseholdDomain(LeveledDomain):
    heldout_seed = HELDOUT_SEED
    dev_seed = DEV_SEED
    alphabet = string.ascii_letters + string.digits + " \n.,:;!?-=_'\"{}[]()>"
    tiny_words = TINY_WORDS
    ordered_levels = True   # level = the shortest plan's length, in buckets
    agent_instructions = ("You act in a household text world, one action per reply, and are shown what it does. "
                          "Actions: go to <place>, open <place>, close <place>, take <object> from <place>, "
                          "move <object> to <place>, heat/cool/clean <object> with <appliance>, use <lamp>, look, "
                          "inventory, examine <place>; names as the world writes them ('desk 1', 'ladle 1').\n")
    multi_turn = True
    # format 3: the goal written last; 2: the answer is the searching expert (1: the omniscient plan); the engine's
    # rules and texts shape the tasks too
    warm_start_key = WarmStartKey(format_version=3, simulator_only_options=("variation_span",), code_modules=(engine,))

    def __init__(self, max_steps: int = 30, seed_levels: list[int] | None = None,
                 max_receptacles: int = 6, max_distractors: int = 3):
        if not isinstance(max_steps, int) or not 10 <= max_steps <= 200:
            raise TypeError(f"max_steps must be an integer in [10, 200] (level 6 needs plans of 9-10 actions), "
                            f"got {max_steps!r}")
        self.max_steps = self.max_turns = max_steps
        self.seed_levels = list(seed_levels or [1, 2, 3])
        if any(lv not in LEVELS for lv in self.seed_levels):
            raise TypeError(f"seed_levels must be drawn from {list(LEVELS)}, got {self.seed_levels!r}")
        if not isinstance(max_receptacles, int) or not 3 <= max_receptacles <= engine.MAX_RECEPTACLES:
            raise TypeError(f"max_receptacles must be an integer in [3, {engine.MAX_RECEPTACLES}]")
        if not isinstance(max_distractors, int) or not 0 <= max_distractors <= 8:
            raise TypeError("max_distractors must be an integer in [0, 8]")
        self.max_receptacles = max_receptacles
        self.max_distractors = max_distractors
        self.agent_max_new_tokens = 48     # the longest action ("take remotecontrol 1 from coffeetable 1")
        self.env_max_new_tokens = 512      # a world of max_receptacles receptacles in JSON, in characters

    def levels(self):
        return list(LEVELS)

    # -------------------------------------------------------------- tasks
    def make_task(self, world: engine.World, actions: list[str] | None = None) -> Task | Invalid:
        """Ground a world: the planner must reach its goal; the plan's length is the difficulty.
        (``actions``: a shortest plan already found for this world.)"""
        text = world.dumps()
        actions = engine.plan(world, max_length=self.max_steps) if actions is None else actions
        if actions is None:
            return Invalid(f"goal unreachable: the planner finds no plan within max_steps={self.max_steps}", text)
        if not actions:
            return Invalid("goal already holds at the start", text)
        expert = engine.search_expert(world) or actions
        return Task(text, engine.intro(world), "\n".join(expert), level_of(len(actions)),
                    meta={"type": world.goal.type, "plan_length": len(actions), "expert_length": len(expert)})

    def random_task(self, rng: np.random.Generator, level: int) -> Task:
        """A procedural world whose shortest plan falls in ``level`` (rejection sampling over layouts)."""
        for _ in range(2000):
            world = self._random_layout(rng, level)
            actions = engine.plan(world, max_length=self.max_steps) if world is not None else None
            if actions and level_of(len(actions)) == level:
                return self.make_task(world, actions)
        raise RuntimeError(f"could not draw a world of level {level}")

    def _random_layout(self, rng: np.random.Generator, level: int) -> engine.World | None:
        if level <= 2:
            task_type = SIMPLE_TYPES[int(rng.integers(2))]
        elif level <= 4:
            task_type = (APPLIANCE_TYPES + SIMPLE_TYPES)[int(rng.integers(5 if level == 4 else 3))]
        else:
            task_type = (APPLIANCE_TYPES + ("pick_two_obj_and_place",))[int(rng.integers(4))]
        n_receptacles = int(rng.integers(3, self.max_receptacles + 1))
        types = list(rng.choice(ROOM_RECEPTACLES, size=n_receptacles, replace=False))
        needed = {"pick_clean_then_place_in_recep": "sinkbasin", "pick_heat_then_place_in_recep": "microwave",
                  "pick_cool_then_place_in_recep": "fridge"}.get(task_type)
        if needed and needed not in types:
            types[int(rng.integers(len(types)))] = needed
        if task_type == "look_at_obj_in_light" and not any(t in LAMP_STANDS for t in types):
            types[int(rng.integers(len(types)))] = "sidetable"
        receptacles = []
        for rtype in types:
            count = int(rng.integers(1, 3)) if rtype in ("cabinet", "drawer", "shelf", "countertop") else 1
            receptacles += [f"{rtype} {k}" for k in range(1, count + 1)]
        receptacles = receptacles[:self.max_receptacles]
        able = engine.APPLIANCE[task_type][2] if task_type in engine.APPLIANCE else engine.PORTABLE
        goal_object = str(rng.choice(sorted(able)))
        present_types = sorted({engine.kind(r) for r in receptacles})
        goal = {"type": task_type, "object": goal_object}
        objects: dict[str, str] = {}
        count = 2 if task_type == "pick_two_obj_and_place" else 1
        if task_type == "look_at_obj_in_light":
            lamp = str(rng.choice(["desklamp", "floorlamp"]))
            goal["lamp"] = lamp
            stands = [r for r in receptacles if engine.kind(r) in LAMP_STANDS]
            if not stands:
                return None
            objects[f"{lamp} 1"] = str(rng.choice(stands))
        else:
            targets = [t for t in present_types if t in PLACE_TARGETS]
            if not targets:
                return None
            goal["receptacle"] = str(rng.choice(targets))
        for k in range(1, count + 1):
            objects[f"{goal_object} {k}"] = str(rng.choice(receptacles))
        distractor_types = sorted(engine.PORTABLE - {goal_object})
        for _ in range(int(rng.integers(0, self.max_distractors + 1))):
            name = f"{rng.choice(distractor_types)} 1"
            objects.setdefault(name, str(rng.choice(receptacles)))
        closeable = [r for r in receptacles if engine.kind(r) in engine.OPENABLE]
        closed = [r for r in closeable if rng.random() < 0.6]
        data = {"goal": goal, "receptacles": receptacles, "objects": objects, "closed": closed}
        try:
            return engine.world_from_json(data)
        except engine.WorldError:
            return None

    def difficulty(self, task):
        return float(task.meta.get("plan_length", task.level + 3))

    # -------------------------------------------------------------- simulator side
    def simulator_prompt(self, seed, stats):
        rate = stats.get("success_rate")
        known = "unknown" if rate is None else f"{rate:.1f}"
        return (f"Write a household world as JSON (receptacles, objects, closed, goal). The agent solved worlds "
                f"like this one at rate {known}; aim for half.\nExample:\n{seed.text}\nNew world:\n")

    def task_shape(self):
        """A world as JSON, its goal last: 1-16 receptacles and up to 24 objects named '<known type> <1-99>', each
        object mapped to a receptacle name; the closed receptacles openable ones; states from clean, hot, cool; no
        receptacle, closed one, object or state word named twice (``uniqueItems`` and JSON's unique keys); each
        object in, and each closed receptacle, one of the receptacles listed (``x-member-of``);
        a goal of a known type naming an object type that type of task can use, and a receptacle (or lamp) type,
        each the type of a receptacle or object written before it (``x-type-of``). Left to
        ``validate``: the number of the goal's objects, its appliance, and the planner solving it."""
        number = "[1-9][0-9]?"
        def pattern(types):
            return f"^({'|'.join(sorted(types))}) {number}$"
        def named(types):
            return {"type": "string", "pattern": pattern(types)}
        receptacle = named(engine.RECEPTACLE_TYPES)
        in_world = {MEMBER_OF: ["receptacles"]}   # one of the receptacles written before (constrained.references)
        def present(types, where):                # the type of one of the receptacles or objects written before
            return {"enum": sorted(types), TYPE_OF: [where]}
        def goal(task_type, target, target_types):
            able = engine.APPLIANCE[task_type][2] if task_type in engine.APPLIANCE else engine.PORTABLE
            return {"type": "object", "additionalProperties": False, "required": ["type", "object", target],
                    "properties": {"type": {"const": task_type}, "object": present(able, "objects"),
                                   target: target_types}}
        goals = [goal(t, "receptacle", present(engine.RECEPTACLE_TYPES, "receptacles"))
                 for t in engine.TASK_TYPES if t != "look_at_obj_in_light"]
        goals.append(goal("look_at_obj_in_light", "lamp", present(engine.LAMP_TYPES, "objects")))
        return TaskShape(json_schema={
            "type": "object", "additionalProperties": False, "required": ["receptacles", "objects", "goal"],
            "properties": {
                "receptacles": {"type": "array", "items": receptacle, "minItems": 1,
                                "maxItems": engine.MAX_RECEPTACLES, "uniqueItems": True},
                "objects": {"type": "object", "maxProperties": engine.MAX_OBJECTS, "additionalProperties": False,
                            "patternProperties": {pattern(engine.OBJECT_TYPES): {**receptacle, **in_world}}},
                "closed": {"type": "array", "items": {**named(engine.OPENABLE), **in_world},
                           "maxItems": engine.MAX_RECEPTACLES,
                           "uniqueItems": True},
                "states": {"type": "object", "additionalProperties": False, "maxProperties": engine.MAX_OBJECTS,
                           "patternProperties": {pattern(engine.OBJECT_TYPES): {
                               "type": "array", "items": {"enum": list(engine.STATE_WORDS)},
                               "maxItems": len(engine.STATE_WORDS), "uniqueItems": True}}},
                "goal": {"anyOf": goals}}})

    def parse_task(self, text):
        try:
            world = _parsed(text if isinstance(text, str) else "")
        except engine.WorldError as err:
            return Invalid(str(err), text if isinstance(text, str) else repr(text))
        return Task(world.dumps(), engine.intro(world), None, 0, meta={"type": world.goal.type})

    def validate(self, task):
        try:
            world = _parsed(task.text)
        except engine.WorldError as err:
            return Invalid(str(err), task.text)
        return self.make_task(world)

    # -------------------------------------------------------------- agent side
    def reset(self, task, seed=0):
        world = _parsed(task.text)
        return {"task": task, "world": world, "state": engine.initial_state(world), "steps": 0}, task.prompt

    def step(self, state, action):
        world = state["world"]
        new_state, observation = engine.step(world, state["state"], first_action(action))
        steps = state["steps"] + 1
        done = engine.goal_holds(world, new_state)
        state = {**state, "state": new_state, "steps": steps}
        return StepResult(observation, 1.0 if done else 0.0, terminated=done,
                          truncated=(not done and steps >= self.max_steps), state=state)

    def score(self, task, response):
        """Single-response score: does this whole action list (one per line) reach the goal?"""
        state, _ = self.reset(task)
        for line in str(response).splitlines()[:self.max_steps]:
            result = self.step(state, line)
            state = result.state
            if result.terminated:
                return 1.0
        return 0.0

    def agent_context(self, history, observation):
        return transcript(history, observation, first_action)

    def expert_steps(self, task) -> list[tuple[list[tuple[str, str]], str, str]]:
        """The expert's trajectory as (history, observation, expert action) steps: the paper's single-step
        protocol (ALFWorld's expert trajectories decomposed into state -> next action pairs)."""
        world = _parsed(task.text)
        actions = task.answer.split("\n") if task.answer else engine.plan(world) or []
        state, observation, history, steps = engine.initial_state(world), task.prompt, [], []
        for action in actions:
            steps.append((list(history), observation, action))
            state, next_observation = engine.step(world, state, action)
            history.append((observation, action))
            observation = next_observation
        return steps

    def action_matches(self, response, action):
        return " ".join(first_action(response).lower().split()) == action

    def warmstart_examples(self, task) -> list[tuple[list[tuple[str, str]], str, str]]:
        """Supervised warm start on the expert's steps (imitation of the planner, as ALFWorld's baselines)."""
        return self.expert_steps(task)

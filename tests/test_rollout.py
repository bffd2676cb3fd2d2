"""Multi-turn rollouts through the Domain protocol, with a small multi-turn test domain."""

from genenv.domains.base import Domain, Invalid, StepResult, Task
from genenv.models.policy import Generation
from genenv.rollout import rollout


class CountdownDomain(Domain):
    """The agent must say the counter's value each turn; the counter then drops. Zero ends the episode."""
    multi_turn = True
    max_turns = 4

    def levels(self):
        return [1, 2, 3, 4, 5]

    def _task(self, start):
        return Task(str(start), f"n={start}>", None, start)

    def seed_tasks(self, rng, n):
        return [self._task(int(rng.integers(1, 3))) for _ in range(n)]

    def heldout_tasks(self, per_level):
        return [self._task(level) for level in self.levels() for _ in range(per_level)]

    def simulator_corpus(self, rng, n):
        return [(self._task(1), {"success_rate": None}, self._task(int(rng.integers(1, 6)))) for _ in range(n)]

    def simulator_prompt(self, seed, stats):
        return f"{seed.text}>"

    def parse_task(self, text):
        return self._task(int(text)) if text.strip().isdigit() else Invalid("not a number", text)

    def score(self, task, response):  # (a single action never finishes a countdown above 1)
        return float(task.text == "1" and response.strip() == "1")

    def reset(self, task, seed=0):
        start = int(task.text)
        return {"left": start, "correct": 0, "start": start}, f"n={start}>"

    def step(self, state, action):
        if action.strip() == str(state["left"]):
            state["correct"] += 1
            state["left"] -= 1
        if state["left"] == 0:
            return StepResult("", state["correct"] / state["start"], True, False, state)
        return StepResult(f"n={state['left']}>", 0.0, False, False, state)


class ScriptedPolicy:
    """Answers the counter correctly except when the task says otherwise; records every prompt."""

    def __init__(self, wrong_on=()):
        self.prompts = []
        self.wrong_on = set(wrong_on)

    def encode_prompts(self, prompts):
        return [[ord(c) for c in p] for p in prompts]

    def generate(self, prompts, n=1, **kwargs):
        self.prompts.append(list(prompts))
        out = []
        for prompt in prompts:
            value = prompt.rsplit("n=", 1)[1].rstrip(">")
            text = "x" if prompt.startswith("n=" + str(max(self.wrong_on, default=-1))) else value
            out.append([Generation([1], [5, 2], text, [-0.1, -0.1], True)])
        return out


def test_multi_turn_episodes_terminate_and_truncate():
    domain = CountdownDomain()
    tasks = [Task("1", "n=1>"), Task("3", "n=3>"), Task("9", "n=9>")]
    policy = ScriptedPolicy()
    groups = rollout(domain, policy, tasks, group_size=2)
    assert [len(g) for g in groups] == [2, 2, 2]
    one, three, nine = (g[0] for g in groups)
    assert one.terminated and not one.truncated and len(one.turns) == 1 and one.reward == 1.0
    assert three.terminated and len(three.turns) == 3 and three.reward == 1.0
    # the step limit ends the long episode as truncated, never terminated
    assert nine.truncated and not nine.terminated and len(nine.turns) == 4 and nine.reward == 0.0
    # batched: one generate call per turn across all active episodes, shrinking as episodes end
    assert [len(p) for p in policy.prompts] == [6, 4, 4, 2]
    # history is in the prompt
    assert policy.prompts[2][0] == "n=3>3\nn=2>2\nn=1>"


def test_wrong_action_keeps_episode_going():
    domain = CountdownDomain()
    groups = rollout(domain, ScriptedPolicy(wrong_on=[2]), [Task("2", "n=2>")], group_size=1)
    episode = groups[0][0]
    assert episode.truncated and episode.reward == 0.0 and len(episode.turns) == 4


def test_real_tiny_policy_runs_multi_turn(tiny_policy):
    domain = CountdownDomain()
    groups = rollout(domain, tiny_policy, [Task("2", "n=2>")], group_size=3, max_new_tokens=3, seed=0)
    for episode in groups[0]:
        assert episode.terminated or episode.truncated
        assert all(len(t.logprobs) == len(t.response_ids) for t in episode.turns)


def test_single_turn_fast_path_matches_general_loop(tiny_policy):
    from genenv.domains.addition import AdditionDomain

    class LoopedAddition(AdditionDomain):
        multi_turn = True  # forces the general multi-turn loop; max_turns stays 1

    fast, looped = AdditionDomain(width=4), LoopedAddition(width=4)
    tasks = [fast.make_task(12, 34), fast.make_task(5, 999), fast.make_task(0, 7)]
    a = rollout(fast, tiny_policy, tasks, group_size=4, max_new_tokens=6, seed=5)
    b = rollout(looped, tiny_policy, tasks, group_size=4, max_new_tokens=6, seed=5)
    for group_a, group_b in zip(a, b):
        for ea, eb in zip(group_a, group_b):
            assert ea.final_action == eb.final_action and ea.reward == eb.reward
            assert ea.turns[0].response_ids == eb.turns[0].response_ids
            assert ea.turns[0].logprobs == eb.turns[0].logprobs
            assert (ea.terminated, ea.truncated) == (eb.terminated, eb.truncated) == (True, False)

"""Drive agent <-> domain episodes, batched across every active episode.

A single-turn domain is the special case that terminates after the first action. In multi-turn domains
the agent's prompt at each turn is ``domain.agent_context(history, observation)``; an episode ends when
the domain says ``terminated`` or ``truncated``, or as ``truncated`` once ``domain.max_turns`` actions were
taken.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from genenv.domains.base import Domain, Task


@dataclass
class Turn:
    prompt_ids: list[int]
    response_ids: list[int]
    logprobs: list[float]
    action: str
    reward: float


@dataclass
class Episode:
    task: Task
    turns: list[Turn] = field(default_factory=list)
    reward: float = 0.0
    terminated: bool = False
    truncated: bool = False

    @property
    def response_tokens(self) -> int:
        return sum(len(t.response_ids) for t in self.turns)

    @property
    def final_action(self) -> str:
        return self.turns[-1].action if self.turns else ""


def rollout(domain: Domain, policy, tasks: list[Task], *, group_size: int = 1, max_new_tokens: int = 16,
            temperature: float = 1.0, greedy: bool = False, seed: int = 0,
            batch_size: int = 512) -> list[list[Episode]]:
    """Run ``group_size`` episodes per task; returns one list of episodes per task (the GRPO groups)."""
    if not domain.multi_turn:
        return _single_turn(domain, policy, tasks, group_size, max_new_tokens, temperature, greedy, seed,
                            batch_size)
    episodes = [Episode(task) for task in tasks for _ in range(group_size)]
    states, observations, histories = [], [], []
    for index, episode in enumerate(episodes):
        state, observation = domain.reset(episode.task, seed=seed + index)
        states.append(state)
        observations.append(observation)
        histories.append([])
    active = list(range(len(episodes)))
    turn = 0
    while active:
        contexts = [domain.agent_context(histories[i], observations[i]) for i in active]
        generations = policy.generate(contexts, n=1, max_new_tokens=max_new_tokens, temperature=temperature,
                                      greedy=greedy, seed=seed * 1000 + turn, batch_size=batch_size)
        still_active = []
        for i, gens in zip(active, generations):
            gen = gens[0]
            result = domain.step(states[i], gen.text)
            episode = episodes[i]
            episode.turns.append(Turn(gen.prompt_ids, gen.token_ids, gen.logprobs, gen.text, result.reward))
            episode.reward += result.reward
            states[i] = result.state
            histories[i].append((observations[i], gen.text))
            observations[i] = result.observation
            if result.terminated:
                episode.terminated = True
            elif result.truncated or len(episode.turns) >= domain.max_turns:
                episode.truncated = True
            else:
                still_active.append(i)
        active = still_active
        turn += 1
    return [episodes[k * group_size:(k + 1) * group_size] for k in range(len(tasks))]


def _single_turn(domain, policy, tasks, group_size, max_new_tokens, temperature, greedy, seed, batch_size):
    """Fast path with the same results as the loop above: each prompt is encoded once for its whole group."""
    prompts = []
    states = []
    for index, task in enumerate(tasks):
        state, observation = domain.reset(task, seed=seed + index * group_size)
        states.append(state)
        prompts.append(domain.agent_context([], observation))
    generations = policy.generate(prompts, n=group_size, max_new_tokens=max_new_tokens, temperature=temperature,
                                  greedy=greedy, seed=seed * 1000, batch_size=batch_size)
    groups = []
    for task, state, gens in zip(tasks, states, generations):
        group = []
        for gen in gens:
            result = domain.step(copy.copy(state), gen.text)
            group.append(Episode(task, [Turn(gen.prompt_ids, gen.token_ids, gen.logprobs, gen.text, result.reward)],
                                 result.reward, terminated=True, truncated=False))
        groups.append(group)
    return groups

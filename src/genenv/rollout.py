"""Drive agent <-> domain episodes, batched across every active episode.

A single-turn domain is the special case that terminates after the first action. In multi-turn domains
the agent's prompt at each turn is ``domain.agent_context(history, observation)``; an episode ends when
the domain says ``terminated`` or ``truncated``, or as ``truncated`` once ``domain.max_turns`` actions were
taken.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from genenv.domains.base import Domain, Task
from genenv.prompts import context_budget, fit_contexts
from genenv.seeding import grid_keys, sequence_keys


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
    error: str | None = None   # why a step was cut short (Domain.checked_step: too long, too slow, it raised)

    @property
    def response_tokens(self) -> int:
        turns = self.turns
        if len(turns) == 1:  # single-turn episodes (most of them): no generator
            return len(turns[0].response_ids)
        return sum(len(t.response_ids) for t in turns)

    @property
    def final_action(self) -> str:
        return self.turns[-1].action if self.turns else ""


def tasks_per_shard(batch_size: int, group_size: int) -> int:
    """How many tasks one rollout shard holds: as many groups as fit one generate() batch. It depends on the
    config alone (never on a worker count), so the shards, and the batches inside them, are the same however
    many workers run them."""
    return max(1, batch_size // max(1, group_size))


def rollout(domain: Domain, policy, tasks: list[Task], *, group_size: int = 1, max_new_tokens: int = 16,
            temperature: float = 1.0, greedy: bool = False, seed: int = 0,
            batch_size: int = 512, max_context_tokens: int = 0, run_shards=None) -> list[list[Episode]]:
    """Run ``group_size`` episodes per task; returns one list of episodes per task (the GRPO groups).

    Sampled rollouts run in shards of :func:`tasks_per_shard` tasks (:func:`rollout_shard`), each episode with
    randomness keyed by (``seed``, its task's index, its sample, its turn), so the result does not depend on
    which process runs which shard: ``run_shards`` (an engine's, :mod:`genenv.engine`) takes the shards' keyword
    arguments and returns their groups in order; without it they run here. Greedy rollouts (evaluation) are
    sharded alike (for single-turn domains the same batches as one generate() call over all tasks).
    Multi-turn prompts carry the history, trimmed to :func:`context_budget` tokens (``max_context_tokens``,
    0 = the model's window minus ``max_new_tokens``) by :func:`fit_history`.
    """
    per_shard = tasks_per_shard(batch_size, group_size)
    shards = [dict(tasks=tasks[first:first + per_shard], first_index=first, group_size=group_size,
                   max_new_tokens=max_new_tokens, temperature=temperature, greedy=greedy, seed=seed,
                   batch_size=batch_size, max_context_tokens=max_context_tokens)
              for first in range(0, len(tasks), per_shard)]
    if run_shards is None:
        results = [rollout_shard(domain, policy, **shard) for shard in shards]
    else:
        results = run_shards("agent", shards)
    return [group for shard_groups in results for group in shard_groups]


def rollout_shard(domain: Domain, policy, tasks: list[Task], *, first_index: int = 0, group_size: int = 1,
                  max_new_tokens: int = 16, temperature: float = 1.0, greedy: bool = False, seed: int = 0,
                  batch_size: int = 512, max_context_tokens: int = 0) -> list[list[Episode]]:
    """The episodes of ``tasks``, the slice of a phase's tasks that starts at index ``first_index``: sample j of
    task t (its index in the phase) resets with seed ``seed + t * group_size + j`` and draws turn k's tokens with
    key (t, j, k)."""
    if not domain.multi_turn:
        return _single_turn(domain, policy, tasks, first_index, group_size, max_new_tokens, temperature, greedy,
                            seed, batch_size)
    episodes = [Episode(task) for task in tasks for _ in range(group_size)]
    states, observations, histories = [], [], []
    for index, episode in enumerate(episodes):
        state, observation = domain.reset(episode.task, seed=seed + first_index * group_size + index)
        states.append(state)
        observations.append(observation)
        histories.append([])
    active = list(range(len(episodes)))
    turn = 0
    budget = context_budget(policy, max_new_tokens, max_context_tokens)
    while active:
        contexts, prompt_ids = fit_contexts(domain, policy, [(histories[i], observations[i]) for i in active],
                                            budget)
        active_ids = np.asarray(active)
        keys = sequence_keys(first_index + active_ids // group_size, active_ids % group_size, turn)
        generations = policy.generate(contexts, n=1, max_new_tokens=max_new_tokens, temperature=temperature,
                                      greedy=greedy, seed=seed, batch_size=batch_size, prompt_ids=prompt_ids,
                                      keys=keys)
        still_active = []
        for i, gens in zip(active, generations):
            gen = gens[0]
            result = domain.checked_step(states[i], gen.text)
            episode = episodes[i]
            episode.error = episode.error or result.error
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


def _single_turn(domain, policy, tasks, first_index, group_size, max_new_tokens, temperature, greedy, seed,
                 batch_size):
    """Fast path with the same results as the loop above: each prompt is encoded once for its whole group."""
    prompts = []
    states = []
    for index, task in enumerate(tasks):
        state, observation = domain.reset(task, seed=seed + (first_index + index) * group_size)
        states.append(state)
        prompts.append(domain.agent_context([], observation))
    keys = grid_keys(first_index, len(tasks), group_size, 0)   # turn 0: the keys the loop above uses
    generations = policy.generate(prompts, n=group_size, max_new_tokens=max_new_tokens, temperature=temperature,
                                  greedy=greedy, seed=seed, batch_size=batch_size, keys=keys)
    groups = []
    for task, state, gens in zip(tasks, states, generations):
        group = []
        for gen in gens:
            result = domain.checked_step(copy.copy(state), gen.text)
            group.append(Episode(task, [Turn(gen.prompt_ids, gen.token_ids, gen.logprobs, gen.text, result.reward)],
                                 result.reward, terminated=True, truncated=False, error=result.error))
        groups.append(group)
    return groups


def replay(domain: Domain, task: Task, actions: list[str], seed: int = 0) -> Episode:
    """The episode of ``task`` whose actions were ``actions``, scored as :func:`rollout` scores one: reset with
    ``seed``, each action through ``domain.checked_step`` (bounded: a long, slow or crashing action earns 0 and
    ends the episode), until the domain ends it or ``domain.max_turns`` actions were taken. Actions past the end
    are not read; an episode whose actions run out first is ``truncated`` with the reward it earned. The score of
    a response a model gave elsewhere (a verifiers rollout, :mod:`genenv.integrations.verifiers`)."""
    episode = Episode(task)
    state, _ = domain.reset(task, seed=seed)
    for action in actions:
        result = domain.checked_step(state, action)
        episode.error = episode.error or result.error
        episode.turns.append(Turn([], [], [], action, result.reward))
        episode.reward += result.reward
        state = result.state
        if result.terminated:
            episode.terminated = True
            return episode
        if result.truncated or len(episode.turns) >= domain.max_turns:
            break
    episode.truncated = True
    return episode


def single_step_accuracy(domain: Domain, policy, tasks: list[Task], *, max_new_tokens: int = 16,
                         batch_size: int = 512, max_context_tokens: int = 0) -> list[list[bool]] | None:
    """The paper's single-step protocol: each task's expert trajectory decomposed into (state, next action)
    steps; the policy answers every step greedily from the expert's history and is scored by exact match.
    Returns one list of per-step verdicts per task, or None when the domain has no expert."""
    steps = [domain.expert_steps(task) for task in tasks]
    if any(s is None for s in steps):
        return None
    flat = [step for task_steps in steps for step in task_steps]
    if not flat:
        return [[] for _ in tasks]
    contexts, prompt_ids = fit_contexts(domain, policy, [(history, observation) for history, observation, _ in flat],
                                        context_budget(policy, max_new_tokens, max_context_tokens))
    generations = policy.generate(contexts, n=1, max_new_tokens=max_new_tokens, greedy=True,
                                  batch_size=batch_size, prompt_ids=prompt_ids)
    verdicts = [domain.action_matches(g[0].text, action) for g, (_, _, action) in zip(generations, flat)]
    out, start = [], 0
    for task_steps in steps:
        out.append(verdicts[start:start + len(task_steps)])
        start += len(task_steps)
    return out

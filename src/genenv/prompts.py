"""The agent's prompts under a model's context window: how many tokens a prompt may take, and a multi-turn history
trimmed (oldest turns first) until it fits. Below the domains and the rollouts (each takes the domain it prompts
for as an argument, and needs only its ``agent_context``), so a domain's benchmark driver and the rollouts share it.
"""

from __future__ import annotations


def context_budget(policy, max_new_tokens: int, max_context_tokens: int = 0) -> int:
    """Tokens a multi-turn prompt may take: the model's window minus room for the response, or less."""
    config = getattr(getattr(policy, "model", None), "config", None)
    window = getattr(config, "max_position_embeddings", None) or 10 ** 9
    budget = window - max_new_tokens
    return min(budget, max_context_tokens) if max_context_tokens else budget


def fit_history(domain, policy, history: list[tuple[str, str]], observation: str, budget: int,
                ids: list[int] | None = None) -> tuple[str, list[int]]:
    """The agent's prompt, with the oldest turns dropped until it fits ``budget`` tokens.

    The first observation (which states the task) is always kept; its action and the turns after it go
    first. Returns the prompt text and its token ids.
    """
    context = domain.agent_context(history, observation)
    ids = policy.encode_prompts([context])[0] if ids is None else ids
    drop = 1
    while len(ids) > budget and drop <= len(history):
        context = domain.agent_context([(history[0][0], None)] + history[drop:], observation)
        ids = policy.encode_prompts([context])[0]
        drop += 1
    return context, ids


def fit_contexts(domain, policy, states: list[tuple[list[tuple[str, str]], str]],
                 budget: int) -> tuple[list[str], list[list[int]]]:
    """Prompts of many (history, observation) states, encoded in one batch; those over ``budget`` tokens are
    trimmed by :func:`fit_history`. Returns the prompt texts and their token ids."""
    contexts = [domain.agent_context(history, observation) for history, observation in states]
    prompt_ids = policy.encode_prompts(contexts)
    for k, (history, observation) in enumerate(states):
        if len(prompt_ids[k]) > budget:
            contexts[k], prompt_ids[k] = fit_history(domain, policy, history, observation, budget, prompt_ids[k])
    return contexts, prompt_ids

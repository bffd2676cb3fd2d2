"""Candidate tasks of an epoch: what the simulator wrote (or a fixed-data curriculum drew), and what was learned
about each. A :class:`Candidate` is immutable; each phase of the loop returns new ones."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from genenv.domains.base import Domain, Invalid, Task
from genenv.io import append_jsonl, read_jsonl
from genenv.models.policy import Generation
from genenv.progress import progress_bar
from genenv.reward import scored
from genenv.rollout import Episode, tasks_per_shard
from genenv.seeding import grid_keys
from genenv.splits import DataSplit

if TYPE_CHECKING:
    from genenv.config import RunConfig
    from genenv.models.policy import Policy


@dataclass(frozen=True)
class Candidate:
    """One simulator output (or drawn task) and everything learned about it during the epoch."""
    batch: int                  # index of the seed it was written from (drawn tasks: consecutive groups)
    seed: Task
    context: str
    prompt_ids: list[int]
    token_ids: list[int]
    raw: str
    parsed: Task | Invalid
    episodes: tuple[Episode, ...] = ()
    p_hat_task: float | None = None
    p_hat: float | None = None   # the p_hat that sets R_env (batch or task level)
    r_env: float = 0.0
    in_band: bool = False
    source: str = "simulator"   # or "drawn": a task a fixed-data curriculum drew from its set
    logprobs: tuple[float, ...] = ()   # the simulator's log-probs of token_ids when it sampled them
    request_error: str | None = None   # a remote simulator's request that failed (genenv.models.remote): why

    @property
    def valid(self) -> bool:
        return isinstance(self.parsed, Task)

    def updated(self, **changes) -> "Candidate":
        """A copy with ``changes`` (``dataclasses.replace``; unknown names raise TypeError)."""
        return dataclasses.replace(self, **changes)


def simulator_sampling(cfg: RunConfig, domain: Domain) -> dict:
    """What :func:`write_tasks` samples with, from a run's config: the longest task (the config's and the domain's
    cap), the temperature and the batch of one generate() call."""
    return dict(max_new_tokens=min(cfg.env.max_new_tokens, domain.env_max_new_tokens),
                temperature=cfg.env.temperature, batch_size=cfg.env.generation_batch)


def write_tasks(domain: Domain, env: Policy, seeds: list[Task], rates: list[float | None], n: int, sample_seed: int,
                *, max_new_tokens: int, temperature: float, batch_size: int, run_shards=None,
                progress: str | None = None, journal: Path | None = None, constraint=None) -> list[Candidate]:
    """``n`` simulator generations per seed, prompted with the seed and its success rate (not parsed yet).

    Written in shards of as many seeds as fill one generate() batch (:func:`genenv.rollout.tasks_per_shard`);
    generation j of seed i draws with key (i, j), so it is the same whichever process writes its shard
    (``run_shards``: an engine's, :mod:`genenv.engine`; without it, here, with a progress display named
    ``progress`` when given: the set written once before training is hundreds of generations). With ``journal``
    (a JSON Lines file) each shard written here is appended to it as it finishes and a shard already there, for
    the same prompts and sampling settings, is read back instead of written again: a run killed while writing
    its fixed set resumes where it stopped, with the same generations to the last log-prob. ``constraint``: the
    simulator's task shape (``env.constrained``; an engine's ``run_shards`` holds its own)."""
    contexts = [domain.simulator_prompt(seed, {"success_rate": rate}) for seed, rate in zip(seeds, rates)]
    per_shard = tasks_per_shard(batch_size, n)
    shards = [dict(contexts=contexts[first:first + per_shard], first_index=first, n=n, sample_seed=sample_seed,
                   max_new_tokens=max_new_tokens, temperature=temperature, batch_size=batch_size)
              for first in range(0, len(contexts), per_shard)]
    if run_shards is not None:
        results = run_shards("env", shards)
    else:
        written = read_journal(journal, shards) if journal is not None else {}
        with progress_bar(len(seeds) * n, progress or "", enabled=progress is not None,
                          initial=sum(len(shards[i]["contexts"]) * n for i in written)) as bar:
            results = []
            for index, shard in enumerate(shards):
                if index in written:
                    results.append(written[index])
                    continue
                results.append(write_shard(env, **shard, constraint=constraint))
                if journal is not None:
                    append_jsonl(journal, {"shard": index, "key": shard_key(shard),
                                           "generations": [[dataclasses.asdict(g) for g in gens]
                                                           for gens in results[-1]]})
                bar.update(len(shard["contexts"]) * n)
    gens = [samples for shard_gens in results for samples in shard_gens]
    return [Candidate(batch, seed, context, g.prompt_ids, g.token_ids, g.text, Invalid("unparsed"),
                      logprobs=tuple(g.logprobs), request_error=g.error)
            for batch, (seed, context, samples) in enumerate(zip(seeds, contexts, gens)) for g in samples]


def shard_key(shard: dict) -> str:
    """What a shard's generations depend on besides the simulator's weights (its prompts and sampling settings)."""
    return hashlib.sha256(json.dumps(shard, sort_keys=True).encode()).hexdigest()


def read_journal(journal: Path, shards: list[dict]) -> dict[int, list[list[Generation]]]:
    """The shards of ``shards`` already in ``journal`` (by index, when their key matches), as generations."""
    done = {}
    for row in read_jsonl(journal):
        index = row.get("shard")
        if isinstance(index, int) and 0 <= index < len(shards) and row.get("key") == shard_key(shards[index]):
            done[index] = [[Generation(**g) for g in gens] for gens in row["generations"]]
    return done


def write_shard(env: Policy, contexts: list[str], *, first_index: int, n: int, sample_seed: int,
                max_new_tokens: int, temperature: float, batch_size: int,
                constraint=None) -> list[list[Generation]]:
    """The simulator's ``n`` generations for each of ``contexts``, the slice of an epoch's prompts that starts at
    index ``first_index`` (keys (index, j)), sampled under ``constraint`` (``env.constrained``) when given."""
    keys = grid_keys(first_index, len(contexts), n)
    return env.generate(contexts, n=n, max_new_tokens=max_new_tokens, temperature=temperature, seed=sample_seed,
                        batch_size=batch_size, keys=keys, constraint=constraint)


def validated(domain: Domain, candidates: list[Candidate], split: DataSplit) -> list[Candidate]:
    """Every candidate parsed and grounded by the domain; a held-out or dev task is rejected. Never raises on
    arbitrary text."""
    return [c.updated(parsed=Invalid(f"simulator request failed: {c.request_error}") if c.request_error
                      else split.exclude(domain.parse_and_validate(c.raw))) for c in candidates]


def with_episodes(candidates: list[Candidate], groups: list[list[Episode]]) -> list[Candidate]:
    """The valid candidates, in order, get the rollout groups ``groups`` (one per valid candidate)."""
    groups_left = iter(groups)
    return [c.updated(episodes=tuple(next(groups_left))) if c.valid else c for c in candidates]


def drawn_candidates(tasks: list[Task], groups: list[list[Episode]], variations: int, **scoring) -> list[Candidate]:
    """The tasks a fixed-data curriculum drew this epoch, as scored candidates like the simulator's (``scoring``:
    :func:`genenv.reward.scored`'s values).

    Consecutive draws are grouped in batches of ``variations`` tasks, so that with ``p_hat_level=batch``
    their p_hat has the granularity of a simulator seed batch and band-hit rates compare across curricula."""
    return scored([Candidate(index // variations, task, "", [], [], task.text, task, tuple(group), source="drawn")
                   for index, (task, group) in enumerate(zip(tasks, groups))], **scoring)

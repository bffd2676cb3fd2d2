"""Warm start of both players before co-evolution, cached under ``~/.cache/genenv`` (or $GENENV_CACHE).

The agent is fine-tuned on the domain's seed tasks until its greedy success on fresh seed-distribution
tasks reaches ``agent.warmstart.min_success`` (never measured on the held-out set). The simulator is
fine-tuned on a broad corpus of tasks of every difficulty the domain can write. The cache key covers
everything that determines the weights, so runs with the same seed and settings share one checkpoint
(paired comparisons across curricula).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import time
import warnings
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_model, save_model

from genenv.algos.rwr import WeightedExample, supervised_finetune
from genenv.checkpoint import load_optimizers, save_optimizers
from genenv.config import ConfigError, RunConfig, TinyModelConfig, tiny_model, to_dict
from genenv.domains.base import Domain, Task, code_fingerprint
from genenv.io import atomic_write_json, build_then_swap, cache_entry_lock, cache_root, publish_dir
from genenv.models.policy import Policy
from genenv.models.registry import ModelNotAvailable, hub_id, hub_revision, resolve_model
from genenv.models.remote import RemoteSimulator
from genenv.models.tiny import build_tiny_policy, tokenizer_fingerprint
from genenv.progress import skip, warm_start_progress
from genenv.prompts import context_budget, fit_contexts
from genenv.provenance import source_fingerprint
from genenv.rollout import rollout
from genenv.seeding import stream_seed
from genenv.splits import data_split, training_seed_tasks

CACHE_VERSION = 3   # 3: the key names each field as today's config does (issue 94: no shims for older caches)

# The config fields that shape each player's warm start (dotted paths; a section stands for all its fields).
# The agent's: its seed tasks (seed, domain incl. heldout_per_level, which the seed set must avoid), its model,
# the SFT settings, how its prompts are built and trimmed (max_new_tokens, max_context_tokens), and the
# success check that decides whether another round is trained (generation_batch, success_threshold); device
# and threads, which change floating-point results. tests/test_warmstart.py fails when a new config field is
# neither listed here nor declared irrelevant there. "agent.tiny" / "env.tiny" hold the player's whole tiny model,
# the run's shape (tiny.*) with its window.
WARMSTART_FIELDS = {
    "agent": ("seed", "device", "threads", "dtype", "domain", "agent.model", "agent.tiny", "agent.warmstart",
              "agent.max_new_tokens", "agent.max_context_tokens", "agent.generation_batch",
              "curriculum_reward.success_threshold"),
    "env": ("seed", "device", "threads", "dtype", "domain", "env.model", "env.tiny", "env.warmstart"),
}


def warmstart_fields(role: str) -> tuple[str, ...]:
    """The config path of every field that shapes ``role``'s warm start (its name in the cache key)."""
    return WARMSTART_FIELDS[role]


def _config_value(cfg: RunConfig, dotted: str):
    if dotted in ("agent.tiny", "env.tiny"):   # the tiny model as a player's own section held it (issue 76)
        player = cfg.agent if dotted == "agent.tiny" else cfg.env
        return to_dict(tiny_model(cfg, player) if player.model == "tiny" else TinyModelConfig())
    value = cfg
    for part in dotted.split("."):
        value = getattr(value, part)
    return to_dict(value) if dataclasses.is_dataclass(value) else value


def _cache_key(role: str, cfg: RunConfig, player_cfg, domain: Domain) -> str:
    """The cache folder of a warm start: the fields in ``WARMSTART_FIELDS[role]`` and the domain's identity
    and code, as its ``warm_start_key`` (:class:`genenv.domains.base.WarmStartKey`) declares: its class's name (not
    its module: a moved file keeps its key), a fingerprint of what its modules compute (:func:`code_fingerprint`:
    editing the domain retrains, moving it does not), its ``format_version`` (for what the source cannot show), its
    options (for the agent, less the ``simulator_only_options``), the data it reads (:meth:`Domain.data_fingerprint`,
    in place of the ``location_options``, which only say where the data lives) and, for tiny models, its
    tokenizer."""
    cls, key = type(domain), domain.warm_start_key
    payload = {"v": CACHE_VERSION, "role": role, "format": key.format_version,
               "domain_class": cls.__qualname__, "domain_code": code_fingerprint(cls),
               **{path: _config_value(cfg, path) for path in warmstart_fields(role)}}
    options = payload["domain"]["options"]
    if role == "agent":  # options that shape only the simulator's corpus leave the agent's warm start alone
        options = {k: v for k, v in options.items() if k not in key.simulator_only_options}
    # where the data lives does not shape a warm start, the data does: the same files elsewhere share it
    payload["domain"]["options"] = {k: v for k, v in options.items() if k not in key.location_options}
    fingerprint = domain.data_fingerprint()
    if fingerprint is not None:
        payload["data"] = fingerprint
    if player_cfg.model == "tiny" and domain.alphabet is not None:
        payload["tokenizer"] = tokenizer_fingerprint(domain.alphabet, domain.tiny_words)
    if hub_id(player_cfg.model) is not None:   # a Hub id: the commit it resolves to (a branch moves), not downloaded
        payload["revision"] = hub_revision(player_cfg.model, ask_hub=True)
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()[:16]
    return f"{re.sub(r'[^A-Za-z0-9_-]+', '_', cfg.domain.name)}-{role}-{digest}"


def check_alphabet(domain: Domain, texts, what: str) -> None:
    """A tiny tokenizer encodes only the domain's ``alphabet``: characters outside it are an error naming them
    (they would silently become [UNK] tokens)."""
    alphabet = set(domain.alphabet or "")
    missing = sorted({char for text in texts for char in text} - alphabet)
    if missing:
        raise ConfigError(f"domain {domain.name!r}: its {what} use characters outside its alphabet, which a tiny "
                          f"model cannot encode: {''.join(missing)!r}; add them to the domain's alphabet")


def base_policy(role: str, cfg: RunConfig, player_cfg, domain: Domain) -> Policy:
    """The player's model before any training: a tiny model built for the domain's alphabet, or a real model
    loaded from its folder (``smollm2`` prepared once); a model the machine lacks is a ConfigError naming the field."""
    if player_cfg.model == "tiny":
        if domain.alphabet is None:
            raise ValueError(f"{role}.model: domain {domain.name!r} has no alphabet for a tiny model; "
                             "give a model folder path")
        return build_tiny_policy(tiny_model(cfg, player_cfg), domain.alphabet, seed=stream_seed(cfg.seed, role, "init"),
                                 device=cfg.device, words=domain.tiny_words)
    try:
        folder = resolve_model(player_cfg.model)
    except ModelNotAvailable as err:
        raise ConfigError(f"{role}.model: {err}") from None
    policy = Policy.load(folder, device=cfg.device, dtype=cfg.dtype)
    policy.set_gradient_checkpointing(cfg.gradient_checkpointing)  # the warm start's SFT
    return policy


def seed_success(domain: Domain, policy: Policy, cfg: RunConfig, n: int = 256) -> float:
    """Greedy success on fresh tasks from the seed distribution (a check set, not the held-out set)."""
    rng = np.random.default_rng(stream_seed(cfg.seed, "agent", "check"))
    tasks = domain.seed_tasks(rng, n)
    groups = rollout(domain, policy, tasks, group_size=1, max_new_tokens=domain.agent_max_new_tokens,
                     greedy=True, batch_size=cfg.agent.generation_batch,
                     max_context_tokens=cfg.agent.max_context_tokens)
    return float(np.mean([g[0].reward >= cfg.curriculum_reward.success_threshold for g in groups]))


def agent_examples(cfg: RunConfig, domain: Domain, policy: Policy, tasks) -> list[WeightedExample]:
    """SFT examples of the agent: each task's ``domain.warmstart_examples`` with its context built exactly as
    rollouts build it (chat template, a chat model's system prompt, multi-turn history trimmed to the budget)."""
    steps = [step for task in tasks for step in domain.warmstart_examples(task)]
    if cfg.agent.model == "tiny":
        check_alphabet(domain, (text for history, observation, target in steps
                                for text in (domain.agent_context(history, observation), target)), "agent prompts")
    budget = context_budget(policy, min(cfg.agent.max_new_tokens, domain.agent_max_new_tokens),
                            cfg.agent.max_context_tokens)
    _, prompt_ids = fit_contexts(domain, policy, [(history, observation) for history, observation, _ in steps],
                                 budget)  # (a single-turn step has no history to trim: it stays as it is)
    return [WeightedExample(ids, policy.encode_target(target)) for ids, (_, _, target) in zip(prompt_ids, steps)]


class WarmStartJournal:
    """A warm start's progress, so a process killed while fine-tuning (SmolLM2 on long plans: hours on a CPU)
    resumes at its last saved step with the same result as an uninterrupted warm start: the weights, the AdamW
    state, the torch and numpy random states, the loss curve so far, the round and the info of earlier rounds.
    Saved as one folder (``<cache folder>.partial``, swapped in whole) every ``every_s`` seconds
    (``checkpoint_every_s``), but at least 20 save-durations apart so saving costs at most 5% of the time (SmolLM2's
    weights and AdamW state are 1.5 GB); ``every_s`` 0 saves after every step. Also after a round's last step;
    removed once the warm start is in the cache."""

    def __init__(self, folder: Path, every_s: float):
        self.folder, self.every_s = folder.with_name(folder.name + ".partial"), every_s
        self._last = time.monotonic()
        self._save_seconds = 0.0

    def read(self) -> dict | None:
        for folder in (self.folder, self.folder.with_name(self.folder.name + ".old")):
            if (folder / "progress.json").exists():
                return {**json.loads((folder / "progress.json").read_text()), "folder": str(folder)}
        return None

    def restore(self, saved: dict, policy: Policy, optimizer, rng: np.random.Generator) -> None:
        """Put ``saved`` (from :meth:`read`) back into the policy, the round's optimizer and ``rng``."""
        folder = Path(saved["folder"])
        load_model(policy.model, str(folder / "weights.safetensors"))
        states = load_optimizers(folder / "optimizer.safetensors")
        optimizer.load_state_dict(states["sft"])
        torch.set_rng_state(states["torch_rng"])
        rng.bit_generator.state = saved["numpy_rng"]

    def maybe_save(self, policy: Policy, optimizer, rng: np.random.Generator, progress: dict,
                   force: bool = False) -> None:
        interval = 0.0 if self.every_s <= 0 else max(self.every_s, 20 * self._save_seconds)
        if not force and time.monotonic() - self._last < interval:
            return
        start = time.monotonic()

        def write(build: Path) -> None:
            save_model(policy.model, str(build / "weights.safetensors"))
            save_optimizers(build / "optimizer.safetensors", {"sft": optimizer}, torch.get_rng_state())
            (build / "progress.json").write_text(json.dumps({**progress, "numpy_rng": rng.bit_generator.state}))
        build_then_swap(self.folder, write, build_name=f".{self.folder.name}.build")
        self._last = time.monotonic()
        self._save_seconds = self._last - start

    def remove(self) -> None:
        for folder in (self.folder, self.folder.with_name(self.folder.name + ".old")):
            shutil.rmtree(folder, ignore_errors=True)


def _finetune(policy: Policy, examples, ws, rng, progress, journal: WarmStartJournal, saved: dict | None,
              round_index: int, info: dict) -> list[float]:
    """One round of the warm start's SFT, resumed from ``saved`` when it holds this round, journaled."""
    optimizer = torch.optim.AdamW(policy.model.parameters(), lr=ws.lr)
    curve = []
    if saved is not None and saved["round"] == round_index:
        journal.restore(saved, policy, optimizer, rng)
        curve = saved["curve"]
        skip(progress, len(curve))

    def after_step(opt, losses):
        journal.maybe_save(policy, opt, rng, {"round": round_index, "curve": losses, "info": info},
                           force=len(losses) == ws.steps)
    return supervised_finetune(policy, examples, steps=ws.steps, batch_size=ws.batch_size, lr=ws.lr, rng=rng,
                               progress=progress, optimizer=optimizer, curve=curve, after_step=after_step)


def agent_cache_folder(cfg: RunConfig, domain: Domain) -> Path:
    """Where :func:`warm_start_agent` caches the run's warm-started agent (a model folder)."""
    return _cache_folder("agent", cfg, cfg.agent, domain)


def _cache_folder(role: str, cfg: RunConfig, player_cfg, domain: Domain) -> Path:
    return cache_root() / "models" / _cache_key(role, cfg, player_cfg, domain)


def _cached_or_base(role: str, cfg: RunConfig, player_cfg, domain: Domain, folder: Path):
    """A player's warm start as both players look it up in its cache ``folder``: (the cached (policy, info) or None,
    and when there is none the base policy to fine-tune and the warm start's random stream)."""
    if (folder / "config.json").exists():
        return _load_cached(folder, cfg, cfg.dtype), None, None
    rng = np.random.default_rng(stream_seed(cfg.seed, role, "warmstart"))
    return None, base_policy(role, cfg, player_cfg, domain), rng


def warm_start_agent(cfg: RunConfig, domain: Domain, progress=None, log=print,
                     seeds: list[Task] | None = None) -> tuple[Policy, dict]:
    """The agent fine-tuned on the run's seed tasks (``seeds``, or drawn here: :func:`training_seed_tasks`).
    ``progress``: a display of its steps (none given: a plain line every 30 s of a long one). Built once across
    processes (:func:`genenv.io.cache_entry_lock`): another process that needs it waits, then loads it."""
    folder = agent_cache_folder(cfg, domain)
    with cache_entry_lock(folder):
        return _warm_start_agent(cfg, domain, folder, progress, log, seeds)


def _warm_start_agent(cfg: RunConfig, domain: Domain, folder: Path, progress, log,
                      seeds: list[Task] | None) -> tuple[Policy, dict]:
    cached, policy, rng = _cached_or_base("agent", cfg, cfg.agent, domain, folder)
    if cached is not None:
        return cached
    ws = cfg.agent.warmstart
    own = progress is None
    if own:
        progress = warm_start_progress(ws.steps, "warm start: agent", enabled=False)
    if seeds is None:
        seeds = training_seed_tasks(cfg, domain, data_split(cfg, domain))
    examples = agent_examples(cfg, domain, policy, seeds)
    info = {"rounds": 0, "seed_success": None, "loss": None}
    journal = WarmStartJournal(folder, cfg.checkpoint_every_s)
    saved = journal.read()
    first_round = 0
    if saved is not None:
        first_round, info = saved["round"], saved["info"]
        log(f"agent warm start: resuming round {first_round + 1} at step {len(saved['curve'])}")
    for round_index in range(first_round, ws.max_rounds):
        if ws.steps == 0:
            break
        if progress is not None and round_index > 0:  # another round: the bar grows with it, and says so
            progress.total = ws.steps * (round_index + 1)
        label = getattr(progress, "set_postfix_str", None)   # tqdm and PlainProgress have one
        if label is not None and ws.max_rounds > 1:
            label(f"round {round_index + 1} of at most {ws.max_rounds}")
        if round_index == first_round:
            skip(progress, ws.steps * first_round)   # the rounds a resumed warm start had finished
        curve = _finetune(policy, examples, ws, rng, progress, journal, saved, round_index, dict(info))
        info.update(rounds=round_index + 1, loss=float(np.mean(curve[-20:])))
        info["seed_success"] = seed_success(domain, policy, cfg, n=ws.check_tasks)
        log(f"agent warm start round {round_index + 1}: loss {info['loss']:.4f}, "
            f"seed-distribution success {info['seed_success']:.3f}")
        if info["seed_success"] >= ws.min_success:
            break
    else:
        warnings.warn(f"agent warm start ended below agent.warmstart.min_success ({info['seed_success']:.3f} < "
                      f"{ws.min_success}); raise agent.warmstart.steps or max_rounds", RuntimeWarning, stacklevel=2)
    if own:
        progress.close()
    cached = _save_cached(policy, folder, info, cfg, cfg.dtype)
    journal.remove()
    return cached


def warm_start_simulator(cfg: RunConfig, domain: Domain, progress=None, log=print) -> tuple[Policy, dict]:
    """The simulator fine-tuned on the domain's corpus of (seed, its stats) -> variation; a frozen endpoint's client
    with ``env.backend=openai``. Built once across processes, as the agent's is."""
    if cfg.env.backend == "openai":   # a frozen endpoint writes the tasks: nothing to warm-start
        remote = RemoteSimulator.from_config(cfg.env.openai)
        log(f"simulator: {cfg.env.openai.model or '(no model name)'} at {cfg.env.openai.base_url} (frozen)")
        return remote, {"rounds": 0, "loss": None, **remote.describe()}
    folder = _cache_folder("env", cfg, cfg.env, domain)
    with cache_entry_lock(folder):
        return _warm_start_simulator(cfg, domain, folder, progress, log)


def _warm_start_simulator(cfg: RunConfig, domain: Domain, folder: Path, progress, log) -> tuple[Policy, dict]:
    cached, policy, rng = _cached_or_base("env", cfg, cfg.env, domain, folder)
    if cached is not None:
        return cached
    ws = cfg.env.warmstart
    own = progress is None
    if own:   # (a plain line every 30 s of a long one)
        progress = warm_start_progress(ws.steps, "warm start: simulator", enabled=False)
    corpus = domain.simulator_corpus(np.random.default_rng(stream_seed(cfg.seed, "env", "corpus")), ws.corpus_size)
    if cfg.env.model == "tiny":
        check_alphabet(domain, (text for seed, stats, task in corpus
                                for text in (domain.simulator_prompt(seed, stats), task.text)), "simulator prompts")
    examples = [WeightedExample(policy.encode_prompt(domain.simulator_prompt(seed, stats)),
                                policy.encode_target(task.text)) for seed, stats, task in corpus]
    info = {"rounds": 0, "loss": None}
    journal = WarmStartJournal(folder, cfg.checkpoint_every_s)
    if ws.steps > 0:
        saved = journal.read()
        if saved is not None:
            log(f"simulator warm start: resuming at step {len(saved['curve'])}")
        curve = _finetune(policy, examples, ws, rng, progress, journal, saved, 0, dict(info))
        info.update(rounds=1, loss=float(np.mean(curve[-20:])))
        log(f"simulator warm start: loss {info['loss']:.4f}")
    if own:
        progress.close()
    cached = _save_cached(policy, folder, info, cfg, cfg.dtype)
    journal.remove()
    return cached


def _evaluation_key(cfg: RunConfig, domain: Domain, sets: dict[str, list[Task]]) -> str:
    """What decides the warm-started agent's evaluation: its warm start's cache key (its weights), every setting
    of the agent (decoding, sampler, batch), how the run computes (threads, device, autocast, prefix-cached sampling,
    llama.cpp's settings), the success threshold, the tasks evaluated (text, prompt, answer, level, meta) and
    genenv's source (the rollout and scoring code)."""
    tasks = {name: [task.to_json() for task in tasks] for name, tasks in sets.items()}
    payload = {"v": 1, "warm_start": _cache_key("agent", cfg, cfg.agent, domain), "agent": to_dict(cfg.agent),
               "threads": cfg.threads, "device": cfg.device, "autocast": cfg.autocast,
               "prefix_cached_sampling": cfg.prefix_cached_sampling, "llamacpp": to_dict(cfg.llamacpp),
               "success_threshold": cfg.curriculum_reward.success_threshold,
               "tasks": hashlib.sha256(json.dumps(tasks, sort_keys=True, default=repr).encode()).hexdigest(),
               "code": source_fingerprint()}
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=repr).encode()).hexdigest()[:16]


def warm_start_evaluation(cfg: RunConfig, domain: Domain, sets: dict[str, list[Task]], evaluate) -> tuple[dict, bool]:
    """The warm-started agent's evaluation on ``sets`` (``evaluate()`` computes it), cached under
    ``<cache>/evaluations/``: every arm of a comparison starts from the same agent, so a seed's warm start is
    evaluated once (for SmolLM2 on API-Bank's 389 held-out items, 15-25 min saved per further arm). The key is
    :func:`_evaluation_key`; an unreadable entry is evaluated again. Returns (the evaluation, whether cached)."""
    path = cache_root() / "evaluations" / f"{cfg.domain.name}-{_evaluation_key(cfg, domain, sets)}.json"
    if path.exists():
        try:
            return json.loads(path.read_text()), True
        except (OSError, ValueError):
            pass
    result = evaluate()
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, result)
    return result, False


def _load_cached(folder: Path, cfg: RunConfig, dtype: str = "float32") -> tuple[Policy, dict]:
    return Policy.load(folder, device=cfg.device, dtype=dtype), json.loads((folder / "warmstart.json").read_text())


def _save_cached(policy: Policy, folder: Path, info: dict, cfg: RunConfig, dtype: str) -> tuple[Policy, dict]:
    """Save a fresh warm start to the cache and continue from the saved copy, loaded back: a run that trained
    its warm start and one that found it cached then start from the same bytes, loaded the same way."""
    def write(build: Path) -> None:
        policy.save(build)
        (build / "warmstart.json").write_text(json.dumps(info))
    publish_dir(folder, write)
    return _load_cached(folder, cfg, dtype)

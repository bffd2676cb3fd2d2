"""What a run carries from epoch to epoch: the two players (policies, their KL references, optimisers) and the
run's state (the pools, the GRPO buffer, counters). :mod:`genenv.checkpoint` saves and loads them.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field

import torch

from genenv.algos.grpo import PolicySample
from genenv.config import ConfigError, RunConfig
from genenv.errors import SamplerNotAvailable
from genenv.models.policy import Policy
from genenv.models.remote import RemoteSimulator
from genenv.models.samplers import build_sampler
from genenv.models.vllm_sampler import GPU_MEMORY_FOR_ENGINES
from genenv.pool import EnvPool, TaskPool
from genenv.seeding import phase_seed


@dataclass
class Players:
    """The two policies, their frozen initial copies (KL references), their optimisers, and the simulator's task
    shape (``env.constrained``: a :class:`genenv.constrained.TokenConstraint` the simulator samples under and its
    updates and KL terms score under, passed to each call; None: unconstrained)."""
    agent: Policy
    agent_ref: Policy
    env: Policy
    env_ref: Policy
    agent_opt: torch.optim.Optimizer
    env_opt: torch.optim.Optimizer | None   # None: a frozen remote simulator (env.backend=openai)
    env_constraint: object | None = None

    def model_seconds(self) -> float:
        return sum(p.model_seconds for p in (self.agent, self.agent_ref, self.env, self.env_ref))


@dataclass
class RunState:
    epoch: int = 0                         # next epoch to run
    task_pool: TaskPool = field(default_factory=TaskPool)
    env_pool: EnvPool = field(default_factory=EnvPool)
    grpo_buffer: list = field(default_factory=list)   # informative groups waiting for an update
    last_p_hat_mean: float | None = None
    total_rollouts: int = 0
    total_agent_updates: int = 0
    total_generated: int = 0
    nonfinite_skips: int = 0
    # bytes of each pool's append-only log that belong to the last checkpoint written or resumed from
    pool_log_bytes: dict = field(default_factory=lambda: {"task_pool": 0, "env_pool": 0})

    def to_json(self) -> dict:
        """Everything but the pools, which live in append-only logs next to the checkpoint."""
        return {"epoch": self.epoch, "grpo_buffer": [[s.__dict__ for s in g] for g in self.grpo_buffer],
                "last_p_hat_mean": self.last_p_hat_mean, "total_rollouts": self.total_rollouts,
                "total_agent_updates": self.total_agent_updates, "total_generated": self.total_generated,
                "nonfinite_skips": self.nonfinite_skips, "pool_log_bytes": dict(self.pool_log_bytes)}

    @classmethod
    def from_json(cls, data: dict) -> RunState:
        state = cls(epoch=data["epoch"], grpo_buffer=[[PolicySample(**s) for s in g] for g in data["grpo_buffer"]])
        for key in ("last_p_hat_mean", "total_rollouts", "total_agent_updates", "total_generated",
                    "nonfinite_skips", "pool_log_bytes"):
            setattr(state, key, data[key])
        return state


def player_sampler(cfg: RunConfig, name: str, policy: Policy, player):
    """Player ``name``'s ``sampler`` (:func:`genenv.models.samplers.build_sampler`, the factory evaluations use too;
    None for transformers), built and given the policy's weights here so a failure is found at the start, or with
    ``engine.workers`` > 0 built in each Ray actor for vLLM (llama.cpp runs in the run's process). llama.cpp decodes
    ``max(group_size, variations)`` sequences side by side; on a GPU the run's vLLM engines share
    :data:`~genenv.models.vllm_sampler.GPU_MEMORY_FOR_ENGINES` of its memory equally. The preflight refused a sampler
    that is missing or cannot decode the model; what the files still refuse is a ConfigError naming the field."""
    engines = sum(p.sampler == "vllm" for p in (cfg.agent, cfg.env))
    try:
        sampler = build_sampler(player.sampler, policy, player.model, device=cfg.device, dtype=cfg.dtype,
                                threads=cfg.threads, llamacpp_dtype=cfg.llamacpp.dtype, context=cfg.llamacpp.context,
                                parallel=max(cfg.agent.group_size, cfg.env.variations),
                                prefix_caching=cfg.prefix_cached_sampling,
                                gpu_memory_utilization=GPU_MEMORY_FOR_ENGINES / max(engines, 1))
    except (SamplerNotAvailable, ValueError) as error:
        raise ConfigError(f"{name}.sampler: {str(error).splitlines()[0]}; or set {name}.sampler=transformers") \
            from None
    if sampler is not None and (player.sampler == "llama.cpp" or cfg.engine.workers == 0):
        sampler.sync()
    return sampler


def close_samplers(players: Players) -> None:
    """Free each player's llama.cpp or vLLM sampler, and let the collector see again what the run froze
    (``gc.freeze`` after each epoch: pools, caches and models live for the whole run), so that a process running
    several runs (a test session, a notebook) gets their memory back once they are gone."""
    for policy in (players.agent, players.env):
        sampler = getattr(policy, "sampler", None)
        if sampler is not None and hasattr(sampler, "close"):
            sampler.close()
            policy.sampler = None
    gc.unfreeze()
    gc.collect()


def samplers(cfg: RunConfig) -> dict[str, str]:
    """What decodes each player's generations (``agent``, ``env``), in words, from the config (the preflight has
    refused a decoder that cannot decode its model): a run logs it first and records it in config.yaml."""
    out = {}
    for name, player in (("agent", cfg.agent), ("env", cfg.env)):
        if name == "env" and cfg.env.backend == "openai":
            out[name] = f"the endpoint {cfg.env.openai.base_url} serving {cfg.env.openai.model!r} (env.backend=openai)"
        elif player.sampler == "vllm":
            out[name] = f"vLLM on {cfg.device} ({name}.sampler=vllm)"
        elif player.sampler == "llama.cpp":
            out[name] = f"llama.cpp ({name}.sampler=llama.cpp)"
        else:
            out[name] = f"transformers on {cfg.device} ({name}.sampler=transformers)"
    return out


def samplers_line(found: dict[str, str]) -> str:
    return f"samplers: agent: {found['agent']}; simulator: {found['env']}"


def simulator_constraint(cfg: RunConfig, domain, env: Policy):
    """``env.constrained``: the domain's task shape compiled for the simulator's tokenizer
    (:class:`genenv.constrained.TokenConstraint`), its budget the longest task the simulator writes (so a text
    closes before it is cut off), or None (the preflight refuses ``env.constrained`` on a domain with no shape)."""
    if not cfg.env.constrained or isinstance(env, RemoteSimulator):
        return None
    from genenv.constrained import TokenConstraint  # noqa: PLC0415 (llguidance loads only when asked for)
    from genenv.generation import simulator_sampling  # noqa: PLC0415
    shape = domain.task_shape()
    vocab_size = int(env.model.get_output_embeddings().weight.shape[0])
    budget = simulator_sampling(cfg, domain)["max_new_tokens"]
    return TokenConstraint(shape, env.tokenizer, vocab_size, env.eos_token_id, domain.name, budget=budget)


def make_players(cfg: RunConfig, agent: Policy, env: Policy, domain=None) -> Players:
    """From the warm-started players (or a resumed run's initial ones): their KL references, optional LoRA
    adapters, and the optimisers (:func:`prepare_player` for each). With ``env.constrained`` (``domain`` given), the
    domain's task shape compiled for the simulator (:func:`simulator_constraint`), which the simulator samples
    under and its updates score under."""
    constraint = simulator_constraint(cfg, domain, env) if domain is not None else None
    agent_ref, agent_opt = prepare_player(cfg, "agent", agent)
    env_ref, env_opt = prepare_player(cfg, "env", env)
    return Players(agent, agent_ref, env, env_ref, agent_opt, env_opt, constraint)


def prepare_player(cfg: RunConfig, name: str, policy) -> tuple:
    """One player (``name``: "agent" or "env") set up as its config section says, LoRA adapters (``lora_rank``), the
    llama.cpp or vLLM sampler, and as the run's ``gradient_checkpointing``, ``prefix_cached_sampling`` and ``autocast``
    say (bfloat16 autocast on both sides of the KL); returns (its KL reference, its optimiser). A fully fine-tuned
    player's reference is a frozen copy of it; a LoRA player's is the same model with its adapters switched off (its
    base weights never change: no copy needed). A frozen endpoint (``env.backend=openai``) is its own reference and
    has no optimiser. genenv's loop and the TRL integration's simulator both come here."""
    if isinstance(policy, RemoteSimulator):
        return policy, None
    player = cfg.agent if name == "agent" else cfg.env
    if player.lora_rank > 0:
        if not policy.has_lora:
            policy.apply_lora(player.lora_rank, seed=phase_seed(cfg.seed, -1, f"lora_{name}"))
        reference = policy.base_view()
    else:
        reference = policy.frozen_copy()
    policy.set_gradient_checkpointing(cfg.gradient_checkpointing)
    policy.prefill_once = cfg.prefix_cached_sampling
    if policy.sampler is None:
        policy.sampler = player_sampler(cfg, name, policy, player)
    policy.autocast_bf16 = reference.autocast_bf16 = cfg.autocast == "bfloat16"   # the KL's two sides
    optimiser = torch.optim.AdamW(policy.trainable_parameters(), lr=player.lr, weight_decay=player.weight_decay)
    return reference, optimiser

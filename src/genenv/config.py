"""Every knob of a run, as dataclasses with documented defaults.

Configs come from presets (``genenv/configs/*.yaml``, package data) and YAML files, plus dotted command-line overrides
(``agent.lr=1e-4 epochs=3``). Anything wrong raises :class:`ConfigError` with one line that names the
field and what is allowed; the CLI turns it into exit status 2.
"""

from __future__ import annotations

import dataclasses
import difflib
import json
import typing
import warnings
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from genenv.errors import ConfigError


def knob(default: Any, help: str, *, choices: tuple | None = None, lo: float | None = None,
         hi: float | None = None):
    """A dataclass field with its documentation and allowed values."""
    meta = {"help": help, "choices": choices, "lo": lo, "hi": hi}
    if isinstance(default, (list, dict)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


def section(cls: type, help: str, *, of: str | tuple[str, ...], when: str):
    """A dataclass field holding the knobs of one component, read only where the sibling field ``of`` is ``when``
    (``agent.tiny`` where ``agent.model=tiny``), or where any of several dotted fields ``of`` (a tuple, from the
    config's top) is (``llamacpp`` where ``agent.sampler`` or ``env.sampler`` is ``llama.cpp``). ``genenv config
    --describe`` lists them under the component, apart from the main knobs; setting one while its component is not
    selected is an error naming it."""
    return field(default_factory=cls, metadata={"help": help, "component": (of, when)})


@dataclass
class TinyShapeConfig:
    """The shape of the Llama-architecture models built from scratch (the embedded default; no download), one for
    both players, as the paper's two policies start from one model.

    The default (64 wide, 2 layers, ~133k parameters) is the size at which warm-start on levels 1-2 of the
    addition domain leaves ~10% sampled success on level 3; a 0.53M model (128 wide) memorised "digits
    past the second are zero" and gave GRPO no signal above level 2 (0.000 success, measured).
    """
    hidden_size: int = knob(64, "width of the residual stream", lo=8)
    intermediate_size: int = knob(256, "MLP width", lo=8)
    num_layers: int = knob(2, "transformer blocks", lo=1)
    num_heads: int = knob(4, "attention heads (must divide hidden_size)", lo=1)


@dataclass
class TinyWindowConfig:
    """A player's tiny model's window: its prompts (the agent's, the simulator's) are not the same length."""
    max_positions: int = knob(64, "longest prompt + response in tokens", lo=8)


@dataclass
class TinyModelConfig(TinyShapeConfig, TinyWindowConfig):
    """One tiny model, whole: the run's shape and a player's window (:func:`tiny_model`)."""


@dataclass
class LlamaCppConfig:
    """``sampler=llama.cpp``: how llama.cpp decodes (docs/llamacpp.md)."""
    dtype: str = knob("f16", "the weights it decodes with: f32 (the trainer's, KV cache f32 too), f16 or bf16 (half "
                      "the memory traffic), q8_0 (8-bit blocks, a quarter; greedy answers can differ where two tokens "
                      "are within rounding)", choices=("f32", "f16", "bf16", "q8_0"))
    context: int = knob(4096, "KV cells, a prompt plus its samples' tokens (a prompt's samples decode side by side as "
                        "many as fit)", lo=64)


@dataclass
class WarmStartConfig:
    """Supervised warm start before co-evolution, so that neither player starts from noise."""
    steps: int = knob(1000, "SFT steps per round", lo=0)
    batch_size: int = knob(64, "sequences per SFT step", lo=1)
    lr: float = knob(2e-3, "AdamW learning rate", lo=0.0)


@dataclass
class AgentWarmStartConfig(WarmStartConfig):
    """The agent's warm start: SFT on the seed tasks, in rounds until it solves enough of them."""
    min_success: float = knob(0.9, "required greedy success on fresh seed-distribution tasks (never the held-out "
                              "set); below it another round is trained", lo=0.0, hi=1.0)
    max_rounds: int = knob(3, "most SFT rounds before giving up with a warning", lo=1)
    check_tasks: int = knob(256, "seed-distribution tasks in the min_success check (greedy)", lo=1)


@dataclass
class SimulatorWarmStartConfig(WarmStartConfig):
    """The simulator's warm start: SFT on a corpus of tasks of every difficulty the domain writes."""
    corpus_size: int = knob(20000, "examples written for the warm-start corpus", lo=1)


@dataclass
class PlayerConfig:
    """What both players (agent and simulator) have: a model, its warm start and how it runs (how both compute,
    dtype, autocast, ..., are the run's: :class:`RunConfig`)."""
    model: str = knob("tiny", "'tiny' (built from `tiny`), a packaged model name (smollm2), a Hugging Face Hub id "
                      "(org/name[@revision]: from the local Hugging Face cache, else downloaded) or a local model "
                      "folder")
    tiny: TinyWindowConfig = section(TinyWindowConfig, "the window of the model built from scratch", of="model",
                                     when="tiny")
    warmstart: WarmStartConfig = field(default_factory=WarmStartConfig)
    lora_rank: int = knob(0, "co-evolution updates train LoRA adapters of this rank on every linear layer "
                          "(peft) instead of all weights; 0 = full fine-tuning", lo=0)
    generation_batch: int = knob(512, "sequences per generate() call", lo=1)
    sampler: str = knob("transformers", "where generations are decoded: 'transformers' (the trainer's model); 'vllm' "
                       "(a vLLM engine in the run's process: the sampler for GPUs; a real model with heads 32 wide or "
                       "more on CPU; docs/vllm.md); 'llama.cpp' (llama-cpp-python, built by "
                       "`make install`: a sampler for CPUs; smollm2 or a folder of Llama, Mistral, Qwen2/3, Gemma 3 "
                       "or Phi-3 with a BPE tokenizer; a model a decoder cannot decode is refused at the start; "
                       "its settings llamacpp.*: docs/llamacpp.md). Either sampler gets the weights after every update "
                       "that changed them and is reproducible on one machine and build, not bit for bit across them",
                       choices=("transformers", "vllm", "llama.cpp"))


@dataclass
class AgentConfig(PlayerConfig):
    """The agent policy, trained with GRPO."""
    warmstart: AgentWarmStartConfig = field(default_factory=AgentWarmStartConfig)
    lr: float = knob(1e-3, "AdamW learning rate of the agent's GRPO updates", lo=0.0)
    weight_decay: float = knob(0.0, "AdamW weight decay of the agent's GRPO updates", lo=0.0)
    warmup_steps: int = knob(0, "GRPO steps over which the learning rate rises linearly to lr (0 = none); "
                             "AdamW's first steps move every weight by about lr whatever the gradient's size",
                             lo=0)
    group_size: int = knob(8, "rollouts per task (GRPO group)", lo=2)
    temperature: float = knob(1.0, "sampling temperature for rollouts", lo=0.0)
    max_new_tokens: int = knob(16, "longest response per turn", lo=1)
    max_context_tokens: int = knob(0, "multi-turn domains: the oldest turns of the history are dropped so the "
                                   "prompt fits this many tokens (0 = the model's window minus max_new_tokens)",
                                   lo=0)
    clip_eps: float = knob(0.2, "PPO/GRPO ratio clip", lo=0.0, hi=1.0)
    advantage_scaling: str = knob("population", "a group's advantages (r - mean) / (std + eps): 'population' "
                                  "(std with ddof 0, eps 1e-6); 'trl' (the sample std, ddof 1, eps 1e-4: TRL's "
                                  "GRPOTrainer, scale_rewards='group')", choices=("population", "trl"))
    kl_coef: float = knob(0.001, "k3 KL penalty to the frozen initial agent", lo=0.0)
    entropy_coef: float = knob(0.0, "entropy bonus (logged either way)", lo=0.0)
    replay_fraction: float = knob(0.5, "extra tasks re-rolled from the training pool, as a fraction of the "
                                  "fresh generated tasks", lo=0.0)
    min_informative_groups: int = knob(16, "dynamic sampling: update only once this many non-zero-variance "
                                       "groups are buffered (1 = update every epoch)", lo=1)
    minibatch_groups: int = knob(32, "groups per gradient step", lo=1)
    update_epochs: int = knob(1, "passes over the buffered groups per update", lo=1)
    micro_batch: int = knob(0, "sequences per forward/backward inside one GRPO step, the gradient accumulated "
                            "over them (the same step up to floating-point summation order, less activation "
                            "memory); 0 = the whole minibatch at once", lo=0)
    shared_prefix: bool = knob(False, "GRPO encodes each group's common prompt once and its responses against "
                               "it (Prefix Grouper): the same loss and gradients up to floating-point summation "
                               "order; pays where prompts are long (real benchmarks), docs/speed.md")


@dataclass
class OpenAIConfig:
    """env.backend=openai: an OpenAI-compatible endpoint writes the tasks (a frozen simulator, never trained). Its API
    key is read from ``OPENAI_API_KEY``, the client's own variable (never written to the run folder; a local server
    needs none)."""
    base_url: str = knob("http://127.0.0.1:8080/v1", "the endpoint's base URL (vLLM, SGLang, llama.cpp's server, a "
                         "hosted API)")
    model: str = knob("", "the model name the endpoint serves")
    api: str = knob("chat", "chat: /chat/completions with the simulator prompt as one user message; completions: "
                    "/completions with the prompt as text", choices=("chat", "completions"))
    concurrency: int = knob(4, "requests in flight at once", lo=1)
    timeout_s: float = knob(60.0, "seconds before a request is abandoned (then retried)", lo=0.1)
    retries: int = knob(2, "retries of a failed request (the client's backoff) before it counts as an invalid "
                        "generation", lo=0)


@dataclass
class PgConfig:
    """``env.update=pg`` (beyond the paper): policy gradient on R_env rescaled within each seed's variations, and
    the gate that says which valid tasks may earn it. An invalid generation earns 0, what a useless valid task
    earns."""
    steps: int = knob(4, "optimiser steps per epoch (fewer when the max-KL cap stops the update)", lo=0)
    minibatch_groups: int = knob(16, "seed groups per step", lo=1)
    clip_eps: float = knob(0.2, "ratio clip", lo=0.0, hi=1.0)
    gate: str = knob("none", "which valid tasks may earn their reward (a registered gate, genenv.signals.GATES); the "
                     "others earn 0, what a useless valid task earns. 'none': every valid task (the paper's "
                     "information); 'levels': only a task on a level the agent has not mastered (recent mean success "
                     "below gate_mastered over the last gate_window rolled-out tasks of that level; a level never "
                     "rolled out is open; the hardest level when all are mastered). 'levels' uses the domain's "
                     "difficulty levels, the oracle's information, and needs a domain that declares them ordered")
    gate_mastered: float = knob(0.75, "gate=levels: a level with recent success at least this is mastered and "
                                "does not pay", lo=0.0, hi=1.0)
    gate_window: int = knob(64, "gate=levels: a level's recent success is the mean last p_hat of its latest this "
                            "many rolled-out pool tasks", lo=1)


@dataclass
class RwrConfig:
    """``env.update=rwr`` (the paper): reward-weighted regression toward the in-band generations, weights
    exp(curriculum_reward.lam R_env)."""
    steps: int = knob(4, "optimiser steps per epoch (minibatches drawn in passes over the weighted set; fewer "
                      "when the max-KL cap stops the update)", lo=0)
    batch: int = knob(64, "sequences per step", lo=1)
    pool_replay: float = knob(0.0, "share of each batch drawn from earlier epochs' weighted sets (D_env)", lo=0.0,
                              hi=1.0)


@dataclass
class LearntLevelsConfig:
    """``env.seed_draw=learnt_frontier``: the pool's tasks ranked by the success a ridge regression on their text's
    character n-grams predicts, fit on the last p_hat of recently rolled-out ones (genenv.text_difficulty); the
    values chosen on dev seeds in issue 37."""
    bins: int = knob(4, "equal groups of predicted success standing in for levels", lo=1)
    window: int = knob(1024, "the most recently added rolled-out pool tasks the difficulty model is fit on", lo=16)


@dataclass
class EnvConfig(PlayerConfig):
    """The environment simulator, trained by policy gradient on R_env (``update: pg``) or by the paper's
    reward-weighted regression (``update: rwr``)."""
    warmstart: SimulatorWarmStartConfig = field(default_factory=SimulatorWarmStartConfig)
    backend: str = knob("local", "local: the simulator is env.model, trained by the curriculum; openai: an "
                        "OpenAI-compatible endpoint (env.openai) writes the tasks, frozen: for curricula that do not "
                        "train the simulator (random is the authors' setup; docs/frozen-simulator.md)",
                        choices=("local", "openai"))
    openai: OpenAIConfig = section(OpenAIConfig, "the endpoint that writes the tasks", of="backend", when="openai")
    variations: int = knob(4, "tasks written per seed task (n in the paper)", lo=1)
    seed_draw: str = knob("uniform", "how each epoch's seed tasks (the simulator's prompts) are drawn from the "
                          "training pool (a registered seed draw, genenv.signals.SEED_DRAWS): 'uniform'; "
                          "'learnt_frontier' (no domain levels: each seed from the group of pool tasks the oracle's "
                          "frontier rule picks, the groups cut from the success their text predicts, env.learnt_levels;"
                          " the measured level-free alternative: docs/results.md); or 'frontier' (the same over the "
                          "domain's levels, with baseline.oracle_window and baseline.oracle_exploration: the control "
                          "that gives an untrained simulator the level gate's information)")
    learnt_levels: LearntLevelsConfig = section(LearntLevelsConfig, "the levels the pool learns",
                                                of="seed_draw", when="learnt_frontier")
    temperature: float = knob(1.0, "sampling temperature for task generation", lo=0.0)
    max_new_tokens: int = knob(32, "longest generated task", lo=1)
    constrained: bool = knob(False, "sample only text of the domain's declared task shape (Domain.task_shape: a "
                             "JSON schema or a regex, compiled by llguidance: genenv.constrained): each step's tokens "
                             "outside it are masked, and the updates and KL terms score the stored tokens under the "
                             "same masks. A task in the shape the domain rejects is still invalid with its reason")
    lr: float = knob(1e-4, "AdamW learning rate of the simulator's updates (either rule)", lo=0.0)
    weight_decay: float = knob(0.01, "AdamW weight decay of the simulator's updates", lo=0.0)
    update: str = knob("pg", "how the simulator learns: 'pg' (beyond the paper: policy gradient on R_env rescaled "
                       "to [0, 1] within each seed's variations; its knobs env.pg.*) or 'rwr' (the paper's "
                       "reward-weighted regression on in-band tasks; its knobs env.rwr.*). Setting a knob of the rule "
                       "not selected is a configuration error", choices=("rwr", "pg"))
    pg: PgConfig = field(default_factory=PgConfig)
    rwr: RwrConfig = field(default_factory=RwrConfig)
    kl_coef: float = knob(0.05, "KL penalty to the initial simulator (eta)", lo=0.0)
    max_kl: float = knob(0.5, "cap on KL(simulator before the update || after it) for one epoch's update, "
                         "estimated after every step on the update's samples (k3, the samples' own side): a step "
                         "past it is undone and ends the update (0 = no cap)", lo=0.0)


@dataclass
class CurriculumConfig:
    """The alpha-curriculum reward R_env = exp(-beta (p_hat - alpha)^2) and its filter."""
    alpha: float = knob(0.5, "target success rate", lo=0.0, hi=1.0)
    beta: float = knob(2.0, "sharpness of the reward (paper's config: 2.0)", lo=0.0)
    k_min: float = knob(0.25, "the band |p_hat - alpha| <= k_min (paper: 0.1 on batch p_hat; 0.25 per task here): "
                        "env.update=rwr learns only from tasks in it, band_hit_rate reports it under any rule, and "
                        "alpha + k_min is the mastery threshold of the oracle's frontier rule and of "
                        "env.seed_draw=frontier/learnt_frontier (the pg gate has its own, env.pg.gate_mastered)",
                        lo=0.0)
    lam: float = knob(1.0, "RWR temperature: weight = exp(lam * R_env)", lo=0.0)
    success_threshold: float = knob(1.0, "a rollout succeeds when its reward >= this", lo=0.0, hi=1.0)
    p_hat_level: str = knob("task", "'task': each task's p_hat from its own rollouts; 'batch': one p_hat over a "
                            "seed's variations (the paper's)", choices=("batch", "task"))


@dataclass
class BaselineConfig:
    """The fixed-data curricula (paper's ablation): how their training set is built once before training."""
    static_variations: int = knob(5, "static: variations written per seed task, once (paper: 5)", lo=1)
    offline_multiplier: float = knob(1.8, "offline: size of the fixed set as a multiple of the seed set, seeds "
                                     "included (paper's Gemini rows: 1.8 and 3.3)", lo=1.0)
    offline_generator: str = knob("domain", "offline: who writes the augmentation: 'domain' (a strong frozen "
                                  "teacher that writes valid tasks of every level, the Gemini analogue) or the "
                                  "warm-started 'simulator'", choices=("domain", "simulator"))
    learnability_floor: float = knob(0.01, "learnability: sampling weight floor under p(1-p), so solved and "
                                     "unsolved tasks are still revisited", lo=0.0, hi=0.25)
    oracle_exploration: float = knob(0.1, "oracle: chance of a uniform level instead of the frontier one (the "
                                     "easiest level whose mean recent success is below alpha + k_min, the hardest "
                                     "when all are)", lo=0.0, hi=1.0)
    oracle_window: int = knob(64, "oracle: a level's mean recent success is over the last p_hat of its this-many "
                              "most recent pool tasks", lo=1)


@dataclass
class DomainConfig:
    name: str = knob("addition", "registered domain (see `genenv domains`)")
    num_seed_tasks: int = knob(4000, "size of the base training set", lo=1)
    heldout_per_level: int = knob(100, "held-out tasks per difficulty level", lo=1)
    options: dict = knob({}, "domain-specific options passed to the domain's constructor")


@dataclass
class EngineConfig:
    """Where the generate and rollout phases run (docs/scaling.md): in the run's process, or in Ray actors."""
    workers: int = knob(0, "Ray actors that write tasks and run rollouts, each with replicas of both players and "
                        "`threads` CPUs reserved (needs `pip install 'genenv-coevolve[ray]'`); the learner stays in "
                        "this process. 0 = everything here. The same seed gives the same metrics for any number. They "
                        "run on a local Ray, or on the cluster Ray's own RAY_ADDRESS names ('auto', or what `ray start "
                        "--head` prints)", lo=0)
    gpus_per_worker: float = knob(0.0, "GPUs Ray reserves per actor (with device=cuda, generation on the GPU)",
                                  lo=0.0)
    max_restarts: int = knob(3, "dead actors replaced (their shard redone) in one run before it stops", lo=0)


@dataclass
class RunConfig:
    """A whole run (docs/configuration.md: every knob, its default and why)."""
    name: str = knob("default", "the run's name: its folder is runs/<name> unless `genenv run --out` gives one")
    seed: int = knob(0, "fixes every random stream", lo=0)
    epochs: int = knob(200, "co-evolution epochs", lo=0)
    seeds_per_epoch: int = knob(16, "seed tasks given to the simulator each epoch", lo=1)
    curriculum: str = knob("genenv", "genenv: full method; random: simulator generates, never trained; "
                           "static: 5 variations per seed written once; offline: a fixed augmentation of "
                           "baseline.offline_multiplier x the seed set; learnability: the static set sampled "
                           "by p(1-p), no generation; oracle: the domain's own generator writes each batch at the "
                           "level its frontier rule picks (the upper reference; uses the domain's levels). Every "
                           "curriculum gets the same agent rollouts per epoch (one class each in genenv.curricula)")
    eval_every: int = knob(10, "held-out evaluation every N epochs (and after the last)", lo=1)
    threads: int = knob(2, "torch CPU threads", lo=1)
    device: str = knob("cpu", "torch device", choices=("cpu", "cuda"))
    grad_clip: float = knob(1.0, "gradient-norm clip of every update, both players' (0 = none)", lo=0.0)
    dtype: str = knob("float32", "weights dtype of both players' real models (bfloat16 halves memory; use on a GPU)",
                      choices=("float32", "bfloat16"))
    autocast: str = knob("none", "bfloat16: both players' forward passes (sampling, GRPO/RWR log-probs) under torch's "
                         "bf16 autocast, weights, optimiser state and losses in float32 (faster where the CPU has "
                         "bf16 matrix units; changes the numbers: benchmarks/real_model_speed.py --part bf16)",
                         choices=("none", "bfloat16"))
    gradient_checkpointing: bool = knob(False, "recompute each layer's activations in the backward pass instead of "
                                        "keeping them (both players): less memory for long prompts, one more "
                                        "forward pass per update, the same gradients bit for bit")
    prefix_cached_sampling: bool = knob(False, "sample a prompt's n responses (a task's rollouts, a seed's "
                                        "variations) from one prefill of it, its KV cache copied to each: the "
                                        "same tokens for the same keys up to floating-point differences; pays "
                                        "where prompts are long (real benchmarks)")
    llamacpp: LlamaCppConfig = section(LlamaCppConfig, "how llama.cpp decodes",
                                       of=("agent.sampler", "env.sampler"), when="llama.cpp")
    tiny: TinyShapeConfig = section(TinyShapeConfig, "the shape of the models built from scratch",
                                    of=("agent.model", "env.model"), when="tiny")
    checkpoint_every_s: float = knob(60.0, "seconds between checkpoints: one after the first epoch that ends at "
                                     "least this long after the last one, and one after the last epoch; 0 = "
                                     "every epoch. A killed run resumes from its last checkpoint with the same "
                                     "metrics whatever this is, repeating the epochs after it", lo=0.0)
    samples_rollouts_shown: int = knob(2, "agent responses kept per task in samples/epoch_N.jsonl", lo=0)
    progress: bool = knob(True, "show progress bars")
    trackers: list[str] = knob([], "mirror every metrics row, the evaluations and the final summary to these "
                               "experiment trackers (optional extras; docs/trackers.md); one that fails to start "
                               "is a warning and the run goes on", choices=("tensorboard", "wandb", "trackio"))
    tracker_project: str = knob("genenv", "the trackers' project name (a comparison groups its runs under its "
                                "folder's name)")
    domain: DomainConfig = field(default_factory=DomainConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    env: EnvConfig = field(default_factory=EnvConfig)
    curriculum_reward: CurriculumConfig = field(default_factory=CurriculumConfig)
    baseline: BaselineConfig = field(default_factory=BaselineConfig)
    engine: EngineConfig = field(default_factory=EngineConfig)
    experimental: dict = knob({}, "the knobs of the experimental strategies the run selects, one section each "
                              "(experimental.<section>.<knob>), read and checked by the experimental plugin "
                              "(genenv.experimental.sections); `genenv config --describe` lists them")


# --------------------------------------------------------------------------------------------- loading

# values removed in issue 56 (options that lost their decision rule): the commit whose code still runs them (the
# experimental plugin refuses its own: genenv.experimental.old_spellings)
REMOVED_VALUES = {("env.pg.gate", "greedy"): "d99c82e"}
# values renamed (read with a FutureWarning): the learnt seed draw joined the main path in issue 88
RENAMED_VALUES = {("env.seed_draw", "predicted"): "learnt_frontier"}


def _is_dataclass_type(tp) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _coerce(path: str, value: Any, tp: Any, meta: dict) -> Any:
    origin = typing.get_origin(tp)
    if tp is bool:
        if isinstance(value, bool):
            return value
        raise ConfigError(f"{path}: expected true or false, got {value!r}")
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            if isinstance(value, float) and value.is_integer():
                value = int(value)
            else:
                raise ConfigError(f"{path}: expected an integer, got {value!r}")
    elif tp is float:
        if isinstance(value, str):  # YAML 1.1 reads "1e-4" (no dot) as a string
            try:
                value = float(value)
            except ValueError:
                pass
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}: expected a number, got {value!r}")
        value = float(value)
        if value != value or value in (float("inf"), float("-inf")):
            raise ConfigError(f"{path}: expected a finite number, got {value!r}")
    elif tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: expected a string, got {value!r}")
    elif tp is dict or origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: expected a mapping, got {value!r}")
    elif origin is list:   # a list of names: [a, b] in YAML, or "a,b" on the command line
        if isinstance(value, str):
            value = [part.strip() for part in value.split(",") if part.strip()]
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ConfigError(f"{path}: expected a list of names, e.g. [{', '.join(meta.get('choices') or ('a',))}]"
                              f", got {value!r}")
    choices, lo, hi = meta.get("choices"), meta.get("lo"), meta.get("hi")
    if choices and origin is list:
        for item in value:
            if item not in choices:
                raise ConfigError(f"{path}: {item!r} is not allowed; choose from {', '.join(map(str, choices))}")
    elif choices and value not in choices:
        raise ConfigError(f"{path}: {value!r} is not allowed; choose one of {', '.join(map(str, choices))}")
    if lo is not None and value < lo:
        raise ConfigError(f"{path}: {value!r} is below the minimum {lo}")
    if hi is not None and value > hi:
        raise ConfigError(f"{path}: {value!r} is above the maximum {hi}")
    return value


def value_at(data, dotted: str):
    """The value at ``dotted`` in nested mappings, None where there is none."""
    for part in dotted.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


def from_dict(cls, data: dict | None, prefix: str = ""):
    """Build dataclass ``cls`` from a (possibly partial) mapping, validating every field."""
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, got {data!r}")
    if cls is RunConfig:
        data = _read_old_spellings(data)
        for (name, value), commit in REMOVED_VALUES.items():
            if value_at(data, name) == value:
                raise ConfigError(f"{name}: {value!r} was removed (an option that lost its decision rule); its "
                                  f"runs repeat with the code of commit {commit} (docs/results-log.md)")
        for (name, old), new in RENAMED_VALUES.items():
            if value_at(data, name) == old:
                warnings.warn(f"{name}={old} is deprecated: write {name}={new}", FutureWarning, stacklevel=3)
                data = deep_merge(data, dotted_dict(name, new))
    hints = typing.get_type_hints(cls)
    names = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in names:
            allowed = ", ".join(sorted(names))
            close = difflib.get_close_matches(str(key), names, n=1)
            hint = f"did you mean {prefix}{close[0]}? " if close else ""
            if cls is RunConfig:   # a player's knob given at the top: name the players that have it
                players = [f"{name}.{key}" for name, tp in (("agent", AgentConfig), ("env", EnvConfig))
                           if key in {f.name for f in dataclasses.fields(tp)}]
                hint = f"did you mean {' or '.join(players)}? " if players else hint
            raise ConfigError(f"{prefix}{key}: unknown field; {hint}allowed here: {allowed}")
    kwargs = {}
    for name, f in names.items():
        if name not in data:
            continue
        tp = hints[name]
        if _is_dataclass_type(tp):
            kwargs[name] = from_dict(tp, data[name], f"{prefix}{name}.")
        else:
            kwargs[name] = _coerce(f"{prefix}{name}", data[name], tp, dict(f.metadata))
    obj = cls(**kwargs)
    if issubclass(cls, TinyShapeConfig) and obj.hidden_size % obj.num_heads:
        raise ConfigError(f"{prefix}num_heads: {obj.num_heads} must divide hidden_size {obj.hidden_size}")
    # (the curriculum's name is checked by genenv.curricula.make_curriculum, its registry, and the strategies' names
    # and the plugins' sections by genenv.signals.check_config: both sit above this module; a run checks both first)
    if cls is RunConfig:
        _check_sampler(obj)
        _check_shared_prefix(obj)
    return obj


def sliding_window_of(model_config: dict) -> int | None:
    """The sliding window (in tokens) some attention layers of a model read through, from its ``config.json``, or
    None: ``sliding_window`` set, with a layer of ``layer_types`` that slides (Gemma 3, Qwen2 with
    ``use_sliding_window``) or, without ``layer_types``, every layer (Mistral v0.1)."""
    window = model_config.get("sliding_window")
    if not window:
        return None
    types = model_config.get("layer_types")
    if types is not None:
        return int(window) if "sliding_attention" in types else None
    return None if model_config.get("use_sliding_window") is False else int(window)


def _check_shared_prefix(cfg: RunConfig) -> None:
    """``agent.shared_prefix`` packs a group's responses after one copy of its prompt, so a token's distance to
    the prompt's start is not its column: a sliding-window layer's mask cannot be written over those columns (the
    log-probs differ once a sequence is longer than the window). Refused at start for such a model folder."""
    if not cfg.agent.shared_prefix:
        return
    config_file = Path(cfg.agent.model).expanduser() / "config.json"
    if not config_file.is_file() and "/" in cfg.agent.model:   # a Hub id: its config in the Hugging Face cache
        from huggingface_hub import try_to_load_from_cache  # noqa: PLC0415

        repo, _, revision = cfg.agent.model.partition("@")
        try:
            cached = try_to_load_from_cache(repo, "config.json", revision=revision or None)
        except ValueError:   # (not a valid repository id: a path, refused where the model is loaded)
            cached = None
        config_file = Path(cached) if isinstance(cached, str) else config_file
    if not config_file.is_file():
        return
    try:
        model_config = json.loads(config_file.read_text())
    except (OSError, ValueError):
        return   # (an unreadable folder is refused, naming it, where the model is loaded)
    window = sliding_window_of(model_config) if isinstance(model_config, dict) else None
    if window:
        raise ConfigError(f"agent.shared_prefix: {model_config.get('model_type', 'this model')} attends through a "
                          f"sliding window of {window} tokens in some layers, which the shared-prefix mask cannot "
                          "express (a packed token's column is not its distance to the prompt); set "
                          "agent.shared_prefix=false (agent.model)")


def _check_sampler(cfg: RunConfig) -> None:
    """``{agent,env}.sampler=llama.cpp`` runs in the run's own process (vLLM: an engine in each Ray actor, or in the
    run's process). (A model the decoder cannot decode is refused by the preflight:
    :func:`genenv.models.samplers.sampler_problem`.)"""
    for name, player in (("agent", cfg.agent), ("env", cfg.env)):
        if player.sampler == "llama.cpp" and cfg.engine.workers > 0:
            raise ConfigError(f"{name}.sampler: llama.cpp runs in the run's process; set engine.workers=0 or "
                              f"{name}.sampler=transformers or vllm")


def holds_other_names(cls, data, prefix: str = "") -> bool:
    """Whether ``data`` (a config mapping, whole or partial, for dataclass ``cls``) holds a name ``cls`` lacks, a
    value outside its knob's choices, or anything under ``experimental``: where an old spelling may be
    (:mod:`genenv.old_spellings`)."""
    if not isinstance(data, dict):
        return False
    fields = {f.name: f for f in dataclasses.fields(cls)}
    hints = typing.get_type_hints(cls)
    for key, value in data.items():
        f = fields.get(key)
        if f is None:
            return True
        if _is_dataclass_type(hints[key]):
            if holds_other_names(hints[key], value):
                return True
        elif key == "experimental" and cls is RunConfig:
            if value:   # (a section of an option that joined the main path is an old name too)
                return True
        elif f.metadata.get("choices") and isinstance(value, str) and value not in f.metadata["choices"]:
            return True
    return False


def _read_old_spellings(data: dict) -> dict:
    """``data`` with the knobs' old names read as today's, each with a FutureWarning
    (:func:`genenv.old_spellings.read_old_spellings`; that module is read only when ``data`` holds a name or value
    today's config lacks)."""
    if not holds_other_names(RunConfig, data):
        return data
    from genenv.old_spellings import read_old_spellings  # noqa: PLC0415 (old names only)
    return read_old_spellings(data, to_dict(RunConfig()))


def component_sections() -> list[tuple[str, str, str]]:
    """(dotted section, the dotted fields that select it, the value that selects it) for every component section of
    the config (:func:`section`): ``("agent.tiny", ("agent.model",), "tiny")``, ..."""
    out = []

    def walk(cls, prefix):
        for f in dataclasses.fields(cls):
            tp = typing.get_type_hints(cls)[f.name]
            if "component" in f.metadata:
                of, when = f.metadata["component"]
                out.append((f"{prefix}{f.name}", of if isinstance(of, tuple) else (f"{prefix}{of}",), when))
            elif _is_dataclass_type(tp):
                walk(tp, f"{prefix}{f.name}.")
    walk(RunConfig, "")
    return out


def _drop_unselected_sections(cfg: RunConfig, later: dict) -> None:
    """A component section that differs from its defaults while its component is not selected: an error naming the
    knob when the config file or an override set it, and dropped (back to its defaults) when only the preset did
    (``--preset smoke agent.model=FOLDER``: the preset's tiny shape belongs to its tiny model, as its domain options
    belong to its domain). A run folder's config is read as it was started (:func:`run_config`)."""
    for dotted, selectors, when in component_sections():
        *parents, last = dotted.split(".")
        owner = knob_value(cfg, ".".join(parents))
        current, defaults = getattr(owner, last), type(getattr(owner, last))()
        if any(knob_value(cfg, selector) == when for selector in selectors) or current == defaults:
            continue
        selector = selectors[0]
        given = value_at(later, dotted)
        changed = [f.name for f in dataclasses.fields(defaults) if isinstance(given, dict) and f.name in given
                   and getattr(current, f.name) != getattr(defaults, f.name)]
        if not changed:
            setattr(owner, last, defaults)
            continue
        raise ConfigError(f"{dotted}.{changed[0]}: set to {getattr(current, changed[0])!r}, a knob of "
                          f"{' or '.join(f'{s}={when}' for s in selectors)}, but {selector} is "
                          f"{knob_value(cfg, selector)!r}; leave it out or set {selector}={when}")


def tiny_model(cfg: RunConfig, player: PlayerConfig) -> TinyModelConfig:
    """The tiny model ``player`` (``cfg.agent`` or ``cfg.env``) builds: the run's shape and the player's window."""
    return TinyModelConfig(**to_dict(cfg.tiny), **to_dict(player.tiny))


def knob_value(cfg, dotted: str):
    """The value at dotted path ``dotted`` of a config (``"env.pg.gate"``); ``""`` is the config itself."""
    for part in filter(None, dotted.split(".")):
        cfg = getattr(cfg, part)
    return cfg


def _check_update_rule(cfg: RunConfig) -> None:
    """The simulator's update rule against the knobs set for it (a new config only; a run folder's is read as it
    was started): a gate or a knob of the rule not selected would be a silent no-op, and the pg update needs a
    p_hat per task (with ``p_hat_level=batch`` every member of a seed's group has the same reward, so the update
    could only tell valid from invalid)."""
    env = cfg.env
    section, defaults = ("rwr", RwrConfig()) if env.update == "pg" else ("pg", PgConfig())
    for f in dataclasses.fields(defaults):
        value = getattr(getattr(env, section), f.name)
        if value != getattr(defaults, f.name):
            raise ConfigError(f"env.{section}.{f.name}: set to {value!r}, a knob of env.update={section}, but "
                              f"env.update is {env.update!r}; leave it at its default "
                              f"({getattr(defaults, f.name)!r}) or set env.update={section}")
    if env.update == "pg" and cfg.curriculum_reward.p_hat_level == "batch":
        raise ConfigError("curriculum_reward.p_hat_level: 'batch' gives every variation of a seed the same reward, "
                          "so the pg update (env.update=pg) could only tell valid from invalid; set "
                          "curriculum_reward.p_hat_level=task or env.update=rwr")


def to_dict(cfg) -> dict:
    return dataclasses.asdict(cfg)


def dotted_dict(dotted: str, value) -> dict:
    """``a.b.c``, v -> ``{"a": {"b": {"c": v}}}``."""
    out: dict = {}
    node = out
    *parents, last = dotted.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return out


def deep_merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def parse_override(text: str) -> dict:
    """``agent.lr=1e-4`` -> ``{"agent": {"lr": 1e-4}}`` (the value is read as YAML)."""
    if "=" not in text:
        raise ConfigError(f"{text}: an override must look like field.path=value")
    key, raw = text.split("=", 1)
    key = key.strip()
    if not key or any(not part for part in key.split(".")):
        raise ConfigError(f"{text}: an override must look like field.path=value")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    if isinstance(value, (int, float)) and not isinstance(value, bool) and raw.strip().lower() in (".nan", "nan"):
        value = float("nan")
    return dotted_dict(key, value)


def presets_dir() -> Path:
    """The shipped presets: ``genenv/configs/`` inside the installed package (package data)."""
    return Path(str(resources.files("genenv") / "configs"))


def preset_names() -> list[str]:
    return sorted(p.stem for p in presets_dir().glob("*.yaml"))


def read_yaml(path: Path) -> dict:
    try:
        data = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except yaml.YAMLError as err:
        raise ConfigError(f"{path}: not valid YAML ({str(err).splitlines()[0]})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of fields")
    return data


def load_config(preset: str | None = None, overrides: list[str] | tuple[str, ...] = (),
                config_file: str | Path | None = None) -> RunConfig:
    """Defaults < preset (genenv/configs/NAME.yaml) < config file < dotted overrides.

    ``domain.options`` merge key by key like every other section (``--preset smollm2-travel
    domain.options.data=PATH`` keeps the preset's ``max_candidates``). A preset's options belong to the preset's
    domain: when the config file or an override names another domain, the preset's options are dropped and only
    the later ones apply (``--preset smoke domain.name=household`` runs the household with its defaults, not
    with addition's ``width``). A preset's level gate (``env.pg.gate: levels``) is dropped the same way: it uses
    the preset domain's levels. The config is what the layers say."""
    data: dict = {}
    if preset:
        path = presets_dir() / f"{preset}.yaml"
        if not path.exists():
            raise ConfigError(f"preset: no preset named {preset!r}; available: {', '.join(preset_names())}")
        data = read_yaml(path)
    later = read_yaml(Path(config_file)) if config_file else {}
    # (old spellings read first, so an old name given here overrides the preset's new one)
    later = _read_old_spellings(merge_overrides(later, overrides))
    preset_domain = data.get("domain") if isinstance(data.get("domain"), dict) else {}
    later_domain = later.get("domain") if isinstance(later.get("domain"), dict) else {}
    if "name" in later_domain and later_domain["name"] != preset_domain.get("name", DomainConfig.name):
        # the preset's options and level gate belong to its domain (its levels were checked there): not inherited
        if "options" in preset_domain:
            data["domain"] = {k: v for k, v in preset_domain.items() if k != "options"}
        if isinstance(data.get("env"), dict) and isinstance(data["env"].get("pg"), dict):
            later_env = later.get("env") if isinstance(later.get("env"), dict) else {}
            later_pg = later_env.get("pg") if isinstance(later_env.get("pg"), dict) else {}
            if data["env"]["pg"].get("gate") == "levels" and "gate" not in later_pg:
                data["env"] = {**data["env"], "pg": {k: v for k, v in data["env"]["pg"].items() if k != "gate"}}
    merged = deep_merge(data, later)
    cfg = from_dict(RunConfig, merged)
    _drop_unselected_sections(cfg, later)
    _check_update_rule(cfg)
    return cfg


def merge_overrides(data: dict, overrides) -> dict:
    """``data`` with dotted ``key=value`` overrides merged on top."""
    for item in overrides:
        data = deep_merge(data, parse_override(item))
    return data


def describe(cls=RunConfig, prefix: str = "", values=None) -> list[tuple[str, Any, str]]:
    """(dotted name, value, help) for every knob of the main config: the field's default, or its value in
    ``values`` (a config of ``cls``, e.g. a preset's: ``genenv config --describe --preset default``). The
    plugins' strategies' knobs are not among them (each plugin describes its own:
    ``genenv.signals.add_description``)."""
    rows = []
    values = cls() if values is None else values
    for f in dataclasses.fields(cls):
        if cls is RunConfig and f.name == "experimental":   # (the experimental plugin describes these)
            continue
        if "component" in f.metadata:   # (describe_components lists these)
            continue
        value = getattr(values, f.name)
        if dataclasses.is_dataclass(value):
            rows.extend(describe(type(value), f"{prefix}{f.name}.", value))
        else:
            rows.append((f"{prefix}{f.name}", value, f.metadata.get("help", "")))
    return rows


def describe_components(values: RunConfig | None = None) -> list[tuple[str, Any, str]]:
    """(dotted name, value, help) for every knob of a component section, its help saying which choice reads it."""
    values = RunConfig() if values is None else values
    rows = []
    for dotted, selectors, when in component_sections():
        section_values = knob_value(values, dotted)
        selected_by = " or ".join(f"{selector}={when}" for selector in selectors)
        for name, value, help_text in describe(type(section_values), f"{dotted}.", section_values):
            rows.append((name, value, f"{help_text} ({selected_by})"))
    return rows


__all__ = ["ConfigError", "BaselineConfig", "RunConfig", "AgentConfig",
           "EnvConfig", "CurriculumConfig", "DomainConfig", "EngineConfig",
           "TinyModelConfig", "TinyShapeConfig", "TinyWindowConfig", "tiny_model", "WarmStartConfig",
           "AgentWarmStartConfig", "SimulatorWarmStartConfig",
           "load_config", "from_dict", "to_dict",
           "parse_override", "describe", "describe_components", "component_sections", "knob_value", "LlamaCppConfig",
           "OpenAIConfig"]

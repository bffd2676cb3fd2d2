"""``genenv models check FOLDER``: what genenv makes of a model folder before a run is started with it.

The architecture, parameter count and dtype, the tokenizer and its chat template, the fast paths the folder gets
(llama.cpp, the shared-prefix GRPO mask, LoRA's target layers), an estimate of the memory a run of a given preset
needs with the folder as both players, and the first problem found, in plain words. Nothing is trained and no
weight is read: the model is built on torch's meta device from its config.

The memory estimate (:func:`memory_estimate`) adds, per player, the weights of the policy and of its KL reference
(a frozen copy; with LoRA the reference is the same model with its adapters off), a gradient and two AdamW moments
per trainable parameter, and, once, the activations of the largest GRPO step: its sequences (``micro_batch``, or a
minibatch of ``minibatch_groups`` x ``group_size``) times their tokens (the domain's longest seed prompt, through
the chat template, plus ``max_new_tokens``), each token holding per layer ``8 x hidden + 3 x intermediate`` values
(``hidden`` alone under gradient checkpointing) and three float32 rows of the vocabulary (logits, log-softmax, their
gradient), plus the process's own baseline. docs/models.md holds it against ``benchmarks/memory.py`` on two sizes.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from huggingface_hub import HfApi, constants, is_offline_mode
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

from genenv.config import ConfigError, sliding_window_of
from genenv.domains import domain_class, make_domain
from genenv.models.registry import (
    KNOWN_MODELS,
    ModelNotAvailable,
    hub_id,
    hub_snapshot,
    llamacpp_refusal,
    model_folder,
    packaged_file,
    packaged_image,
)
from genenv.models.vllm_sampler import head_size, vllm_installed, vllm_refusal

# the resident memory of a run's process beside its models: Python, torch, transformers, genenv, the domain's data
# (`python benchmarks/memory.py --preset smoke --epochs 2 threads=1`: a peak of 408 MB with models under 1 MB)
PROCESS_BASELINE_MB = 410.0
MB = 2**20
BYTES = {"float32": 4, "bfloat16": 2}


@dataclass
class ModelReport:
    """What :func:`check_model` found: ``rows`` (label, text) in order, and the first problem (None when none)."""
    rows: list[tuple[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    trl_problem: str | None = None   # what TRL alone refuses (a multi-turn domain's tool calls)

    @property
    def problem(self) -> str | None:
        return self.problems[0] if self.problems else None

    def text(self) -> str:
        width = max((len(label) for label, _ in self.rows), default=0)
        lines = [f"{label:<{width}}  {value}" for label, value in self.rows]
        lines.append(f"{'problem':<{width}}  {self.problem or 'none found'}")
        if self.trl_problem:
            lines.append(f"{'TRL problem':<{width}}  {self.trl_problem}")
        return "\n".join(lines)


def _tool_call_row(report: ModelReport, cfg, tokenizer) -> None:
    """For a multi-turn domain: the row saying whether TRL can take its actions as the folder's tool calls."""
    try:
        multi_turn = domain_class(cfg.domain.name).multi_turn
    except ConfigError:
        return   # (an unknown domain is refused where the run reads its config)
    if not multi_turn or tokenizer is None:
        return
    try:
        problem = tool_call_problem(tokenizer)
    except ImportError:
        report.rows.append(("TRL tool calls", "not checked: TRL is not installed (the trl extra)"))
        return
    if problem:
        report.trl_problem = (f"agent.model: {cfg.domain.name} is multi-turn, and TRL takes its actions as tool calls: "
                              f"{problem}; {TOOL_CALL_ADVICE}")
    report.rows.append(("TRL tool calls", f"no ({problem})" if problem else
                        f"yes: {cfg.domain.name}'s actions as tool calls (examples/trl_genenv.py)"))


def _block_linears(model) -> list[tuple[str, torch.nn.Linear]]:
    """The blocks' linear layers by name: what LoRA's all-linear adapts (the output layer left out)."""
    output = model.get_output_embeddings()
    return [(name, module) for name, module in model.named_modules()
            if isinstance(module, torch.nn.Linear) and module is not output]


def longest_prompt_tokens(cfg, tokenizer, tasks: int = 64) -> int:
    """The longest of ``tasks`` seed prompts of the run's domain in ``tokenizer``'s tokens, through its chat
    template when it has one (as the run prompts it)."""
    domain = make_domain(cfg.domain.name, **cfg.domain.options)
    longest = 0
    for task in domain.seed_tasks(np.random.default_rng(0), tasks):
        if tokenizer.chat_template:
            text = tokenizer.apply_chat_template([{"role": "user", "content": task.prompt}], tokenize=False,
                                                 add_generation_prompt=True)
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        else:
            ids = tokenizer(task.prompt)["input_ids"]
        longest = max(longest, len(ids))
    return longest


def _activations_mb(cfg, config, sequences: int, tokens: int) -> float:
    """One forward/backward's activations: per token and layer ``8 x hidden + 3 x intermediate`` values in the
    run's dtype (``hidden`` alone under gradient checkpointing), and three float32 rows of the vocabulary."""
    per_layer = (config.hidden_size if cfg.gradient_checkpointing
                 else 8 * config.hidden_size + 3 * config.intermediate_size)
    per_token = config.num_hidden_layers * per_layer * BYTES[cfg.dtype] + 3 * 4 * config.vocab_size
    return sequences * tokens * per_token / MB


def vllm_engine_mb(cfg, parameters: int, config) -> float:
    """MB of this process's memory one player's vLLM engine takes (``sampler=vllm``): on CPU a copy of the weights in
    the run's dtype and the KV cache it allocates at start (:class:`genenv.models.vllm_sampler.VllmSampler`: room for
    ``max(window, 16384)`` tokens); on a GPU none of it is the host's (the engine's share of the GPU is
    ``GPU_MEMORY_FOR_ENGINES``)."""
    if cfg.device != "cpu":
        return 0.0
    raw = config.to_dict()
    kv_heads = int(raw.get("num_key_value_heads") or raw["num_attention_heads"])
    per_token = 2 * int(raw["num_hidden_layers"]) * kv_heads * (head_size(raw) or 0) * BYTES[cfg.dtype]
    tokens = max(int(raw.get("max_position_embeddings") or 2048), 16384)
    return (parameters * BYTES[cfg.dtype] + per_token * tokens) / MB


def memory_estimate(cfg, parameters: int, config, linear_lora: int, prompt_tokens: int) -> dict[str, float]:
    """MB of a run of ``cfg`` with a model of ``parameters`` parameters (transformers ``config``) as both players.

    ``warm_start``: a warm start trained in this run (none when cached): the trained player's weights, gradient, two
    AdamW moments and the copy it is reloaded from, its SFT batch's activations, beside the other player's weights.
    ``agent``/``env``: co-evolution's static part of each player (the policy, its KL reference, a gradient and two
    AdamW moments per trainable parameter; with LoRA the reference is the same weights, adapters off);
    ``activations``: the largest GRPO step's; ``vllm``: the players' vLLM engines (:func:`vllm_engine_mb`), built
    after the warm starts. ``total``: the process baseline plus the larger of the two stages.
    ``linear_lora``: the adapter parameters per unit of rank."""
    out: dict[str, float] = {}
    weights = {role: parameters * BYTES[cfg.dtype] / MB for role in ("agent", "env")}
    tokens = prompt_tokens + cfg.agent.max_new_tokens
    out["warm_start"] = max(5 * weights[role] + weights[other]
                            + _activations_mb(cfg, config, player.warmstart.batch_size, tokens)
                            for role, other, player in (("agent", "env", cfg.agent), ("env", "agent", cfg.env)))
    for role, player in (("agent", cfg.agent), ("env", cfg.env)):
        if player.lora_rank:
            trainable = linear_lora * player.lora_rank * BYTES[cfg.dtype] / MB
            out[role] = weights[role] + 4 * trainable
        else:
            out[role] = 5 * weights[role]
    agent = cfg.agent
    out["activations"] = _activations_mb(cfg, config, agent.micro_batch or agent.minibatch_groups * agent.group_size,
                                         tokens)
    out["vllm"] = sum(vllm_engine_mb(cfg, parameters, config) for player in (cfg.agent, cfg.env)
                      if player.sampler == "vllm")
    out["process"] = PROCESS_BASELINE_MB
    out["total"] = out["process"] + max(out["warm_start"],
                                        out["agent"] + out["env"] + out["activations"] + out["vllm"])
    return out


def device_problem(device: str) -> str | None:
    """Why torch here cannot use ``device`` (the ``device`` knob), or None when it can."""
    if device == "cuda" and not torch.cuda.is_available():
        why = "is built without CUDA" if torch.version.cuda is None else "finds no CUDA device"
        return (f"device: 'cuda', and torch {torch.__version__} here {why}; set device=cpu (own-model on a CPU: "
                "docs/models.md)")
    return None


def tool_call_problem(tokenizer) -> str | None:
    """Why TRL cannot take a multi-turn domain's actions as tool calls with ``tokenizer``'s chat template (TRL's own
    two tests: the template renders a tool call and a tool message, ``supports_tool_calling``, and TRL knows how to
    read the model's tool calls back, ``add_response_schema``), or None when it can."""
    from trl.chat_template_utils import add_response_schema, supports_tool_calling  # noqa: PLC0415 (the trl extra)

    if not getattr(tokenizer, "chat_template", None):
        return "it has no chat template"
    if not supports_tool_calling(tokenizer):
        return "its chat template drops tool calls or tool messages"
    if getattr(tokenizer, "response_template", None) is None and getattr(tokenizer, "response_schema", None) is None:
        try:
            add_response_schema(copy.copy(tokenizer))
        except ValueError:
            return "TRL cannot read tool calls back from its chat template (not one TRL knows)"
    return None


TOOL_CALL_ADVICE = ("use a tool-calling model (a Qwen2.5/Qwen3 or Llama 3.1/3.2 folder) or, offline, a test folder "
                    "with a released template: `genenv models random qwen2 --out F --chat-template qwen2_5 --preset "
                    "P` (docs/trl.md)")


def hub_problem(model: str) -> str | None:
    """Why Hub model ``model``, in no local cache, cannot be downloaded: offline (``HF_HUB_OFFLINE``), or the Hub
    does not answer for it (no network, no such repository or revision, a gated one without a token); None when it
    does. Asks the Hub for the repository's metadata only."""
    repo, revision = hub_id(model)
    where = f"not a folder here nor in the Hugging Face cache ({constants.HF_HUB_CACHE})"
    if is_offline_mode():
        return f"{model}: {where}, and HF_HUB_OFFLINE is set: download it first (`hf download {repo}`)"
    try:
        HfApi().model_info(repo, revision=revision, timeout=10)
    except Exception as error:  # noqa: BLE001 (a network failure, no such repository, a gated one)
        return f"{model}: {where}, and the Hub cannot give it: {str(error).splitlines()[0]}"
    return None


def model_problem(field: str, model: str) -> str | None:
    """Why a run cannot load ``model`` (the value of the knob ``field``, ``agent.model`` or ``env.model``), named
    by that field: a packaged model whose package is missing, a folder that does not exist, or a folder
    :func:`check_model` finds a problem in; None when it can (and for ``tiny``)."""
    if model == "tiny":
        return None
    if model in KNOWN_MODELS:
        if (model_folder(model) / "config.json").exists():
            return None
        try:
            packaged_file(KNOWN_MODELS[model])
        except ModelNotAvailable as error:
            return f"{field}: {error}"
        return None
    if hub_id(model) is not None:
        folder = hub_snapshot(model)
        if folder is None:   # downloaded where the run loads it, if the Hub answers now
            problem = hub_problem(model)
            return None if problem is None else f"{field}: {problem}"
    else:
        folder = Path(model).expanduser()
    if not folder.is_dir():
        return (f"{field}: {model}: no such folder (a model is 'tiny', a packaged name "
                f"({', '.join(sorted(KNOWN_MODELS))}), a Hugging Face Hub id or a Hugging Face model folder)")
    problem = check_model(folder).problem
    return f"{field}: {problem}" if problem else None


def check_model(folder: str | Path, cfg=None) -> ModelReport:
    """What genenv makes of ``folder``; with ``cfg`` (a run's config with the folder as its players), the memory
    a run of it needs and the settings it refuses: the device, and for a multi-turn domain whether TRL can take its
    actions as tool calls (``trl_problem``: a problem for TRL alone, genenv's loop prompts with plain text)."""
    report = ModelReport()
    folder = Path(folder).expanduser()
    try:
        raw = json.loads((folder / "config.json").read_text())
    except (OSError, ValueError) as error:
        report.problems.append(f"{folder}: not a Hugging Face model folder (config.json: {error})")
        return report
    try:
        config = AutoConfig.from_pretrained(folder)
    except (ValueError, KeyError, OSError) as error:
        report.problems.append(f"transformers cannot read its config: {str(error).splitlines()[0]}")
        return report
    report.rows.append(("architecture", f"{config.model_type} ({', '.join(raw.get('architectures') or ['?'])})"))
    try:
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
    except (ValueError, KeyError) as error:
        report.problems.append(f"not a causal language model transformers builds: {str(error).splitlines()[0]}")
        return report
    parameters = sum(p.numel() for p in model.parameters())
    report.rows.append(("parameters", f"{parameters:,} ({config.num_hidden_layers} layers, {config.hidden_size} "
                                      f"wide, vocabulary {config.vocab_size:,})"))
    report.rows.append(("dtype", f"{raw.get('torch_dtype') or raw.get('dtype') or 'float32'} on disk"))
    try:
        tokenizer = AutoTokenizer.from_pretrained(folder)
    except (ValueError, OSError, KeyError) as error:
        report.problems.append(f"no tokenizer transformers loads: {str(error).splitlines()[0]}")
        tokenizer = None
    if tokenizer is not None:
        rows = model.get_input_embeddings().weight.shape[0]
        report.rows.append(("tokenizer", f"{type(tokenizer).__name__}, {len(tokenizer):,} tokens, eos "
                                         f"{tokenizer.eos_token!r}, pad {tokenizer.pad_token!r}"))
        if tokenizer.chat_template:
            rendered = tokenizer.apply_chat_template([{"role": "user", "content": "TASK"}], tokenize=False,
                                                     add_generation_prompt=True)
            report.rows.append(("chat template", f"yes: a task is prompted as {rendered!r}"))
        else:
            report.rows.append(("chat template", "none: the task's prompt is the text itself"))
        if tokenizer.eos_token_id is None:
            report.problems.append("the tokenizer has no end-of-sequence token: generations would never end")
        if len(tokenizer) > rows:
            report.problems.append(f"the tokenizer has {len(tokenizer):,} tokens and the embeddings {rows:,} rows: "
                                   "a token past them cannot be embedded")
    image = packaged_image(str(folder))
    refusal = llamacpp_refusal(str(folder))
    report.rows.append(("llama.cpp", f"yes, in the image of the packaged {image}" if image else
                        "yes, a GGUF written from the folder" if refusal is None else f"no ({refusal})"))
    device = cfg.device if cfg is not None else "cpu"
    refusal = vllm_refusal(str(folder), device)
    installed = "" if vllm_installed() else "; vLLM is not installed here (docs/vllm.md)"
    report.rows.append((f"vLLM on {device}", f"no ({refusal})" if refusal else f"yes, sampler=vllm{installed}"))
    window = sliding_window_of(raw)
    report.rows.append(("shared prefix", f"refused: a sliding window of {window} tokens in some layers" if window
                        else "yes (agent.shared_prefix=true)"))
    linears = _block_linears(model)
    report.rows.append(("LoRA targets", ", ".join(sorted({name.rsplit(".", 1)[-1] for name, _ in linears}))))
    if cfg is not None:
        problem = device_problem(cfg.device)
        if problem:
            report.problems.append(problem)
        _tool_call_row(report, cfg, tokenizer)
    if cfg is not None:   # (agent.shared_prefix on a sliding window is refused where cfg was read)
        prompt = None
        if tokenizer is not None:
            try:
                prompt = longest_prompt_tokens(cfg, tokenizer)
            except Exception as error:  # noqa: BLE001 (a domain that needs data not given: say so, go on)
                report.rows.append(("memory", f"not estimated: the domain's prompts: {str(error).splitlines()[0]}"))
        if prompt is not None:
            per_rank = sum(module.in_features + module.out_features for _, module in linears)
            estimate = memory_estimate(cfg, parameters, config, per_rank, prompt)
            coevolution = estimate["agent"] + estimate["env"] + estimate["activations"] + estimate["vllm"]
            report.rows.append(("memory", f"about {estimate['total'] / 1024:.1f} GB for this preset with the folder "
                                          f"as both players: the larger of a warm start trained here "
                                          f"({estimate['warm_start']:,.0f} MB) and co-evolution ({coevolution:,.0f} MB:"
                                          f" agent {estimate['agent']:,.0f}, simulator {estimate['env']:,.0f}, GRPO "
                                          f"activations {estimate['activations']:,.0f} at {prompt} prompt tokens"
                                          + (f", vLLM engines {estimate['vllm']:,.0f}" if estimate["vllm"] else "")
                                          + f"), plus the process ({estimate['process']:,.0f} MB)"))
    return report

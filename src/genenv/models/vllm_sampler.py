"""The sampled phases of a real model on vLLM (``{agent,env}.sampler=vllm``), in the run's own process.

Each player that samples on vLLM gets an engine of its own in the trainer's process, as TRL's colocate mode and
veRL's hybrid engine do: the engine is built from the policy's config and tokenizer with dummy weights, and the
policy's current weights go into it before the first request and again whenever an optimiser step changed them
(torch counts every in-place change of a tensor, so a stale copy is never used), through vLLM's in-place weight
reload. A LoRA player's adapters are merged into a copy of its weights first. The engine's dtype is the run's
``dtype``; prefix caching follows the run's ``prefix_cached_sampling`` (and is reset after every weight load).

Sequence j of prompt i is one request of its own, seeded from genenv's keyed streams: its seed is the 53 random
bits of the sequence's first uniform (:func:`genenv.seeding.sequence_uniforms`, a function of the run seed and
the sequence's key alone), so a sequence draws the same tokens in any batch and the same seed gives the same run
on the same machine and build. vLLM draws with its own sampler (a per-request torch generator): the tokens are
not the transformers path's for the same keys, and not bit for bit across machines. Greedy decoding is the
argmax on either engine. The log-probs a sample carries are vLLM's at the sampling temperature, for the record
only: GRPO and the simulator's pg update recompute the old log-probs of the samples they train on with the
trainer's own forward pass (``recompute_old_logprobs``), as on the llama.cpp path.

Generation ends at the tokenizer's EOS token (the end of an assistant turn under the chat template: what the
transformers path stops at), kept in the tokens, or at ``max_new_tokens``. A ``stop`` rule (:meth:`Policy.generate`)
cuts each finished sample where it first says True: a sample's tokens up to there are the ones it drew.

What vLLM cannot decode is refused at start (:func:`vllm_refusal`): the tiny models (a character tokenizer), a
head size the CPU attention backend refuses (under 32), an architecture vLLM lacks.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import json
import logging
import os
import random
import tempfile
import time
import warnings

import numpy as np
import torch

from genenv.errors import SamplerNotAvailable
from genenv.models.registry import local_folder

# the share of a GPU's memory a run's vLLM engines take together (weights, activations, KV cache), split equally
# between them; the trainer keeps the rest (TRL's colocate mode gives its one engine 0.3 by default)
GPU_MEMORY_FOR_ENGINES = 0.6
# the smallest attention head vLLM's CPU attention backend takes ("Unsupported CPU attention configuration" below)
CPU_MIN_HEAD_SIZE = 32


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def install_hint() -> str:
    return ("sampler=vllm needs vLLM: `pip install 'genenv-coevolve[vllm]'` on a GPU machine; on x86 CPUs the "
            "community CPU build, docs/vllm.md (`make install` has it)")


def head_size(config: dict) -> int | None:
    """The attention head size a ``config.json`` gives (``head_dim``, else hidden_size / num_attention_heads)."""
    if config.get("head_dim"):
        return int(config["head_dim"])
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    return int(hidden) // int(heads) if hidden and heads else None


def folder_refusal(config: dict, device: str) -> str | None:
    """Why vLLM cannot decode a model of this ``config.json`` on ``device``, as far as the config tells without
    importing vLLM (the architecture: :func:`vllm_refusal`): None when nothing is seen."""
    size = head_size(config)
    if device == "cpu" and size is not None and size < CPU_MIN_HEAD_SIZE:
        return (f"its attention head size is {size}, and vLLM's CPU attention takes {CPU_MIN_HEAD_SIZE} or more; "
                "use sampler=transformers or llama.cpp on CPU")
    return None


def vllm_refusal(model: str, device: str, architecture: bool = False) -> str | None:
    """Why vLLM cannot decode ``model`` (a player's ``model``: 'tiny', a packaged name or a folder) on ``device``,
    or None: one wording for the preflight, ``genenv eval --sampler auto`` and ``genenv models check``. With
    ``architecture`` (the preflight, where ``sampler=vllm`` was asked for), also an architecture the installed vLLM
    lacks, which imports vLLM (10-20 s)."""
    if model == "tiny":
        return ("vLLM cannot decode the tiny model: its tokenizer is a character one built on the spot and its heads "
                f"are under {CPU_MIN_HEAD_SIZE} wide; use sampler=transformers")
    config_file = local_folder(model) / "config.json"
    if not config_file.is_file():
        return None   # a packaged name (smollm2: 64-wide heads), or a path refused where the model is loaded
    try:
        config = json.loads(config_file.read_text())
    except (OSError, ValueError):
        return None
    refusal = folder_refusal(config, device) if isinstance(config, dict) else None
    if refusal is None and architecture and isinstance(config, dict) and vllm_installed():
        architectures = config.get("architectures") or []
        if architectures and not any(a in vllm_architectures() for a in architectures):
            refusal = f"its architecture {', '.join(architectures)} is not one vLLM {vllm_version()} has"
    return None if refusal is None else f"vLLM cannot decode {model!r}: {refusal}"


@functools.cache
def vllm_architectures() -> frozenset[str]:
    """The model architectures (``config.json``'s ``architectures``) the installed vLLM decodes (asking its registry
    draws from Python's global stream: put back)."""
    vllm = vllm_module()
    with _process_state_kept():
        return frozenset(vllm.ModelRegistry.get_supported_archs())


def vllm_version() -> str:
    return vllm_module().__version__


def vllm_module():
    if not vllm_installed():
        raise SamplerNotAvailable(install_hint())
    # the engine in this process (no engine-core subprocess: the weights are synced by reference), unless the user
    # chose otherwise; vLLM's CPU backend reads its KV cache size from the engine's own argument below
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    with _library_noise_quiet():
        import vllm  # noqa: PLC0415

    return vllm


@contextlib.contextmanager
def _library_noise_quiet():
    """Around vLLM's import and an engine's build: its own use of a torch name torch deprecates (two FutureWarnings
    a build) and torch's "Triton not available" line, which a CPU build always meets, are not the run's news. (Two
    NUMA-binding lines torch's C++ prints on CPU are left: no Python switch reaches them.)"""
    logger = logging.getLogger("torch._library.triton")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="`torch.distributed.reduce_op` is deprecated",
                                    category=FutureWarning)
            yield
    finally:
        logger.setLevel(level)


@contextlib.contextmanager
def _process_state_kept():
    """Building a vLLM engine in process seeds the global random streams (torch's CPU and CUDA generators, numpy's,
    Python's) and, on CPU, sets torch to one thread and replaces ``torch.set_num_threads`` with a no-op: put all of
    them back, so the trainer's streams and threads are the run's own."""
    threads, set_threads = torch.get_num_threads(), torch.set_num_threads
    numpy_state, python_state = np.random.get_state(), random.getstate()
    cuda = list(range(torch.cuda.device_count())) if torch.cuda.is_available() else []
    with torch.random.fork_rng(devices=cuda):
        try:
            yield
        finally:
            torch.set_num_threads = set_threads
            torch.set_num_threads(threads)
            np.random.set_state(numpy_state)
            random.setstate(python_state)


def _reload(worker, weights: list) -> None:
    """Runs on the engine's worker (in this process): vLLM's in-place reload of the named checkpoint tensors."""
    worker.model_runner.reload_weights(weights_iterator=iter(weights))


# the constraints the engines of this process decode under, by key (a request names its constraint in its
# SamplingParams.extra_args: a JSON-able key, not the object)
CONSTRAINTS: dict[str, object] = {}
CONSTRAINT_ARG = "genenv_constraint"


def constrained_processor():
    """The vLLM logits processor of ``env.constrained`` (a class built once vLLM is imported): a request whose
    ``extra_args`` names a constraint gets genenv's own :class:`genenv.constrained.TokenConstraint` masks, row by
    row, each step's tokens outside them at the dtype's lowest value before vLLM applies the temperature and draws,
    the same masks the transformers and llama.cpp paths apply and the updates replay (grammar, references and
    repeats scan, closing under the budget)."""
    from vllm.v1.sample.logits_processor import AdapterLogitsProcessor  # noqa: PLC0415

    from genenv.models.policy import masked_scores  # noqa: PLC0415

    class ConstrainedMasks(AdapterLogitsProcessor):
        def is_argmax_invariant(self) -> bool:
            return False

        def new_req_logits_processor(self, params):
            key = (params.extra_args or {}).get(CONSTRAINT_ARG)
            if key is None:
                return None
            constraint = CONSTRAINTS[key]
            matchers = constraint.start(1)
            taken = [0]

            def mask(output_ids: list[int], logits: torch.Tensor) -> torch.Tensor:
                constraint.advance(matchers, output_ids[taken[0]:])
                taken[0] = len(output_ids)
                allowed = constraint.allowed(matchers)[0]
                if allowed.shape[0] < logits.shape[-1]:   # logits padded past the tokenizer's ids
                    allowed = torch.cat([allowed, allowed.new_zeros(logits.shape[-1] - allowed.shape[0])])
                return masked_scores(logits, allowed[:logits.shape[-1]])

            return mask

    return ConstrainedMasks


def request_seed(uniforms_row: torch.Tensor) -> int:
    """A sequence's vLLM seed: the 53 random bits of its first uniform (:func:`genenv.seeding.sequence_uniforms`)."""
    return int(float(uniforms_row[0]) * (1 << 53))


class VllmSampler:
    """Samples for ``policy`` on a vLLM engine of its own in this process (``device``: where the engine runs), built
    at its first :meth:`sync`.

    ``max_model_len``: the longest prompt plus response a request may have (0: the model's own window);
    ``dtype``: the engine's weights (the run's); ``prefix_caching``: vLLM's automatic prefix caching;
    ``gpu_memory_utilization``: on a GPU, the share of its memory the engine takes (weights, activations, KV cache);
    on CPU the KV cache holds ``cpu_kv_tokens`` tokens (at least one request of ``max_model_len``), allocated at
    start: as many sequences decode side by side as their tokens fit.

    Pickled (a policy sent to a Ray actor, ``engine.workers``), it carries its settings and no engine: the copy
    builds an engine of its own in the process it lands in, for the policy it is attached to there
    (:meth:`attach`)."""

    def __init__(self, policy, device: str = "cpu", dtype: str = "float32", max_model_len: int = 0,
                 prefix_caching: bool = False, gpu_memory_utilization: float = 0.3, cpu_kv_tokens: int = 16384):
        self._options = dict(device=device, dtype=dtype, max_model_len=max_model_len, prefix_caching=prefix_caching,
                             gpu_memory_utilization=gpu_memory_utilization, cpu_kv_tokens=cpu_kv_tokens)
        self.vllm = vllm_module()
        self.policy, self.llm, self._folder = policy, None, None
        self.prefix_caching = prefix_caching
        self._versions: tuple | None = None
        self.syncs, self.sync_seconds, self.load_seconds = 0, 0.0, 0.0
        config = self._base_model().config if policy is not None else None
        self.max_model_len = int(max_model_len or getattr(config, "max_position_embeddings", 0) or 2048)

    def __getstate__(self) -> dict:
        return {"options": self._options}

    def __setstate__(self, state: dict) -> None:
        self.__init__(None, **state["options"])

    def attach(self, policy) -> None:
        """The policy this copy samples for (a Ray actor's replica)."""
        self.__init__(policy, **self._options)

    def _build(self) -> None:
        options = self._options
        config = self._base_model().config
        self._folder = tempfile.TemporaryDirectory(prefix="genenv-vllm-")
        config.save_pretrained(self._folder.name)
        self.policy.tokenizer.save_pretrained(self._folder.name)
        args = dict(model=self._folder.name, load_format="dummy", dtype=options["dtype"],
                    max_model_len=self.max_model_len, enable_prefix_caching=self.prefix_caching,
                    enforce_eager=options["device"] == "cpu", seed=0, logprobs_mode="processed_logprobs",
                    disable_log_stats=True, logits_processors=[constrained_processor()])
        if options["device"] == "cpu":
            # a prompt's prefill is never split over steps: vLLM rewinds a seeded request's generator after a
            # partial prefill, which a CPU generator cannot do ("CPU Generator does not use offset", vLLM 0.32)
            args.update(enable_chunked_prefill=False, max_num_batched_tokens=max(8192, self.max_model_len))
            layers = int(getattr(config, "num_hidden_layers", 1))
            kv_heads = int(getattr(config, "num_key_value_heads", None) or config.num_attention_heads)
            width = torch.finfo(getattr(torch, options["dtype"])).bits // 8
            per_token = 2 * layers * kv_heads * head_size(config.to_dict()) * width
            args["kv_cache_memory_bytes"] = per_token * max(self.max_model_len, options["cpu_kv_tokens"])
        else:
            args["gpu_memory_utilization"] = options["gpu_memory_utilization"]
        start = time.perf_counter()
        with _process_state_kept(), _library_noise_quiet():
            self.llm = self.vllm.LLM(**args)
        self.load_seconds = time.perf_counter() - start

    def _base_model(self):
        model = self.policy.model
        return model.get_base_model() if hasattr(model, "peft_config") else model

    def _weights_version(self) -> tuple:
        return tuple(p._version for p in self.policy.model.parameters())

    def sync(self) -> None:
        """Load the policy's current weights into the engine, unless they are the ones loaded."""
        if self.llm is None:
            self._build()
        version = self._weights_version()
        if version == self._versions:
            return
        start = time.perf_counter()
        weights = list(self.policy.merged_state_dict().items())
        with _process_state_kept():
            self.llm.collective_rpc(_reload, args=(weights,))
            if self.prefix_caching:
                self.llm.reset_prefix_cache()
        self._versions = version
        self.syncs += 1
        self.sync_seconds += time.perf_counter() - start

    def close(self) -> None:
        """Free the engine: its core's shutdown undoes the ``gc.freeze()`` vLLM's in-process engine makes at its
        start (without it the weights and KV cache stay resident after the sampler is gone: 16 GB after a test's
        three SmolLM2 runs), and its temporary folder."""
        core = getattr(getattr(self.llm, "llm_engine", None), "engine_core", None)
        if core is not None:
            with _process_state_kept():
                core.shutdown()
        self.llm = None
        if self._folder is not None:
            self._folder.cleanup()
            self._folder = None

    def sample(self, prompt_ids: list[list[int]], n: int, max_new_tokens: int, temperature: float,
               uniforms: torch.Tensor | None, stop=None,
               constraint=None) -> list[list[tuple[list[int], list[float]]]]:
        """For each prompt, ``n`` (tokens, log-probs) pairs, sample j of prompt i seeded from row i * n + j of
        ``uniforms`` ([prompts * n, max_new_tokens]; None: greedy, no log-probs). ``stop``: ``Policy.generate``'s
        (a sample is cut where it first says True)."""
        self.sync()
        longest = max((len(p) for p in prompt_ids), default=0)
        if longest + max_new_tokens > self.max_model_len:
            raise ValueError(f"sampler=vllm: a prompt of {longest} tokens plus {max_new_tokens} new ones passes the "
                             f"engine's length of {self.max_model_len} (the model's window)")
        vllm = self.vllm
        eos = self.policy.eos_token_id
        extra = None
        if constraint is not None:
            CONSTRAINTS[str(id(constraint))] = constraint
            extra = {CONSTRAINT_ARG: str(id(constraint))}
        requests, params = [], []
        for i, ids in enumerate(prompt_ids):
            for j in range(n):
                common = dict(max_tokens=max_new_tokens, ignore_eos=True, stop_token_ids=[eos], detokenize=False,
                              skip_special_tokens=False, extra_args=extra)
                if uniforms is None:
                    params.append(vllm.SamplingParams(temperature=0.0, **common))
                else:
                    params.append(vllm.SamplingParams(temperature=temperature, top_p=1.0, top_k=0, min_p=0.0,
                                                      seed=request_seed(uniforms[i * n + j]), logprobs=0, **common))
                requests.append(vllm.inputs.TokensPrompt(prompt_token_ids=list(ids)))
        with _process_state_kept():
            outputs = self.llm.generate(requests, params, use_tqdm=False)
        pairs = []
        for output in outputs:
            sample = output.outputs[0]
            tokens = list(sample.token_ids)
            logprobs = ([float(step[token].logprob) for step, token in zip(sample.logprobs, tokens)]
                        if uniforms is not None and sample.logprobs is not None else [])
            if stop is not None:   # asked as the other engines ask it: after each token that is not EOS
                for length in range(1, len(tokens) + 1):
                    if tokens[length - 1] != eos and stop(tokens[:length]):
                        tokens, logprobs = tokens[:length], logprobs[:length]
                        break
            pairs.append((tokens, logprobs))
        return [pairs[i * n:(i + 1) * n] for i in range(len(prompt_ids))]


def engine_for(policy, model: str, device: str, **options) -> VllmSampler:
    """A :class:`VllmSampler` for ``policy`` of ``model``; a model vLLM cannot decode (:func:`vllm_refusal`, or an
    architecture vLLM lacks) is a ValueError naming why."""
    refusal = vllm_refusal(model, device)
    if refusal:
        raise ValueError(refusal)
    architectures = getattr(policy.model.config, "architectures", None) or []
    if architectures and not any(a in vllm_architectures() for a in architectures):
        raise ValueError(f"vLLM cannot decode {model!r}: its architecture {', '.join(architectures)} is not one "
                         f"vLLM {vllm_version()} has")
    return VllmSampler(policy, device=device, **options)

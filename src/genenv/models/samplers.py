"""The decoders a player's generations can be drawn by (``agent.sampler``, ``env.sampler``, ``genenv eval
--sampler``): transformers (the trainer's own model), llama.cpp (:mod:`genenv.models.llamacpp`) and vLLM
(:mod:`genenv.models.vllm_sampler`), and the one rule for a model a decoder cannot decode: refused, saying which
decoder and why (:func:`sampler_problem`, asked by the preflight, :mod:`genenv.preflight`, and by an evaluation
before its model loads)."""

from __future__ import annotations

import importlib.util

from genenv.models.llamacpp import packaged_sampler
from genenv.models.registry import llamacpp_refusal
from genenv.models.vllm_sampler import GPU_MEMORY_FOR_ENGINES, engine_for, install_hint, vllm_installed, vllm_refusal

SAMPLERS = ("transformers", "llama.cpp", "vllm")


def sampler_problem(field: str, sampler: str, model: str, device: str) -> str | None:
    """Why decoder ``sampler`` (the value of ``field``: ``agent.sampler``, ``env.sampler``, ``--sampler``) cannot
    decode ``model`` on ``device``: it is not installed, or the model is one it cannot decode (llama.cpp: a
    tokenizer or architecture no GGUF is written for; vLLM: an architecture it lacks, or on CPU heads under 32
    wide). The same rule for a run, TRL's simulator and ``genenv eval``: refused, never replaced by another."""
    if sampler == "llama.cpp":
        if importlib.util.find_spec("llama_cpp") is None:
            return (f"{field}: llama.cpp needs llama-cpp-python (`make install` builds it from its source "
                    f"distribution), which is not installed here; or set {field}=transformers")
        refusal = llamacpp_refusal(model)
        return None if refusal is None else f"{field}: {refusal}; or set {field}=transformers"
    if sampler == "vllm":
        if not vllm_installed():
            return f"{field}: {install_hint()}"
        refusal = vllm_refusal(model, device, architecture=True)   # (its words say what to use instead)
        return None if refusal is None else f"{field}: {refusal}"
    return None


def build_sampler(sampler: str, policy, model: str, *, device: str, dtype: str, threads: int,
                  llamacpp_dtype: str = "f16", context: int = 8192, parallel: int = 16, prefix_caching: bool = False,
                  gpu_memory_utilization: float = GPU_MEMORY_FOR_ENGINES, max_model_len: int = 0):
    """The one factory of a policy's sampler (a run's players, TRL's simulator, a Ray actor's copy, ``genenv eval``):
    None for ``transformers`` (the policy decodes itself); for ``llama.cpp`` a
    :class:`genenv.models.llamacpp.LlamaCppSampler` writing the policy's weights as GGUF (``llamacpp_dtype``;
    ``context`` tokens, ``parallel`` sequences side by side, ``threads``); for ``vllm`` a
    :class:`genenv.models.vllm_sampler.VllmSampler` (``dtype``, ``prefix_caching``, on a GPU
    ``gpu_memory_utilization``; ``max_model_len`` 0: the model's window). Not built yet (its first ``sync`` builds
    it). A model the sampler cannot decode is a ValueError saying why (:func:`sampler_problem`, asked first by the
    preflight); a sampler not installed, :class:`genenv.errors.SamplerNotAvailable`."""
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler: {sampler!r} is not one of {', '.join(SAMPLERS)}")
    if sampler == "llama.cpp":
        return packaged_sampler(policy, model, threads=threads, dtype=llamacpp_dtype, context=context,
                                parallel=parallel)
    if sampler == "vllm":
        return engine_for(policy, model, device, dtype=dtype, prefix_caching=prefix_caching,
                          gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len)
    return None

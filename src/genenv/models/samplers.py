"""The decoders a player's generations can be drawn by (``agent.sampler``, ``env.sampler``, ``genenv eval
--sampler``): transformers (the trainer's own model), llama.cpp (:mod:`genenv.models.llamacpp`) and vLLM
(:mod:`genenv.models.vllm_engine`), and the one rule for a model a decoder cannot decode: refused, saying which
decoder and why (:func:`decoder_problem`, asked by the preflight, :mod:`genenv.preflight`, and by an evaluation
before its model loads)."""

from __future__ import annotations

import importlib.util

from genenv.models.registry import llamacpp_refusal
from genenv.models.vllm_engine import install_hint, vllm_installed, vllm_refusal

DECODERS = ("transformers", "llama.cpp", "vllm")


def decoder_problem(field: str, sampler: str, model: str, device: str) -> str | None:
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

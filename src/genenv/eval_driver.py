"""What every benchmark driver shares (``genenv eval --benchmark NAME``, each in its domain's ``benchmark``
module): the model to evaluate, loaded once (optionally decoded by llama.cpp), and its greedy answers to many
prompts in batches, with progress. Below the domains: a domain's benchmark module imports it, never the reverse.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from pathlib import Path

from genenv.io import atomic_write_json, atomic_write_jsonl
from genenv.models.gguf_export import DTYPES as GGUF_DTYPES
from genenv.models.policy import Policy
from genenv.models.registry import llamacpp_refusal, resolve_model
from genenv.models.samplers import build_sampler
from genenv.models.vllm_sampler import vllm_installed, vllm_refusal
from genenv.progress import progress_bar
from genenv.prompts import context_budget


def fmt(value: float | None) -> str:
    """A score for the log: three decimals, or n/a when there was nothing to score."""
    return "n/a" if value is None else f"{value:.3f}"


class StopAfterLine:
    """A ``stop`` for :meth:`Policy.generate`: a response ends once a line it has finished (the text through its
    last newline) satisfies ``line_done`` (its text -> bool), when the scorer reads nothing after that line.
    API-Bank's call verdict, for one, reads only the first line holding a call
    (:func:`genenv.domains.apibank.calls.extract_call`), so an answer can stop there with the same verdict.

    ``line_done`` is asked only when the token just drawn holds a newline (the tokens holding one are found once,
    by decoding every token of the vocabulary), with the text decoded so far."""

    def __init__(self, policy, line_done: Callable[[str], bool]):
        self.policy, self.line_done = policy, line_done
        texts = policy.decode_many([[token] for token in range(len(policy.tokenizer))])
        self.newline_tokens = frozenset(token for token, text in enumerate(texts) if "\n" in text)
        self.asked = 0   # how often line_done was asked

    def __call__(self, tokens: list[int]) -> bool:
        if not tokens or tokens[-1] not in self.newline_tokens:
            return False
        self.asked += 1
        text = self.policy.decode_many([tokens])[0]
        return self.line_done(text[:text.rfind("\n")])


def greedy_responses(policy, prompts: list, max_new_tokens: int, batch_size: int,
                     prompt_ids: list[list[int]] | None = None, stop=None) -> list[str | None]:
    """Greedy responses, in :func:`answer_order_key`'s order in batches (greedy makes order irrelevant).

    A prompt that cannot fit the model's context window together with ``max_new_tokens`` gets ``None``. ``stop``:
    :meth:`Policy.generate`'s (:class:`StopAfterLine`, say).
    """

    prompt_ids = policy.encode_prompts(prompts) if prompt_ids is None else prompt_ids
    budget = context_budget(policy, max_new_tokens)
    fits = [i for i, ids in enumerate(prompt_ids) if len(ids) <= budget]
    order = sorted(fits, key=lambda i: answer_order_key(policy, prompt_ids[i]))
    responses: list[str | None] = [None] * len(prompts)
    step = len(order) if getattr(policy, "sampler", None) is not None else batch_size  # llama.cpp: windows
    for first in range(0, len(order), max(1, step)):
        chunk = order[first:first + step]
        gens = policy.generate([prompts[i] for i in chunk], greedy=True, max_new_tokens=max_new_tokens,
                               batch_size=batch_size, prompt_ids=[prompt_ids[i] for i in chunk],
                               **({"stop": stop} if stop is not None else {}))
        for i, group in zip(chunk, gens):
            responses[i] = group[0].text
    return responses


def answer_order_key(policy, prompt_ids: list[int]):
    """The order greedy answers are decoded in (greedy makes it irrelevant to the answers): longest prompts first
    on transformers (batches with less padding); in token order on llama.cpp, which decodes prompt by prompt and
    keeps the KV cells a prompt shares with the one before it, so neighbours in token order prefill only what they
    do not share (API-Bank level 1: 74% of the prompt tokens are shared with the previous prompt)."""
    return prompt_ids if policy.sampler is not None else -len(prompt_ids)


def greedy_with_progress(policy, prompts: list, max_new_tokens: int, batch_size: int, label: str,
                         stop=None) -> list:
    """:func:`greedy_responses` over many prompts, a few batches at a time, with a progress bar. On llama.cpp the
    prompts go in token order over all of them (:func:`answer_order_key`), not slice by slice."""
    prompt_ids, order = None, list(range(len(prompts)))
    if getattr(policy, "sampler", None) is not None:
        prompt_ids = policy.encode_prompts(prompts)
        order.sort(key=lambda i: answer_order_key(policy, prompt_ids[i]))
    responses: list[str | None] = [None] * len(prompts)
    with progress_bar(len(prompts), label, leave=False) as bar:
        for first in range(0, len(order), 8 * batch_size):  # progress in slices of a few batches
            chunk = order[first:first + 8 * batch_size]
            answers = greedy_responses(policy, [prompts[i] for i in chunk], max_new_tokens, batch_size,
                                       None if prompt_ids is None else [prompt_ids[i] for i in chunk], stop)
            for i, response in zip(chunk, answers):
                responses[i] = response
            bar.update(len(chunk))
    return responses


def eval_sampler(sampler: str, model: str, device: str) -> str:
    """The sampler an evaluation decodes with: ``auto`` (``genenv eval``'s default) is vLLM on a GPU where it can
    decode the model (vLLM installed: docs/vllm.md), llama.cpp on the CPU where it can (a packaged GGUF model or a
    folder it writes one from, llama-cpp-python installed: ``make install``), and transformers elsewhere; the others
    are themselves."""
    if sampler != "auto":
        return sampler
    if device == "cuda" and vllm_installed() and vllm_refusal(model, device) is None:
        return "vllm"
    usable = (device == "cpu" and llamacpp_refusal(model) is None
              and importlib.util.find_spec("llama_cpp") is not None)
    return "llama.cpp" if usable else "transformers"


def load_eval_policy(model: str, log, device: str, threads: int, sampler: str = "transformers",
                     use_chat_template: bool | None = False, sampler_dtype: str = "f16", dtype: str | None = None):
    """The evaluated model; with ``sampler="llama.cpp"`` (``--sampler``) its greedy answers decoded by llama.cpp from
    weights written in its packaged GGUF's image as ``sampler_dtype`` (``--sampler-dtype``: f16, bf16, f32 or
    q8_0; :mod:`genenv.models.llamacpp`), 16 answers side by side; ``vllm``: on a vLLM engine in this process
    (:mod:`genenv.models.vllm_sampler`, the model's own dtype); ``auto``: :func:`eval_sampler`. A decoder that cannot
    decode the model is a ValueError from the sampler factory (``genenv eval`` asks the preflight before anything
    loads: :func:`genenv.preflight.eval_problems`).
    ``dtype``: the weights' dtype in torch (None: the folder's)."""
    if sampler not in ("auto", "transformers", "llama.cpp", "vllm"):
        raise ValueError(f"--sampler: {sampler!r} is not auto, transformers, llama.cpp or vllm")
    if sampler == "auto":
        sampler = eval_sampler(sampler, model, device)
        log(f"sampler: {sampler} (--sampler auto; --sampler transformers, llama.cpp or vllm to choose)")
    if sampler_dtype not in GGUF_DTYPES:
        raise ValueError(f"--sampler-dtype: {sampler_dtype!r} is not one of {', '.join(GGUF_DTYPES)}")
    policy = Policy.load(resolve_model(model, log), device=device, use_chat_template=use_chat_template,
                         **({"dtype": dtype} if dtype else {}))
    # the one factory a run's players use too: llama.cpp 16 answers side by side in an 8192-token context, vLLM in
    # the model's own dtype
    policy.sampler = build_sampler(sampler, policy, model, device=device, threads=threads,
                                   dtype=str(policy.model.dtype).removeprefix("torch."), llamacpp_dtype=sampler_dtype,
                                   context=8192, parallel=16)
    return policy


def save_results(out: str | Path, rows: list[dict], scores: dict) -> None:
    """A benchmark's every item (``OUT/results.jsonl``) and its scores (``OUT/scores.json``), each written
    atomically."""
    out = Path(out)
    atomic_write_jsonl(out / "results.jsonl", rows)
    atomic_write_json(out / "scores.json", scores)

"""One policy class for both players: a transformers causal LM with batched sampling and log-probs."""

from __future__ import annotations

import copy
import json
import time
from array import array
from collections.abc import Callable
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path

import numpy as np
import torch
import transformers.modeling_utils
from safetensors.torch import load_model, save_model
from transformers import (
    AutoModelForCausalLM,
    AutoTokenizer,
    GenerationConfig,
    LogitsProcessor,
    LogitsProcessorList,
    PreTrainedModel,
    StoppingCriteria,
    StoppingCriteriaList,
)
from transformers.utils import logging as hf_logging

from genenv.io import umask_modes
from genenv.models.char_level import CharLevelEncoder
from genenv.seeding import grid_keys, sequence_uniforms

META_FILE = "genenv_policy.json"
# a model's ``logits_to_keep`` takes a [rows, columns] boolean mask (transformers 5.20 on); before, one list of
# columns for every row (transformers 5.19, vLLM 0.32's newest)
KEEPS_BY_MASK = hasattr(transformers.modeling_utils, "slice_logits_to_keep")
PROMPT_CACHE_BYTES = 64 * 2**20  # prompt text + int32 token ids the prompt cache holds (then it starts afresh)


@dataclass
class Generation:
    """One sampled response: its text, its tokens (EOS included when produced) and their log-probs."""
    prompt_ids: list[int]
    token_ids: list[int]
    text: str
    logprobs: list[float] = field(default_factory=list)
    finished: bool = True
    error: str | None = None   # a remote simulator's failed request (genenv.models.remote): why, no text


@dataclass
class SequenceBatch:
    """Prompts left-padded, responses right-padded, with explicit position ids."""
    input_ids: torch.Tensor        # [B, P + R]
    attention_mask: torch.Tensor   # [B, P + R]
    position_ids: torch.Tensor     # [B, P + R]
    response_ids: torch.Tensor     # [B, R]
    response_mask: torch.Tensor    # [B, R] float, 1 on real response tokens
    prompt_width: int


def _own_memory(model):
    """Move every parameter and buffer into memory allocated by torch.

    ``from_pretrained`` leaves weights in the memory-mapped safetensors file, at offsets that are not 64-byte
    aligned; on some CPUs the BLAS kernels then take other code paths than for torch's own (aligned)
    allocations and round differently, so a model loaded from disk and the same weights trained in memory gave
    different losses (measured: 5.2e-08 vs 3.5e-08 on another machine). After this, a loaded model's memory is
    laid out like any torch-allocated one (tied weights stay tied: they are one Parameter)."""
    with torch.no_grad():
        for tensor in [*model.parameters(), *model.buffers()]:
            tensor.data = tensor.data.clone(memory_format=torch.contiguous_format)
    return model


def sample_by_inverse_cdf(logprobs: torch.Tensor, uniforms: torch.Tensor, rows_per_block: int = 0) -> torch.Tensor:
    """[B] token ids drawn from the rows of ``logprobs`` ([B, V], normalised), row i by its own uniform
    ``uniforms[i]`` in [0, 1): the first token whose cumulative probability exceeds u times the row's total.
    Exactly a draw from softmax (up to float64 rounding), and a pure function of each row, so a sequence's token
    does not depend on the other rows of its batch. Rows are done a block at a time ([rows, V] float64
    temporaries of about 8 MB unless ``rows_per_block`` is given)."""
    tokens = []
    last = logprobs.shape[-1] - 1
    rows_per_block = rows_per_block or max(1, 2**20 // logprobs.shape[-1])
    for block, u in zip(logprobs.split(rows_per_block), uniforms.split(rows_per_block)):
        cdf = block.double().exp().cumsum(-1)
        threshold = (u.to(cdf) * cdf[:, -1]).unsqueeze(1)
        tokens.append(torch.searchsorted(cdf, threshold, right=True).squeeze(1).clamp_(0, last))
    return torch.cat(tokens) if tokens else torch.zeros(0, dtype=torch.long)


def keyed_draw(scores: torch.Tensor, temperature: float, uniforms: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """[B] tokens drawn from softmax(scores / temperature), row i by its uniform ``uniforms[i]``
    (:func:`sample_by_inverse_cdf`), and [B] their log-probs: the draw of every sampled token, on transformers and
    on llama.cpp (:mod:`genenv.models.llamacpp`) alike."""
    logprobs = torch.log_softmax(scores.float() / temperature, dim=-1)
    tokens = sample_by_inverse_cdf(logprobs, uniforms)
    return tokens, logprobs.gather(1, tokens.unsqueeze(1)).squeeze(1)


def masked_scores(scores: torch.Tensor, allowed: torch.Tensor) -> torch.Tensor:
    """``scores`` with every token outside ``allowed`` (boolean, same shape) at the dtype's lowest value: a
    softmax gives them 0 exactly, and a log-softmax, a log-sum-exp or an entropy stay finite (unlike -inf)."""
    return scores.masked_fill(~allowed.to(scores.device), torch.finfo(scores.dtype).min)


class _StopWhen(StoppingCriteria):
    """``generate``'s ``stop`` on the transformers path: asks it about every row not yet ended, with the row's new
    tokens, and records where each row stopped (``lengths``; None: not stopped). A row that has drawn EOS is
    never asked (transformers pads it from then on), and a stopped row is not asked again."""

    def __init__(self, stop: Callable[[list[int]], bool], prompt_width: int, rows: int, eos: int):
        self.stop, self.prompt_width, self.eos = stop, prompt_width, eos
        self.lengths: list[int | None] = [None] * rows

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor, **kwargs) -> torch.BoolTensor:
        new = input_ids[:, self.prompt_width:].tolist()
        done = torch.zeros(len(new), dtype=torch.bool, device=input_ids.device)
        for row, tokens in enumerate(new):
            if self.lengths[row] is not None:
                done[row] = True
            elif self.eos not in tokens and self.stop(tokens):
                self.lengths[row] = len(tokens)
                done[row] = True
        return done


class _KeyedSampler(LogitsProcessor):
    """Draws every sequence's next token itself, from softmax(scores / temperature) with that sequence's own
    uniforms (:func:`genenv.seeding.sequence_uniforms`), and keeps the drawn token's log-prob; it returns scores
    that leave only that token, which generate()'s greedy step then takes. So a rollout's log-probs cost one
    [B, V] tensor per step, not every step's logits, and a sequence samples the same tokens in any batch.
    With a ``constraint`` (:class:`genenv.constrained.TokenConstraint`) each row's scores outside its shape's
    allowed tokens are masked first, and its matcher takes the drawn token; ``uniforms=None``: greedy (the
    allowed token of highest score)."""

    def __init__(self, temperature: float, uniforms: torch.Tensor | None, prompt_width: int, constraint=None,
                 rows: int = 0):
        self.temperature = temperature
        self.uniforms = uniforms          # [B, max_new_tokens] float64, or None (greedy)
        self.prompt_width = prompt_width
        self.steps: list[torch.Tensor] = []
        self.constraint = constraint
        self.matchers = constraint.start(rows) if constraint is not None else None

    def __call__(self, input_ids: torch.LongTensor, scores: torch.FloatTensor) -> torch.FloatTensor:
        step = input_ids.shape[1] - self.prompt_width
        if self.constraint is not None:
            scores = masked_scores(scores.float(), self.constraint.allowed(self.matchers))
        if self.uniforms is None:
            tokens = scores.argmax(-1)
        else:
            tokens, logprobs = keyed_draw(scores, self.temperature, self.uniforms[:, step])
            self.steps.append(logprobs)
        if self.constraint is not None:
            self.constraint.advance(self.matchers, tokens.tolist())
        chosen = torch.full_like(scores, float("-inf"))
        return chosen.scatter_(1, tokens.unsqueeze(1), 0.0)

    def finish(self, batch_size: int) -> torch.Tensor:
        """[B, steps]: the log-prob of every drawn token."""
        return torch.stack(self.steps, dim=1) if self.steps else torch.zeros((batch_size, 0))


def _entropy(logits: torch.Tensor, logsumexp: torch.Tensor, rows_per_block: int = 8) -> torch.Tensor:
    """Entropy per position, lse - sum softmax(z) z, a few rows at a time (without gradients, a [rows, R, V]
    temporary instead of [B, R, V])."""
    return torch.cat([lse - (torch.softmax(block, dim=-1) * block).sum(-1)
                      for block, lse in zip(logits.split(rows_per_block), logsumexp.split(rows_per_block))])


def _response_logprobs(logits: torch.Tensor, response_ids: torch.Tensor, temperature: float, with_entropy: bool,
                       entropy_grad: bool, allowed: torch.Tensor | None = None):
    """Log-probs [B, R] of ``response_ids`` under ``logits`` [B, R, V] (each a logit minus its row's log-sum-exp:
    no log-softmax over the vocabulary is materialised), and the entropy per token when asked. ``allowed``
    ([B, R, V] boolean, a constrained policy's replayed masks): the distribution over the allowed tokens only,
    the one the sampler drew from."""
    logits = logits.float()
    if temperature and temperature != 1.0:
        logits = logits / temperature
    if allowed is not None:
        logits = masked_scores(logits, allowed)
    logsumexp = torch.logsumexp(logits, dim=-1)
    logp = logits.gather(-1, response_ids.unsqueeze(-1)).squeeze(-1) - logsumexp
    entropy = None
    if with_entropy:
        with nullcontext() if entropy_grad else torch.no_grad():
            entropy = _entropy(logits, logsumexp)
    return logp, entropy


def _messages(prompt) -> list[dict]:
    return [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)


class Policy:
    """A causal LM behind the interface the co-evolution loop needs.

    ``generate`` samples ``n`` responses per prompt with the KV cache and returns per-token log-probs;
    ``token_logprobs`` recomputes them with gradients for training. ``model_seconds`` accumulates the
    wall time spent inside the model (generation, forward, backward, optimiser step) for profiling.
    """

    def __init__(self, model, tokenizer, device: str = "cpu", use_chat_template: bool = False):
        self.model = model.to(device)
        self.tokenizer = tokenizer
        self.device = device
        self.use_chat_template = bool(use_chat_template and getattr(tokenizer, "chat_template", None))
        self.model_seconds = 0.0
        self._adapters_off = False  # a base_view: every forward runs with the LoRA adapters disabled
        self._mode_cache: tuple | None = None  # (model, its modules or None): see set_training
        self._prompt_cache: dict[str, array] = {}
        # sample a prompt's n responses from one prefill of it (PlayerConfig.prefix_cached_sampling)
        self.prefill_once = False
        self.autocast_bf16 = False   # PlayerConfig.autocast: bf16 matrix products, float32 weights
        self.sampler = None     # what draws the tokens instead of this model (sampler=llama.cpp or vllm): None, itself

        self._prompt_cache_bytes = 0
        backend = getattr(tokenizer, "backend_tokenizer", None)
        # a character-level tokenizer (the tiny models'): prompts encoded by dict lookup, the library's ids
        self._char_level = CharLevelEncoder.of(backend) if backend is not None else None
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        tokenizer.padding_side = "left"
        # transformers fills every generation setting a call leaves unset from the model's own
        # generation_config (Qwen2.5-Instruct ships repetition_penalty=1.05, others top_k/top_p/do_sample), so
        # rollouts would not be drawn from softmax(logits / T), whose log-probs GRPO stores, and greedy
        # evaluation would be penalised or even sampled. A neutral config leaves only what generate() sets.
        self.model.generation_config = GenerationConfig(
            pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id, eos_token_id=self.eos_token_id)

    # ------------------------------------------------------------------ bookkeeping
    @contextmanager
    def timed(self):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.model_seconds += time.perf_counter() - start

    def set_training(self, training: bool) -> None:
        """Train or eval mode (dropout and the like), switched only when it changes (the loop asks for a mode
        several times an epoch). When no module overrides ``train`` with more than setting flags, the switch sets
        every module's ``training`` flag from a list kept per model: ``nn.Module.train`` recurses through every
        submodule's ``__setattr__`` (74 us for the tiny default's 33 modules against 2 us; 13 switches an
        epoch)."""
        if self.model.training == training:
            return
        modules = self._flag_only_modules()
        if modules is None:
            self.model.train(training)
            return
        for module in modules:
            module.__dict__["training"] = training

    def _flag_only_modules(self) -> list | None:
        """Every module of the model, when switching its mode means setting the flags and nothing else (each
        module's ``train`` is ``nn.Module``'s, or transformers' without kernels to recast); else None. Kept per
        model object and recomputed when the model is replaced (LoRA) or reconfigured (checkpointing)."""
        if self._mode_cache is None or self._mode_cache[0] is not self.model:
            modules = list(self.model.modules())
            plain = all(type(m).train is torch.nn.Module.train
                        or (type(m).train is PreTrainedModel.train and not getattr(m, "use_kernels", False))
                        for m in modules)
            self._mode_cache = (self.model, modules if plain else None)
        return self._mode_cache[1]

    @property
    def eos_token_id(self) -> int:
        return int(self.tokenizer.eos_token_id)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.model.parameters())

    def frozen_copy(self) -> "Policy":
        """A deep copy with gradients off: the reference policy for KL penalties."""
        ref = Policy(copy.deepcopy(self.model), self.tokenizer, self.device, self.use_chat_template)
        ref.model.eval()
        for param in ref.model.parameters():
            param.requires_grad_(False)
        return ref

    def base_view(self) -> "Policy":
        """The same model with its LoRA adapters switched off: while only adapters train, that is the policy
        before any update, so a LoRA player's KL reference costs no memory at all (no copy of the weights)."""
        if not self.has_lora:
            raise ValueError("base_view needs LoRA adapters (apply_lora first); use frozen_copy otherwise")
        view = Policy(self.model, self.tokenizer, self.device, self.use_chat_template)
        view._adapters_off = True
        return view

    def _forward_context(self):
        """Around every forward pass: the LoRA adapters off for a base view, and bf16 autocast when asked
        (``autocast_bf16``: matrix products in bfloat16, the weights, optimiser state and loss in float32)."""
        adapters = self.model.disable_adapter() if self._adapters_off else nullcontext()
        if not self.autocast_bf16:
            return adapters
        stack = ExitStack()
        stack.enter_context(adapters)
        stack.enter_context(torch.autocast(device_type=torch.device(self.device).type, dtype=torch.bfloat16))
        return stack

    # ------------------------------------------------------------------ text <-> tokens
    def encode_prompt(self, text: str) -> list[int]:
        return self.encode_prompts([text])[0]

    def encode_prompts(self, texts: list) -> list[list[int]]:
        """Token ids of many prompts (chat template applied when enabled).

        A prompt is a string (one user message) or a list of chat messages (``{"role", "content"}`` dicts, e.g.
        a system prompt then the user turn). Without a chat template, messages are joined by blank lines.
        Prompts seen before (evaluation sets, seed tasks) come from a cache bounded in bytes (compact int32
        arrays; multi-turn contexts rarely repeat, and 200,000 of them as Python lists held gigabytes); new ones
        are encoded in one call to the Rust tokenizer (``encode_batch_fast``: no character offsets, which are
        never read), skipping the Python wrapper's per-item conversion, or, for a character-level tokenizer, by
        :class:`~genenv.models.char_level.CharLevelEncoder` (the same ids, a dict lookup per character).
        """
        keys = [t if isinstance(t, str) else json.dumps(t, sort_keys=True) for t in texts]
        todo = {}
        for key, text in zip(keys, texts):
            if key not in self._prompt_cache and key not in todo:
                todo[key] = text
        todo = list(todo.items())
        if todo:
            backend = self.tokenizer.backend_tokenizer
            if self.use_chat_template:
                rendered = [self.tokenizer.apply_chat_template(_messages(t), tokenize=False,
                                                               add_generation_prompt=True) for _, t in todo]
                encoded = [e.ids for e in backend.encode_batch_fast(rendered, add_special_tokens=False)]
            else:
                plain = [t if isinstance(t, str) else "\n\n".join(m["content"] for m in t) for _, t in todo]
                encoded = [self._char_level.encode(t) if self._char_level else None for t in plain]
                rest = [i for i, ids in enumerate(encoded) if ids is None]
                if rest:
                    for i, encoding in zip(rest, backend.encode_batch_fast([plain[i] for i in rest],
                                                                           add_special_tokens=True)):
                        encoded[i] = encoding.ids
            added = sum(len(key) + 4 * len(ids) for (key, _), ids in zip(todo, encoded))
            if self._prompt_cache_bytes + added > PROMPT_CACHE_BYTES:
                self._prompt_cache.clear()
                self._prompt_cache_bytes = 0
            for (key, _), ids in zip(todo, encoded):
                self._prompt_cache[key] = array("i", ids)
            self._prompt_cache_bytes += added
        return [self._prompt_cache[k].tolist() for k in keys]

    def encode_target(self, text: str) -> list[int]:
        """Response tokens for supervised targets, ending with EOS."""
        return self.tokenizer(text, add_special_tokens=False).input_ids + [self.eos_token_id]

    def decode_many(self, sequences: list[list[int]]) -> list[str]:
        eos = self.eos_token_id
        stripped = [[t for t in ids if t != eos] for ids in sequences]
        if not getattr(self.tokenizer, "clean_up_tokenization_spaces", False):
            # what batch_decode does without clean-up, minus the Python wrapper's per-item overhead
            return self.tokenizer.backend_tokenizer.decode_batch(stripped, skip_special_tokens=True)
        return self.tokenizer.batch_decode(stripped, skip_special_tokens=True)

    # ------------------------------------------------------------------ sampling
    @torch.no_grad()
    def generate(self, prompts: list[str], n: int = 1, max_new_tokens: int = 16, temperature: float = 1.0,
                 greedy: bool = False, seed: int = 0, batch_size: int = 512,
                 prompt_ids: list[list[int]] | None = None, keys=None,
                 stop: Callable[[list[int]], bool] | None = None, constraint=None) -> list[list[Generation]]:
        """Sample ``n`` responses for every prompt. Returns one list of ``n`` generations per prompt.

        ``constraint`` (a :class:`genenv.constrained.TokenConstraint`, ``env.constrained``): each step's logits
        outside the allowed tokens are masked out, so the tokens and log-probs are the constrained distribution's
        (score them with the same ``constraint`` in :meth:`token_logprobs`).

        ``stop`` (optional) is asked after every drawn token with the sequence's new tokens so far; when it says
        True the sequence ends there, unfinished (``finished`` False, no EOS), as it would at ``max_new_tokens``:
        an evaluation that needs only a response's first line, say (:class:`StopAfterLine`). Each sequence's
        tokens up to that point are the ones it would have drawn without it.

        Sampling is from the full distribution at ``temperature`` (no top-k/top-p), so the returned
        log-probs are exactly the policy's, as GRPO's importance ratio needs. Sequence j of prompt i draws its
        tokens from uniforms of its own, fixed by ``seed`` and its key: ``keys[i * n + j]`` (one per sequence;
        default :func:`~genenv.seeding.grid_keys`: (i, j)). Callers that split work give every sequence the
        key it has in the whole (a list or uint64 array, :func:`~genenv.seeding.sequence_keys`), and it samples
        the same tokens in any batch (up to floating-point differences between batch shapes in the model's own
        arithmetic).
        """
        if prompt_ids is None:
            prompt_ids = self.encode_prompts(prompts)
        flat = [ids for ids in prompt_ids for _ in range(n)]
        greedy = greedy or temperature == 0.0
        uniforms = None
        if not greedy:
            if keys is None:
                keys = grid_keys(0, len(prompt_ids), n)
            if len(keys) != len(flat):
                raise ValueError(f"generate: {len(keys)} keys for {len(flat)} sequences ({len(prompt_ids)} prompts "
                                 f"x n={n}); give one key per sequence")
            uniforms = torch.from_numpy(sequence_uniforms(seed, keys, max_new_tokens))
        if self.sampler is not None:
            return self._generate_on_engine(prompt_ids, flat, n, max_new_tokens, temperature, uniforms, stop,
                                            constraint)
        # Decoding is generate()'s greedy step either way: a sampled rollout's tokens are drawn by _KeyedSampler,
        # which applies the temperature and keeps each drawn token's log-prob.
        gen_config = GenerationConfig(
            do_sample=False, max_new_tokens=max_new_tokens, pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=self.eos_token_id, bos_token_id=self.tokenizer.bos_token_id)
        self.set_training(False)
        out: list[Generation] = []
        with self.timed(), self._forward_context():
            for start in range(0, len(flat), batch_size):
                chunk = flat[start:start + batch_size]
                chunk_uniforms = None if uniforms is None else uniforms[start:start + batch_size]
                out.extend(self._generate_chunk(chunk, gen_config, chunk_uniforms, temperature, stop, constraint))
        return [out[i * n:(i + 1) * n] for i in range(len(prompt_ids))]

    def _generate_on_engine(self, prompt_ids, flat, n, max_new_tokens, temperature,
                            uniforms, stop=None, constraint=None) -> list[list[Generation]]:
        """``generate`` with the tokens drawn by ``sampler`` (:mod:`genenv.models.llamacpp`) from the same
        per-sequence ``uniforms`` (None: greedy). The log-probs are the sampler's: an update recomputes what it
        trains on (``recompute_old_logprobs``)."""
        with self.timed():
            drawn = [pair for samples in self.sampler.sample(prompt_ids, n, max_new_tokens, temperature,
                                                                  uniforms, stop, constraint) for pair in samples]
        eos = self.eos_token_id
        texts = self.decode_many([tokens for tokens, _ in drawn])
        out = [Generation(list(ids), tokens, text, logprobs, eos in tokens)
               for ids, (tokens, logprobs), text in zip(flat, drawn, texts)]
        return [out[i * n:(i + 1) * n] for i in range(len(prompt_ids))]

    def _generate_chunk(self, chunk, gen_config, uniforms, temperature, stop=None,
                        constraint=None) -> list[Generation]:
        lengths_np = np.fromiter((len(ids) for ids in chunk), dtype=np.int64, count=len(chunk))
        width = int(lengths_np.max())
        left_padded = np.full((len(chunk), width), self.tokenizer.pad_token_id, dtype=np.int64)
        for row, ids in enumerate(chunk):
            left_padded[row, width - len(ids):] = ids
        input_ids = torch.from_numpy(left_padded)
        lengths = torch.from_numpy(lengths_np)
        attention = (torch.arange(width).unsqueeze(0) >= (width - lengths).unsqueeze(1)).long()
        sampler = None
        if uniforms is not None or constraint is not None:
            sampler = _KeyedSampler(float(temperature), None if uniforms is None else uniforms.to(self.device), width,
                                    constraint, len(chunk))
        input_ids, attention = input_ids.to(self.device), attention.to(self.device)
        cache = self._prefill_once(chunk, input_ids, attention) if self.prefill_once else None
        stopper = _StopWhen(stop, width, len(chunk), self.eos_token_id) if stop is not None else None
        sequences = self.model.generate(input_ids=input_ids, attention_mask=attention, past_key_values=cache,
                                        generation_config=gen_config,
                                        logits_processor=LogitsProcessorList([sampler] if sampler else []),
                                        stopping_criteria=StoppingCriteriaList([stopper] if stopper else []))
        new_tokens = sequences[:, width:].cpu()
        eos = self.eos_token_id
        rows = new_tokens.tolist()
        if stopper is not None:   # a stopped row is padded after its last token: cut it there
            rows = [tokens[:length] if length is not None else tokens
                    for tokens, length in zip(rows, stopper.lengths)]
        all_logprobs = sampler.finish(len(chunk)).cpu().tolist() if uniforms is not None else None
        kept, finished = [], []
        for tokens in rows:
            done = eos in tokens
            kept.append(tokens[:tokens.index(eos) + 1] if done else tokens)
            finished.append(done)
        texts = self.decode_many(kept)
        return [Generation(list(ids), tokens, text, all_logprobs[row][:len(tokens)] if all_logprobs else [], done)
                for row, (ids, tokens, text, done) in enumerate(zip(chunk, kept, texts, finished))]

    def _prefill_once(self, chunk: list[list[int]], input_ids: torch.Tensor, attention: torch.Tensor):
        """The KV cache of every row's prompt but its last token, each distinct prompt run through the model once
        and its cache copied to the rows that share it (a task's G rollouts, a seed's variations); generate()
        then runs only the last prompt token and the new ones. None when no two rows share a prompt. The
        positions are generate()'s own (counted from each row's first real token), so the rows see what they
        see today: the same tokens for the same keys, up to floating-point differences between batch shapes."""
        first_row: dict[tuple, int] = {}   # each distinct prompt -> the first row holding it
        for row, ids in enumerate(chunk):
            first_row.setdefault(tuple(ids), row)
        if len(first_row) == len(chunk) or input_ids.shape[1] < 2:
            return None
        order = {key: k for k, key in enumerate(first_row)}   # its place among the distinct prompts
        rows = [order[tuple(ids)] for ids in chunk]
        distinct = torch.tensor(list(first_row.values()), device=self.device)
        mask = attention[distinct]
        positions = (mask.cumsum(-1) - 1).masked_fill_(mask == 0, 1)
        prefill = self.model(input_ids=input_ids[distinct, :-1], attention_mask=mask[:, :-1],
                             position_ids=positions[:, :-1], use_cache=True, logits_to_keep=1)
        cache = prefill.past_key_values
        cache.batch_select_indices(torch.tensor(rows, device=self.device))
        return cache

    # ------------------------------------------------------------------ training forward
    def build_batch(self, prompt_ids: list[list[int]], response_ids: list[list[int]]) -> SequenceBatch:
        """Prompts left-padded and responses right-padded into one [B, P + R] batch (R >= 1), with the attention
        mask, position ids counted from each row's first real token and the response mask. Built in one numpy
        array (one ``torch.tensor`` per sequence was ~8% of the tiny default's loop overhead), filled through the
        masks in one assignment per side (a boolean mask visits its cells row by row, left to right: the order of
        the sequences' tokens laid end to end)."""
        pad = self.tokenizer.pad_token_id
        count = len(prompt_ids)
        prompt_len = np.fromiter(map(len, prompt_ids), dtype=np.int64, count=count)
        resp_len = np.fromiter(map(len, response_ids), dtype=np.int64, count=count)
        width, resp_width = int(prompt_len.max()), max(1, int(resp_len.max()))
        prompt_mask = np.arange(width)[None, :] >= (width - prompt_len)[:, None]
        response_mask = np.arange(resp_width)[None, :] < resp_len[:, None]
        ids = np.full((count, width + resp_width), pad, dtype=np.int64)
        ids[:, :width][prompt_mask] = np.fromiter(chain.from_iterable(prompt_ids), dtype=np.int64,
                                                  count=int(prompt_len.sum()))
        ids[:, width:][response_mask] = np.fromiter(chain.from_iterable(response_ids), dtype=np.int64,
                                                    count=int(resp_len.sum()))
        attention = np.concatenate([prompt_mask, response_mask], axis=1).astype(np.int64)
        position_ids = np.maximum(attention.cumsum(-1) - 1, 0)
        input_ids = torch.from_numpy(ids)
        dev = self.device
        return SequenceBatch(input_ids.to(dev), torch.from_numpy(attention).to(dev),
                             torch.from_numpy(position_ids).to(dev), input_ids[:, width:].to(dev),
                             torch.from_numpy(response_mask.astype(np.float32)).to(dev), width)

    def token_logprobs(self, batch: SequenceBatch, temperature: float = 1.0, with_entropy: bool = False,
                       entropy_grad: bool = False, constraint=None):
        """Log-probs of the response tokens ([B, R]) and optionally the per-token entropy.

        Only the response positions reach the LM head (``logits_to_keep``), and a token's log-prob is its logit
        minus the log-sum-exp of its row, so no log-softmax over the vocabulary is materialised: the one
        [B, R, V] tensor is the logits themselves (what autograd keeps for the backward pass). The entropy is
        computed row block by row block without gradients unless ``entropy_grad`` (an entropy bonus in the
        loss needs them). ``constraint``: the distribution :meth:`generate` drew from under that constraint (each
        response's masks replayed from its tokens)."""
        resp_width = batch.response_ids.shape[1]
        # model time (profiling) covers the forward pass and the head's log-softmax: the policy's log-probs
        with self.timed():
            with self._forward_context():
                logits = self.model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                                    position_ids=batch.position_ids, logits_to_keep=resp_width + 1,
                                    use_cache=False).logits
            # position width-1+t predicts response token t
            allowed = (None if constraint is None
                       else constraint.response_masks(batch.response_ids.cpu(), batch.response_mask.cpu()))
            return _response_logprobs(logits[:, :resp_width], batch.response_ids, temperature, with_entropy,
                                      entropy_grad, allowed)

    def packed_token_logprobs(self, packed, temperature: float = 1.0, with_entropy: bool = False,
                              entropy_grad: bool = False, constraint=None):
        """:meth:`token_logprobs` of a shared-prefix packed batch (:func:`genenv.models.packing.pack_groups`):
        the same [N, R] log-probs (and entropy), each group's common prompt run once. The attention mask goes in
        as a 4D mask the model's own attention applies (boolean for sdpa; for eager additive: 0 where a column
        may attend, the dtype's minimum where not); only the kept columns reach the LM head."""
        dev = self.device
        mask = torch.from_numpy(packed.allowed).to(dev).unsqueeze(1)
        if self.model.config._attn_implementation != "sdpa":   # sdpa takes the boolean mask (any compute dtype)
            dtype = next(self.model.parameters()).dtype
            mask = torch.zeros(mask.shape, dtype=dtype, device=dev).masked_fill_(~mask, torch.finfo(dtype).min)
        keep = torch.from_numpy(packed.keep)
        if not KEEPS_BY_MASK:   # the columns any row keeps, for every row; then each row's own
            columns = keep.any(0).nonzero().squeeze(1)
        with self.timed():
            with self._forward_context():
                logits = self.model(input_ids=torch.from_numpy(packed.input_ids).to(dev), attention_mask=mask,
                                    position_ids=torch.from_numpy(packed.position_ids).to(dev),
                                    logits_to_keep=(keep if KEEPS_BY_MASK else columns).to(dev),
                                    use_cache=False).logits
            if not KEEPS_BY_MASK:
                logits = logits[keep[:, columns].to(dev)]
            index = torch.from_numpy(packed.logit_index).to(dev)
            allowed = (None if constraint is None else constraint.response_masks(
                torch.from_numpy(packed.response_ids), torch.from_numpy(packed.response_mask)))
            return _response_logprobs(logits[index], torch.from_numpy(packed.response_ids).to(dev), temperature,
                                      with_entropy, entropy_grad, allowed)

    # ------------------------------------------------------------------ LoRA (optional, peft)
    @property
    def has_lora(self) -> bool:
        return hasattr(self.model, "peft_config")

    def apply_lora(self, rank: int, alpha: float | None = None, seed: int = 0) -> None:
        """Train LoRA adapters (rank ``rank``) on every linear layer instead of all weights (needs peft).

        The adapters' random initialisation is drawn from ``seed`` alone, not from the global torch stream,
        so a run is the same whether its warm start was trained in-process or loaded from the cache."""
        try:
            from peft import LoraConfig, get_peft_model  # noqa: PLC0415 (optional dependency, imported when used)
        except ImportError:
            raise RuntimeError("lora_rank > 0 needs peft: pip install peft==0.21.2 (`make install` does)") from None
        config = LoraConfig(r=rank, lora_alpha=alpha or 2 * rank, lora_dropout=0.0, target_modules="all-linear",
                            task_type="CAUSAL_LM")
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.model = get_peft_model(self.model, config)

    def _checkpointing_name(self) -> str:
        """transformers 5.20 renamed gradient checkpointing activation checkpointing (5.19, vLLM 0.32's newest, has
        the old names only): the names this one has."""
        return "activation" if hasattr(self.model, "activation_checkpointing_enable") else "gradient"

    @property
    def checkpointing(self) -> bool:
        """Whether the model recomputes its activations in the backward pass (:meth:`set_gradient_checkpointing`)."""
        return bool(getattr(self.model, f"is_{self._checkpointing_name()}_checkpointing"))

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """Recompute activations layer by layer in the backward pass (transformers' gradient checkpointing,
        non-reentrant, so it also works when only LoRA adapters train). Inference is unaffected."""
        self._mode_cache = None
        name = self._checkpointing_name()
        if enabled and not self.checkpointing:
            getattr(self.model, f"{name}_checkpointing_enable")(**{f"{name}_checkpointing_kwargs":
                                                                   {"use_reentrant": False}})
        elif not enabled and self.checkpointing:
            getattr(self.model, f"{name}_checkpointing_disable")()

    def trainable_parameters(self) -> list:
        """The parameters an update changes (all of them, or only the LoRA adapters)."""
        return [p for p in self.model.parameters() if p.requires_grad]

    def num_trainable_parameters(self) -> int:
        return sum(p.numel() for p in self.trainable_parameters())

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> None:
        """An ordinary Hugging Face folder (LoRA adapters merged into the weights)."""
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        hf_logging.disable_progress_bar()
        model = copy.deepcopy(self.model).merge_and_unload() if self.has_lora else self.model
        model.save_pretrained(path, safe_serialization=True)
        self.tokenizer.save_pretrained(path)
        (path / META_FILE).write_text(json.dumps({"use_chat_template": self.use_chat_template}))
        umask_modes(p for p in path.iterdir() if p.is_file())

    def merged_state_dict(self) -> dict[str, torch.Tensor]:
        """The weights under the checkpoint's names, LoRA adapters merged into a copy (the trainer keeps its
        adapters): what another sampler decodes with (llama.cpp's GGUF, vLLM's weight reload)."""
        model = copy.deepcopy(self.model).merge_and_unload() if self.has_lora else self.model
        return {name: tensor.detach() for name, tensor in model.state_dict().items()}

    def save_weights(self, file: str | Path) -> None:
        """Only the weights (safetensors; tied embeddings handled): cheap per-epoch checkpoints."""
        save_model(self.model, str(file))
        umask_modes([file])

    def load_weights(self, file: str | Path) -> None:
        load_model(self.model, str(file), device=str(self.device))

    @classmethod
    def load(cls, path: str | Path, device: str = "cpu", use_chat_template: bool | None = None,
             dtype: str = "float32") -> "Policy":
        path = Path(path)
        if not (path / "config.json").exists():
            raise FileNotFoundError(f"{path}: not a Hugging Face model folder (no config.json)")
        hf_logging.disable_progress_bar()
        model = _own_memory(AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype)))
        tokenizer = AutoTokenizer.from_pretrained(path)
        if use_chat_template is None:
            meta = path / META_FILE
            use_chat_template = json.loads(meta.read_text())["use_chat_template"] if meta.exists() else True
        return cls(model, tokenizer, device, use_chat_template)

"""The sampled phases of a real model on llama.cpp (issue 40, item 3: ``{agent,env}.sampler=llama.cpp``).

llama.cpp (through llama-cpp-python) decodes a small model on CPU several times faster than transformers at
batch 1. It samples; the trainer trains. The policy's weights are written as a GGUF file in the image of the
packaged model's own (:func:`genenv.models.gguf_export.write_gguf`) and loaded into llama.cpp, again whenever an
optimiser step changed them (torch counts every in-place change of a tensor, so a stale copy is never used).

Tokens are drawn as :class:`genenv.models.policy.Policy` draws them, by the same function
(:func:`genenv.models.policy.keyed_draw`): token t of a sequence from softmax(logits / T) by the inverse CDF with
the sequence's own uniform ``u[t]`` (:func:`genenv.seeding.sequence_uniforms`, fixed by the seed and the
sequence's key), greedy by argmax. Only the logits come from llama.cpp, so the same keys give
the same tokens wherever the two engines' logits put the CDF's boundaries alike; llama.cpp's arithmetic is not
torch's, so a sampled sequence can take another token where its uniform falls within rounding of a boundary, and
runs with the engine on are reproducible on one machine and build, not bit for bit across machines or against the
transformers path (greedy answers agree where the top two logits are further apart than that rounding). The
log-probs a :class:`Generation` carries are llama.cpp's; the updates do not use them: GRPO and the simulator's pg
update recompute the old log-probs of the samples they train on with the trainer's own forward pass
(``recompute_old_logprobs``), so sampling mismatches cannot bias the importance ratio.

Samples decode side by side, up to ``parallel`` sequences at a time, several prompts together when they fit the
KV cache: a prompt's samples share its prefill (copies of its cells), and a prompt that starts like the one before
it copies the cells they share and evaluates only what is new.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from genenv.errors import SamplerNotAvailable
from genenv.models.packing import common_prefix_length
from genenv.models.policy import keyed_draw, masked_scores


def llama_cpp_module():
    try:
        import llama_cpp  # noqa: PLC0415
    except ImportError as error:
        raise SamplerNotAvailable("sampler=llama.cpp needs llama-cpp-python (`make install` builds it from its "
                                  f"source distribution): {error}") from error
    from llama_cpp._logger import set_verbose  # noqa: PLC0415

    set_verbose(False)   # llama.cpp's own log: errors only (it prints every graph tensor at load otherwise)
    return llama_cpp


class LlamaCppSampler:
    """Samples for ``policy`` on llama.cpp, from a GGUF of its current weights written in ``template``'s image.

    Samples decode side by side, up to ``parallel`` at a time, as sequences of one batch over a KV cache that holds
    each prompt once (a sample's sequence is a copy of its prompt's cells, not of their memory), the prompts of a
    window in the order given: one pass over the weights per step serves all of them. ``threads``: llama.cpp's
    threads (the run's ``threads``); ``dtype``: the GGUF's weights (f32 keeps the trainer's numbers; f16/bf16 halve
    the memory traffic); ``context``: the KV cells a window's prompts and their samples' tokens share."""

    def __init__(self, policy, template: str | Path | None, threads: int = 1, dtype: str = "f32",
                 context: int = 4096, parallel: int = 16, folder: str | Path | None = None):
        self.llama_cpp = llama_cpp_module()
        self.policy, self.threads, self.dtype = policy, threads, dtype
        self.template = None if template is None else Path(template)
        self.context, self.parallel = context, parallel
        self._folder = tempfile.TemporaryDirectory(prefix="genenv-gguf-", dir=folder)
        self._model = self._ctx = self._batch = None
        self._versions: tuple | None = None
        self._prompt: list[int] = []       # the prompt sequence 0 holds in the KV cache
        self.syncs, self.sync_seconds = 0, 0.0
        self.prompt_tokens = self.prefilled_tokens = 0   # prompts' tokens, and those decoded (not kept from the last)

    def _weights_version(self) -> tuple:
        return tuple(p._version for p in self.policy.model.parameters())

    def sync(self) -> None:
        """Load the policy's current weights into llama.cpp, unless they are the ones loaded."""
        version = self._weights_version()
        if self._ctx is not None and version == self._versions:
            return
        from llama_cpp import _internals  # noqa: PLC0415

        from genenv.models.gguf_export import write_gguf, write_gguf_from_model  # noqa: PLC0415

        start = time.perf_counter()
        path = Path(self._folder.name) / "policy.gguf"
        if self.template is None:
            write_gguf_from_model(self.policy, path, dtype=self.dtype)
        else:
            write_gguf(self.policy, self.template, path, dtype=self.dtype)
        self._close_model()
        lc = self.llama_cpp
        model_params = lc.llama_model_default_params()
        model_params.use_mmap = False   # the file is rewritten after every update
        self._model = _internals.LlamaModel(path_model=str(path), params=model_params, verbose=False)
        params = lc.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = self.context, 512, 512
        params.n_seq_max, params.kv_unified = self.parallel, True
        params.n_threads = params.n_threads_batch = self.threads
        if self.dtype == "f32":   # the KV cache too (llama.cpp's default is f16: logits 0.01 from the trainer's)
            params.type_k = params.type_v = lc.GGML_TYPE_F32
        self._ctx = _internals.LlamaContext(model=self._model, params=params, verbose=False)
        self._batch = _internals.LlamaBatch(n_tokens=max(512, self.parallel), embd=0, n_seq_max=1, verbose=False)
        self._vocab = lc.llama_vocab_n_tokens(self._model.vocab)
        self._versions, self._prompt = version, []
        self.syncs += 1
        self.sync_seconds += time.perf_counter() - start

    def _close_model(self) -> None:
        for part in (self._batch, self._ctx, self._model):
            if part is not None:
                part.close()
        self._model = self._ctx = self._batch = None

    def close(self) -> None:
        self._close_model()
        self._folder.cleanup()

    # ---------------------------------------------------------------- the KV cache and one decode
    def _forget(self, seq: int, from_position: int) -> None:
        """Drop sequence ``seq``'s cells from ``from_position`` on (``seq`` -1: every sequence's)."""
        self.llama_cpp.llama_memory_seq_rm(self._ctx.memory, seq, from_position, -1)

    def _decode(self, rows: list[tuple[int, int, int]], last_only: bool = False) -> list[np.ndarray]:
        """Decode (token, position, sequence) rows as one batch; the logits after each row (``last_only``: after
        the last row only, as for a prompt), copied."""
        batch = self._batch.batch
        for i, (token, position, seq) in enumerate(rows):
            batch.token[i], batch.pos[i], batch.seq_id[i][0], batch.n_seq_id[i], batch.logits[i] = \
                token, position, seq, 1, not last_only
        batch.logits[len(rows) - 1] = True
        batch.n_tokens = len(rows)
        self._ctx.decode(self._batch)
        wanted = [len(rows) - 1] if last_only else range(len(rows))
        return [np.ctypeslib.as_array(self._ctx.get_logits_ith(i), shape=(self._vocab,)).copy() for i in wanted]

    # ---------------------------------------------------------------- sampling
    def sample(self, prompt_ids: list[list[int]], n: int, max_new_tokens: int, temperature: float,
               uniforms: torch.Tensor | None, stop=None,
               constraint=None) -> list[list[tuple[list[int], list[float]]]]:
        """For each prompt, ``n`` (tokens, log-probs) pairs, sample j of prompt i drawn with the uniforms of row
        i * n + j of ``uniforms`` ([prompts * n, max_new_tokens]; None: greedy). The tokens end at the EOS token
        when one was drawn; the log-probs are llama.cpp's at ``temperature`` (empty when greedy), for the record
        only: the updates recompute them with the trainer (``recompute_old_logprobs``). ``stop``: ``Policy.generate``'s
        (a sample it says True for ends there); ``constraint``: its masks (``env.constrained``), the same draw.

        The samples decode in windows of up to ``parallel`` sequences, several prompts side by side when they fit
        (:meth:`_windows`), each prompt's cells copied from the cells it shares with the prompt before it."""
        self.sync()
        for prompt in prompt_ids:
            if len(prompt) + max_new_tokens > self.context:
                raise ValueError(f"sampler=llama.cpp: a prompt of {len(prompt)} tokens plus {max_new_tokens} new ones "
                                 f"passes its context of {self.context} (llamacpp.context)")
        out: list[list] = [[None] * n for _ in prompt_ids]
        for window in self._windows(prompt_ids, n, max_new_tokens):
            for (i, first, _), pair in zip(window, self._decode_window(prompt_ids, window, n, max_new_tokens,
                                                                       temperature, uniforms, stop,
                                                                       constraint)):
                out[i][first:first + len(pair)] = pair
        return out

    def _windows(self, prompt_ids: list[list[int]], n: int, max_new_tokens: int) -> list[list[tuple[int, int, int]]]:
        """The samples as windows of (prompt, first sample, count) jobs, in the prompts' order: a window holds at
        most ``parallel`` sequences, and its prompts' cells (what each does not share with the one before) plus
        every sample's new tokens fit the ``context``."""
        windows: list[list[tuple[int, int, int]]] = []
        window: list[tuple[int, int, int]] = []
        sequences = cells = 0
        previous: list[int] = []
        for i, prompt in enumerate(prompt_ids):
            width = max(1, min(self.parallel, (self.context - len(prompt)) // max(1, max_new_tokens)))
            for first in range(0, n, width):
                count = min(n, first + width) - first
                shared = common_prefix_length([previous, prompt]) if window else 0
                new_cells = len(prompt) - shared + count * max_new_tokens
                if window and (sequences + count > self.parallel or cells + new_cells > self.context):
                    windows.append(window)
                    window, sequences, cells = [], 0, 0
                    new_cells = len(prompt) + count * max_new_tokens
                window.append((i, first, count))
                sequences, cells, previous = sequences + count, cells + new_cells, prompt
        if window:
            windows.append(window)
        return windows

    def _decode_window(self, prompt_ids, window, n, max_new_tokens, temperature, uniforms, stop=None,
                       constraint=None) -> list[list]:
        """Decode one window's jobs side by side: job k's samples in sequences ``base_k`` onwards. Before, sequence
        0 holds the last window's last prompt (``self._prompt``) and no other sequence anything; after, the same
        for this window's last prompt."""
        lc, memory = self.llama_cpp, self._ctx.memory
        starts, logits = [], []
        base, held = 0, self._prompt   # held: the prompt sequence ``held_seq`` keeps
        held_seq = 0
        for k, (i, _, count) in enumerate(window):
            prompt = prompt_ids[i]
            common = min(common_prefix_length([held, prompt]), len(prompt) - 1)
            if k == 0:
                self._forget(0, common)
            else:
                lc.llama_memory_seq_cp(memory, held_seq, base, 0, common)
            self.prompt_tokens += len(prompt)
            self.prefilled_tokens += len(prompt) - common
            for first in range(common, len(prompt), 512):
                chunk = prompt[first:first + 512]
                after = self._decode([(token, first + j, base) for j, token in enumerate(chunk)], last_only=True)[0]
            for seq in range(base + 1, base + count):   # a copy of the prompt's cells, not of their memory
                lc.llama_memory_seq_cp(memory, base, seq, -1, -1)
            starts += [len(prompt)] * count
            logits += [after] * count
            held, held_seq, base = prompt, base, base + count
        rows = None
        if uniforms is not None:
            rows = torch.cat([uniforms[i * n + first:i * n + first + count] for i, first, count in window])
        drawn = self._decode_together(logits, starts, max_new_tokens, temperature, rows, stop, constraint)
        for seq in range(base):   # keep only the last prompt's cells, in sequence 0
            if seq != held_seq:
                self._forget(seq, 0)
        self._forget(held_seq, len(held))
        if held_seq != 0:
            lc.llama_memory_seq_cp(memory, held_seq, 0, -1, -1)
            self._forget(held_seq, 0)
        self._prompt = list(held)
        out, at = [], 0
        for _, _, count in window:
            out.append(drawn[at:at + count])
            at += count
        return out

    def _decode_together(self, logits: list[np.ndarray], starts: list[int], max_new_tokens: int, temperature: float,
                         uniforms: torch.Tensor | None, stop=None,
                         constraint=None) -> list[tuple[list[int], list[float]]]:
        """Sample k in sequence k of the cache, which holds its prompt of ``starts[k]`` tokens whose last logits
        are ``logits[k]``; every sample decoded one token per step, each step's tokens drawn together
        (:func:`genenv.models.policy.keyed_draw`, the transformers path's own draw)."""
        eos = self.policy.eos_token_id
        count = len(starts)
        tokens: list[list[int]] = [[] for _ in range(count)]
        logprobs: list[list[float]] = [[] for _ in range(count)]
        rows = list(logits)
        alive = list(range(count))
        matchers = constraint.start(count) if constraint is not None else None
        for t in range(max_new_tokens):
            scores = torch.from_numpy(np.stack([rows[k] for k in alive]))
            if constraint is not None:
                live = [matchers[k] for k in alive]
                scores = masked_scores(scores.float(), constraint.allowed(live))
            if uniforms is None:
                drawn = scores.argmax(-1)
                for k, token in zip(alive, drawn.tolist()):
                    tokens[k].append(token)
            else:
                drawn, drawn_logprobs = keyed_draw(scores, temperature, uniforms[alive, t])
                for k, token, logprob in zip(alive, drawn.tolist(), drawn_logprobs.tolist()):
                    tokens[k].append(token)
                    logprobs[k].append(logprob)
            if constraint is not None:
                constraint.advance(live, drawn.tolist())
            alive = [k for k in alive if tokens[k][-1] != eos and not (stop is not None and stop(tokens[k]))]
            if not alive or t == max_new_tokens - 1:
                break
            for k, row in zip(alive, self._decode([(tokens[k][-1], starts[k] + t, k) for k in alive])):
                rows[k] = row
        return list(zip(tokens, logprobs))




def packaged_sampler(policy, model: str, **options) -> LlamaCppSampler:
    """A :class:`LlamaCppSampler` for ``policy`` of ``model``: its weights written in the image of the packaged
    GGUF file of the packaged model named ``model`` (smollm2) or of the one a model folder ``model`` is in the image
    of (:func:`~genenv.models.registry.packaged_image`), else a GGUF written from the policy's own config and
    tokenizer (:func:`~genenv.models.gguf_export.write_gguf_from_model`); ``options`` as the class takes them. A
    model llama.cpp cannot decode (:func:`~genenv.models.registry.llamacpp_refusal`) is a ValueError."""
    from genenv.models.registry import KNOWN_MODELS, llamacpp_refusal, packaged_file, packaged_image  # noqa: PLC0415

    refusal = llamacpp_refusal(model)
    if refusal:
        raise ValueError(refusal)
    name = packaged_image(model)
    return LlamaCppSampler(policy, None if name is None else packaged_file(KNOWN_MODELS[name]), **options)

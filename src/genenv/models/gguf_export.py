"""A trained Llama-architecture policy written as a GGUF file, for llama.cpp to sample from (issue 40, item 3).

The fast inference engine reads GGUF. A policy that started from a packaged GGUF model (SmolLM2) is written back
in that file's image: every metadata field of the template (architecture, sizes, rope, the tokenizer's
vocabulary, merges and special tokens, the chat template) is copied, and the tensors are the policy's own
weights, in float32 (bit for bit what the trainer holds), float16, bfloat16 or 8-bit blocks (q8_0). Names
follow gguf's own Hugging Face -> GGUF map. Llama's query and key projections are stored in llama.cpp's rotary
layout (each head's rows as interleaved pairs rather than two halves), the layout transformers' GGUF reader undoes
on load, so reading the file back with transformers gives the policy's weights again (tested).

LoRA adapters are merged into a copy of the weights first (peft's ``merge_and_unload`` on a copy): llama.cpp
gets the model the trainer samples from.
"""

from __future__ import annotations

import functools
import json
import os
import time
from pathlib import Path

import numpy as np

SKIPPED_FIELDS = ("GGUF.", "general.file_type", "general.quantization_version")
DTYPES = ("f32", "f16", "bf16", "q8_0")


def to_rotary_layout(weight: np.ndarray, heads: int) -> np.ndarray:
    """A Hugging Face q/k projection [heads * dim, in] in llama.cpp's layout: within each head, rows (r, r + dim/2)
    become neighbours (2r, 2r + 1)."""
    half = weight.shape[0] // heads // 2
    return weight.reshape(heads, 2, half, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def _state_dict(policy) -> dict:
    return {name: tensor.float().cpu().numpy() for name, tensor in policy.merged_state_dict().items()}


def _add_tensors(writer, policy, names, dtype: str, rotary: bool, norm_offset: bool = False) -> int:
    """The policy's tensors under their GGUF names (``names``: gguf's map for the architecture) in ``dtype``; q and k
    in llama.cpp's rotary layout where ``rotary`` (the llama architecture's), 1 added to every RMSNorm weight where
    ``norm_offset`` (Gemma's norms scale by 1 + w, llama.cpp's by w). Returns how many were added."""
    import gguf  # noqa: PLC0415

    config = policy.model.config
    count = 0
    tied = getattr(config, "tie_word_embeddings", False)
    for name, weight in _state_dict(policy).items():
        if name == "lm_head.weight" and tied:
            continue   # the embeddings are the output layer (llama.cpp reads token_embd when output is absent)
        target = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if target is None:
            raise ValueError(f"no GGUF name for the policy's tensor {name!r}")
        if rotary and name.endswith("self_attn.q_proj.weight"):
            weight = to_rotary_layout(weight, config.num_attention_heads)
        elif rotary and name.endswith("self_attn.k_proj.weight"):
            weight = to_rotary_layout(weight, config.num_key_value_heads)
        if norm_offset and name.endswith("norm.weight"):
            weight = weight + 1.0
        if weight.ndim >= 2 and dtype == "f16":
            weight = weight.astype(np.float16)
        elif weight.ndim >= 2 and dtype in ("bf16", "q8_0"):   # q8_0: blocks of 32 with one scale each
            kind = gguf.GGMLQuantizationType.BF16 if dtype == "bf16" else gguf.GGMLQuantizationType.Q8_0
            writer.add_tensor(target, gguf.quants.quantize(weight, kind), raw_dtype=kind)
            count += 1
            continue
        writer.add_tensor(target, np.ascontiguousarray(weight))
        count += 1
    return count


def _file_type(gguf, dtype: str):
    return {"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
            "bf16": gguf.LlamaFileType.MOSTLY_BF16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[dtype]


def _start(gguf, out: str | Path, arch: str, dtype: str):
    """A GGUFWriter for architecture ``arch`` writing a temporary file beside ``out`` (renamed by :func:`_finish`),
    with ``dtype`` checked; returns (writer, temporary, out, start time)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
    out = Path(out)
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    return gguf.GGUFWriter(str(temporary), arch), temporary, out, time.perf_counter()


def _finish(writer, temporary: Path, out: Path, count: int, start: float) -> dict:
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(temporary, out)
    return {"tensors": count, "bytes": out.stat().st_size, "seconds": time.perf_counter() - start}


@functools.lru_cache(maxsize=4)
def _template_fields(path: str, mtime_ns: int, size: int) -> tuple[str, int, tuple]:
    """A GGUF template's architecture, block count and the metadata fields a written file copies: (key, contents,
    type, array item type), read once per file version (the key holds its mtime and size). Parsing SmolLM2's took
    about 9 s (its vocabulary is some 300k fields), paid again at every llama.cpp weight sync before."""
    import gguf  # noqa: PLC0415 (part of the real extra)
    reader = gguf.GGUFReader(path)
    arch = str(reader.fields["general.architecture"].contents())
    blocks = int(reader.fields["llama.block_count"].contents()) if arch == "llama" else 0
    fields = []
    for key, field in reader.fields.items():
        if key.startswith(SKIPPED_FIELDS) or key == "general.architecture":
            continue
        kind = field.types[0]
        fields.append((key, field.contents(), kind, field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None))
    return arch, blocks, tuple(fields)


def write_gguf(policy, template: str | Path, out: str | Path, dtype: str = "f32") -> dict:
    """Write ``policy``'s weights as a GGUF file ``out`` in the image of ``template`` (the GGUF it came from).
    Returns what it wrote: the tensor count, the bytes and the seconds it took. Written to a temporary file and
    renamed, so a reader never sees half a file."""
    import gguf  # noqa: PLC0415 (part of the real extra)

    config = policy.model.config
    stat = Path(template).stat()
    arch, blocks, fields = _template_fields(str(template), stat.st_mtime_ns, stat.st_size)
    if arch != "llama":
        raise ValueError(f"{template}: architecture {arch!r}; only llama GGUF templates are written")
    if blocks != config.num_hidden_layers:
        raise ValueError(f"{template}: {blocks} blocks, the policy has {config.num_hidden_layers}")
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, blocks)
    writer, temporary, out, start = _start(gguf, out, arch, dtype)
    for key, contents, kind, sub in fields:
        writer.add_key_value(key, contents, kind, sub_type=sub)
    writer.add_file_type(_file_type(gguf, dtype))
    count = _add_tensors(writer, policy, names, dtype, rotary=True)
    return _finish(writer, temporary, out, count, start)


# transformers model_type -> (llama.cpp's architecture, gguf's MODEL_ARCH name, q/k stored in the rotary layout of
# the llama architecture, RMSNorm weights stored as 1 + w): the architectures a GGUF is written for from the
# model's own config and tokenizer (:func:`write_gguf_from_model`)
ARCHITECTURES = {"llama": ("llama", "LLAMA", True, False), "mistral": ("llama", "LLAMA", True, False),
                 "qwen2": ("qwen2", "QWEN2", False, False), "qwen3": ("qwen3", "QWEN3", False, False),
                 "gemma3_text": ("gemma3", "GEMMA3", False, True), "phi3": ("phi3", "PHI3", False, False)}


def gguf_refusal(config: dict) -> str | None:
    """Why a GGUF cannot be written from a model of this config (``config.json``'s mapping): its architecture is
    not one written here, or it uses a setting the writer does not carry over (rope scaling, a partial rotary
    factor, attention or final logit soft-capping); None when it can be."""
    kind = config.get("model_type")
    if kind not in ARCHITECTURES:
        return f"architecture {kind!r} is not written as GGUF here (written: {', '.join(sorted(ARCHITECTURES))})"
    scaling = config.get("rope_scaling") or {}
    if isinstance(scaling, dict) and (scaling.get("rope_type") or scaling.get("type")) not in (None, "default"):
        return f"{kind} with rope scaling {scaling!r} is not written as GGUF here"
    if config.get("partial_rotary_factor", 1.0) not in (None, 1.0):
        return f"{kind} with a partial rotary factor is not written as GGUF here"
    if config.get("attn_logit_softcapping") or config.get("final_logit_softcapping"):
        return f"{kind} with logit soft-capping is not written as GGUF here"
    return None


def _tokenizer_fields(writer, tokenizer, vocab_size: int) -> None:
    """The tokenizer's vocabulary (padded to the model's rows), its merges or scores, token types and special
    tokens, and chat template. A byte-level BPE (GPT-2's layout: Llama 3, Qwen) is llama.cpp's ``gpt2`` model with
    its merges; a BPE with byte fallback (SentencePiece's layout: Gemma, Phi-3, Mistral) is its ``llama`` model,
    each token scored by its merge order (a later merge, a lower score)."""
    import gguf  # noqa: PLC0415

    state = json.loads(tokenizer.backend_tokenizer.to_str())
    model = state["model"]
    special = {token["id"] for token in state.get("added_tokens", []) if token.get("special")}
    byte_fallback = bool(model.get("byte_fallback"))
    by_id = {index: token for token, index in tokenizer.get_vocab().items()}
    tokens, types, scores = [], [], []
    for index in range(vocab_size):
        token = by_id.get(index, f"[PAD{index}]")
        tokens.append(token)
        if index in special:
            types.append(gguf.TokenType.CONTROL)
        elif index not in by_id:
            types.append(gguf.TokenType.UNUSED)
        elif byte_fallback and len(token) == 6 and token.startswith("<0x") and token.endswith(">"):
            types.append(gguf.TokenType.BYTE)
        else:
            types.append(gguf.TokenType.NORMAL)
        scores.append(0.0 if index in special else -float(index))
    writer.add_tokenizer_model("llama" if byte_fallback else "gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    if byte_fallback:
        writer.add_token_scores(scores)
    else:
        writer.add_token_merges([m if isinstance(m, str) else " ".join(m) for m in model.get("merges", [])])
    for name, add in (("bos", writer.add_bos_token_id), ("eos", writer.add_eos_token_id),
                      ("pad", writer.add_pad_token_id), ("unk", writer.add_unk_token_id)):
        index = getattr(tokenizer, f"{name}_token_id")
        if index is not None:
            add(int(index))
    writer.add_add_bos_token(False)   # (genenv hands llama.cpp token ids, its own bos included)
    if tokenizer.chat_template:
        writer.add_chat_template(tokenizer.chat_template)


def write_gguf_from_model(policy, out: str | Path, dtype: str = "f32") -> dict:
    """Write ``policy`` as a GGUF file ``out`` from its own config and tokenizer (no template): the architecture's
    hyperparameters, the tokenizer (:func:`_tokenizer_fields`) and the weights under gguf's tensor names for the
    architecture. For the architectures of :data:`ARCHITECTURES`; another is a ValueError saying why
    (:func:`gguf_refusal`). Written to a temporary file and renamed."""
    import gguf  # noqa: PLC0415

    config = policy.model.config
    refusal = gguf_refusal(config.to_dict())
    if refusal:
        raise ValueError(refusal)
    arch, arch_name, rotary, norm_offset = ARCHITECTURES[config.model_type]
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    writer, temporary, out, start = _start(gguf, out, arch, dtype)
    # (a neutral name: llama.cpp sets some tokens' attributes by the model's name, "phi3" -> "<unk>" must exist)
    writer.add_name("genenv policy")
    writer.add_context_length(int(config.max_position_embeddings))
    writer.add_embedding_length(int(config.hidden_size))
    writer.add_block_count(int(config.num_hidden_layers))
    writer.add_feed_forward_length(int(config.intermediate_size))
    writer.add_head_count(int(heads))
    writer.add_head_count_kv(int(kv_heads))
    writer.add_key_length(int(head_dim))
    writer.add_value_length(int(head_dim))
    writer.add_rope_dimension_count(int(head_dim))
    writer.add_layer_norm_rms_eps(float(config.rms_norm_eps))
    theta = getattr(config, "rope_theta", None)
    if theta is None:   # (newer transformers keep it in rope_parameters)
        theta = (getattr(config, "rope_parameters", None) or {}).get("rope_theta", 10000.0)
    writer.add_rope_freq_base(float(theta))
    if arch == "gemma3":
        writer.add_sliding_window(int(config.sliding_window))
    writer.add_file_type(_file_type(gguf, dtype))
    _tokenizer_fields(writer, policy.tokenizer, int(policy.model.get_output_embeddings().weight.shape[0]))
    names = gguf.get_tensor_name_map(getattr(gguf.MODEL_ARCH, arch_name), int(config.num_hidden_layers))
    count = _add_tensors(writer, policy, names, dtype, rotary=rotary, norm_offset=norm_offset)
    return _finish(writer, temporary, out, count, start)

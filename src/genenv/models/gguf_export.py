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

import copy
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
    model = policy.model
    if hasattr(model, "peft_config"):   # merged on a copy: the trainer keeps its adapters
        model = copy.deepcopy(model).merge_and_unload()
    return {name: tensor.detach().float().cpu().numpy() for name, tensor in model.state_dict().items()}


def write_gguf(policy, template: str | Path, out: str | Path, dtype: str = "f32") -> dict:
    """Write ``policy``'s weights as a GGUF file ``out`` in the image of ``template`` (the GGUF it came from).
    Returns what it wrote: the tensor count, the bytes and the seconds it took. Written to a temporary file and
    renamed, so a reader never sees half a file."""
    import gguf  # noqa: PLC0415 (part of the real extra)

    if dtype not in DTYPES:
        raise ValueError(f"dtype: {dtype!r} is not one of {', '.join(DTYPES)}")
    start = time.perf_counter()
    config = policy.model.config
    reader = gguf.GGUFReader(str(template))
    arch = str(reader.fields["general.architecture"].contents())
    if arch != "llama":
        raise ValueError(f"{template}: architecture {arch!r}; only llama GGUF templates are written")
    blocks = int(reader.fields["llama.block_count"].contents())
    if blocks != config.num_hidden_layers:
        raise ValueError(f"{template}: {blocks} blocks, the policy has {config.num_hidden_layers}")
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, blocks)
    out = Path(out)
    temporary = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    writer = gguf.GGUFWriter(str(temporary), arch)
    for key, field in reader.fields.items():
        if key.startswith(SKIPPED_FIELDS) or key == "general.architecture":
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(key, field.contents(), kind, sub_type=sub)
    writer.add_file_type({"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                          "bf16": gguf.LlamaFileType.MOSTLY_BF16, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[dtype])
    count = 0
    tied = getattr(config, "tie_word_embeddings", False)
    for name, weight in _state_dict(policy).items():
        if name == "lm_head.weight" and tied:
            continue   # the embeddings are the output layer (llama.cpp reads token_embd when output is absent)
        target = names.get_name(name, try_suffixes=(".weight", ".bias"))
        if target is None:
            raise ValueError(f"no GGUF name for the policy's tensor {name!r}")
        if name.endswith("self_attn.q_proj.weight"):
            weight = to_rotary_layout(weight, config.num_attention_heads)
        elif name.endswith("self_attn.k_proj.weight"):
            weight = to_rotary_layout(weight, config.num_key_value_heads)
        if weight.ndim >= 2 and dtype == "f16":
            weight = weight.astype(np.float16)
        elif weight.ndim >= 2 and dtype in ("bf16", "q8_0"):   # q8_0: blocks of 32 with one scale each
            kind = gguf.GGMLQuantizationType.BF16 if dtype == "bf16" else gguf.GGMLQuantizationType.Q8_0
            writer.add_tensor(target, gguf.quants.quantize(weight, kind), raw_dtype=kind)
            count += 1
            continue
        writer.add_tensor(target, np.ascontiguousarray(weight))
        count += 1
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    os.replace(temporary, out)
    return {"tensors": count, "bytes": out.stat().st_size, "seconds": time.perf_counter() - start}

"""Small random-weight Hugging Face folders of the architectures people train agents with, built offline.

Each :class:`Family` pairs a transformers config class with the tokenizer layout and chat template of that family
(ChatML for Qwen, Llama 3's headers, Gemma's turns, Phi-3's tags, Mistral's ``[INST]``): what a folder of a real
checkpoint of the family looks like to genenv, at a size a CPU test runs in seconds. :func:`random_folder` writes
one (weights drawn from ``seed`` alone; the tokenizer a BPE trained on the texts given, byte-level for the
families whose tokenizers are byte-level, SentencePiece-style with byte fallback for the others), so a test or a
user checks every path of genenv against an architecture without downloading its weights.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedTokenizerFast
from transformers.utils import logging as hf_logging

CHATML = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
          "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
LLAMA3 = ("{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
          "{{ m['content'] }}<|eot_id|>{% endfor %}"
          "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")
GEMMA = ("{{ bos_token }}{% for m in messages %}<start_of_turn>"
         "{{ 'model' if m['role'] == 'assistant' else 'user' }}\n{{ m['content'] }}<end_of_turn>\n{% endfor %}"
         "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}")
PHI3 = ("{% for m in messages %}<|{{ m['role'] }}|>\n{{ m['content'] }}<|end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")
MISTRAL = ("{{ bos_token }}{% for m in messages %}{% if m['role'] == 'assistant' %}{{ m['content'] }}{{ eos_token }}"
           "{% else %}[INST] {{ m['content'] }}[/INST]{% endif %}{% endfor %}")


@dataclass(frozen=True)
class Family:
    """One architecture family: its transformers ``model_type``, config values beyond the shared small shape, the
    tokenizer layout and its special tokens (``eos`` ends an assistant turn: generation stops there)."""
    model_type: str
    chat_template: str
    layout: str                       # "byte_level" (GPT-2 style) or "sentencepiece" (Metaspace, byte fallback)
    bos: str
    eos: str
    pad: str
    extra_tokens: tuple[str, ...] = ()
    config: dict[str, Any] = field(default_factory=dict)


FAMILIES: dict[str, Family] = {
    "llama": Family("llama", LLAMA3, "byte_level", "<|begin_of_text|>", "<|eot_id|>", "<|finetune_right_pad_id|>",
                    ("<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>"),
                    {"num_key_value_heads": 1, "tie_word_embeddings": True}),
    "qwen2": Family("qwen2", CHATML, "byte_level", "<|endoftext|>", "<|im_end|>", "<|endoftext|>",
                    ("<|im_start|>",), {"num_key_value_heads": 1, "tie_word_embeddings": True}),
    "qwen3": Family("qwen3", CHATML, "byte_level", "<|endoftext|>", "<|im_end|>", "<|endoftext|>",
                    ("<|im_start|>", "<think>", "</think>"),
                    {"num_key_value_heads": 1, "head_dim": 16, "tie_word_embeddings": True}),
    "gemma3_text": Family("gemma3_text", GEMMA, "sentencepiece", "<bos>", "<end_of_turn>", "<pad>",
                          ("<eos>", "<start_of_turn>"),
                          {"num_key_value_heads": 1, "head_dim": 16, "sliding_window": 512,
                           "query_pre_attn_scalar": 16, "tie_word_embeddings": True}),
    "phi3": Family("phi3", PHI3, "sentencepiece", "<s>", "<|end|>", "<|endoftext|>",
                   ("<unk>", "</s>", "<|user|>", "<|assistant|>", "<|system|>"), {"num_key_value_heads": 2}),
    "mistral": Family("mistral", MISTRAL, "sentencepiece", "<s>", "</s>", "<unk>", ("[INST]", "[/INST]"),
                      {"num_key_value_heads": 1, "head_dim": 16, "sliding_window": None}),
}


def build_tokenizer(family: Family, texts: list[str], vocab_size: int = 384) -> PreTrainedTokenizerFast:
    """A BPE tokenizer in the family's layout, trained on ``texts`` (deterministic for the same texts), with the
    family's special tokens and chat template. Every text encodes: byte-level covers every byte, the
    SentencePiece layout falls back to byte tokens."""
    specials = list(dict.fromkeys([family.pad, family.bos, family.eos, *family.extra_tokens]))
    if family.layout == "byte_level":
        core = Tokenizer(models.BPE())
        core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        core.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials, show_progress=False,
                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    else:
        byte_tokens = [f"<0x{b:02X}>" for b in range(256)]
        core = Tokenizer(models.BPE(byte_fallback=True, unk_token=None))
        core.normalizer = normalizers.Replace(" ", "\u2581")
        core.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="never", split=False)
        # (byte tokens first: a '\u2581' the vocabulary lacks comes back as its three bytes, then is replaced)
        core.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Fuse(), decoders.Replace("\u2581", " ")])
        trainer = trainers.BpeTrainer(vocab_size=vocab_size + 256, special_tokens=specials + byte_tokens,
                                      show_progress=False, initial_alphabet=["\u2581"])
    core.train_from_iterator(texts, trainer=trainer)
    bos_id = core.token_to_id(family.bos)
    core.post_processor = processors.TemplateProcessing(single=f"{family.bos} $A",
                                                        special_tokens=[(family.bos, bos_id)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token=family.bos, eos_token=family.eos,
                                        pad_token=family.pad, additional_special_tokens=list(family.extra_tokens))
    tokenizer.chat_template = family.chat_template
    return tokenizer


def random_folder(name: str, path: str | Path, texts: list[str], *, hidden_size: int = 32, layers: int = 2,
                  heads: int = 2, intermediate_size: int = 64, max_positions: int = 1024, seed: int = 0,
                  chat_template: str | None = None, head_dim: int | None = None) -> Path:
    """Write a random-weight folder of family ``name`` (a key of :data:`FAMILIES`) at ``path``: its config, its
    weights (drawn from ``seed`` alone) and a tokenizer trained on ``texts``, with the family's chat template or
    ``chat_template`` (e.g. a released checkpoint's, which renders tools). ``head_dim``: the attention heads' width
    (default: the family's small one, else hidden_size / heads; vLLM's CPU attention takes 32 or more). Returns the
    folder."""
    if name not in FAMILIES:
        raise ValueError(f"{name!r}: not a known architecture family; choose from {', '.join(FAMILIES)}")
    family = FAMILIES[name]
    tokenizer = build_tokenizer(family, texts)
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    config = AutoConfig.for_model(
        family.model_type, vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=intermediate_size,
        num_hidden_layers=layers, num_attention_heads=heads, max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **{**family.config, **({} if head_dim is None else {"head_dim": head_dim}),
           **({"query_pre_attn_scalar": head_dim} if head_dim is not None and "query_pre_attn_scalar" in family.config
              else {})})
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config)
    path = Path(path)
    hf_logging.disable_progress_bar()
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)
    return path


__all__ = ["FAMILIES", "Family", "build_tokenizer", "random_folder"]

"""The embedded default models: tiny Llama-architecture LMs with a character-level tokenizer.

Nothing is downloaded: the tokenizer is built with the ``tokenizers`` library over the domain's alphabet
(one token per character plus [PAD]/[BOS]/[EOS]/[UNK]) and the model from a ``LlamaConfig``. Both are
ordinary Hugging Face objects, saved as a normal model folder.
"""

from __future__ import annotations

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from genenv.config import TinyModelConfig
from genenv.models.policy import Policy

SPECIAL_TOKENS = ["[PAD]", "[BOS]", "[EOS]", "[UNK]"]


def build_char_tokenizer(alphabet: str) -> PreTrainedTokenizerFast:
    """A character-level tokenizer: every character of ``alphabet`` is one token; BOS is prepended."""
    chars = sorted(set(alphabet))
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + chars)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex("."), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(single="[BOS] $A", special_tokens=[("[BOS]", vocab["[BOS]"])])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[PAD]", bos_token="[BOS]",
                                        eos_token="[EOS]", unk_token="[UNK]", padding_side="left")
    return tokenizer


def build_tiny_policy(cfg: TinyModelConfig, alphabet: str, seed: int, device: str = "cpu") -> Policy:
    """A freshly initialised tiny Llama (weights fixed by ``seed``) with its char tokenizer."""
    tokenizer = build_char_tokenizer(alphabet)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_heads,
        max_position_embeddings=cfg.max_positions, tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    return Policy(model, tokenizer, device=device, use_chat_template=False)

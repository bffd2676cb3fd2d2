"""The embedded default models: tiny Llama-architecture LMs with a character-level tokenizer.

Nothing is downloaded: the tokenizer is built with the ``tokenizers`` library over the domain's alphabet
(one token per character plus [PAD]/[BOS]/[EOS]/[UNK]) and the model from a ``LlamaConfig``. Both are
ordinary Hugging Face objects, saved as a normal model folder.

A domain may also name whole words (``Domain.tiny_words``): each becomes one token, with and without a
leading space, wherever it stands as a whole word; everything else stays one token per character, so any
text over the alphabet still encodes and decodes exactly. A name the agent must copy from its prompt
("countertop 1") is then two tokens instead of twelve characters (household prompts: 3.6x shorter).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

from genenv.models.policy import Policy

if TYPE_CHECKING:   # (an annotation only: the models sit below the config, which reads their registry)
    from genenv.config import TinyModelConfig

SPECIAL_TOKENS = ["[PAD]", "[BOS]", "[EOS]", "[UNK]"]
# '.' does not match a newline in the tokenizers library's regex engine: with it, "\n\n" was one unmatched
# piece and encoded as [UNK] (version 1); a character class matches every character (version 2)
ANY_CHARACTER = r"[\s\S]"
TOKENIZER_VERSION = 2   # bump when the construction below changes: cached tiny warm starts then retrain


def tokenizer_fingerprint(alphabet: str, words: Sequence[str] = ()) -> str:
    """What determines a tiny tokenizer, for cache keys."""
    payload = repr((TOKENIZER_VERSION, sorted(set(alphabet)), sorted(set(words))))
    return hashlib.sha256(payload.encode()).hexdigest()[:12]


def word_pattern(words: Sequence[str]) -> str:
    """The pre-tokenizer's regex: a listed word, after one space or no letter/digit/underscore and followed by
    none (longest words first, so 'cabinet' wins over 'cab'), else any single character."""
    if not words:
        return ANY_CHARACTER
    alternatives = "|".join(re.escape(word) for word in sorted(set(words), key=lambda w: (-len(w), w)))
    return f"(?: |(?<![A-Za-z0-9_]))(?:{alternatives})(?![A-Za-z0-9_])|{ANY_CHARACTER}"


def build_tiny_tokenizer(alphabet: str, words: Sequence[str] = ()) -> PreTrainedTokenizerFast:
    """The tiny models' tokenizer: every character of ``alphabet`` is one token, and every word of ``words``
    (which must be spelled in the alphabet) too, with and without a leading space; BOS is prepended."""
    chars = sorted(set(alphabet))
    unknown = sorted({c for word in words for c in word} - set(chars))
    if unknown or any(not word or " " in word for word in words):
        raise ValueError(f"tiny tokenizer words must be non-empty, without spaces and spelled in the alphabet "
                         f"(characters outside it: {''.join(unknown)!r})")
    word_tokens = [token for word in sorted(set(words)) for token in (word, " " + word) if token not in chars]
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS + chars + word_tokens)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(word_pattern(words)), behavior="isolated")
    core.decoder = decoders.Fuse()
    core.post_processor = processors.TemplateProcessing(single="[BOS] $A", special_tokens=[("[BOS]", vocab["[BOS]"])])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[PAD]", bos_token="[BOS]",
                                        eos_token="[EOS]", unk_token="[UNK]", padding_side="left")
    return tokenizer


def build_tiny_policy(cfg: TinyModelConfig, alphabet: str, seed: int, device: str = "cpu",
                      words: Sequence[str] = ()) -> Policy:
    """A freshly initialised tiny Llama (weights fixed by ``seed``) with its char (+ ``words``) tokenizer."""
    tokenizer = build_tiny_tokenizer(alphabet, words)
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

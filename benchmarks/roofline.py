"""How far each real-model phase is from what this CPU can do (issue 60, item 1): a roofline measured here.

The roofs, measured: the attainable matrix-multiply rate (``torch.nn.functional.linear`` on SmolLM2's layer shapes,
float32 and bfloat16, at each ``--threads``; the best of the shapes at ``--roof-tokens`` rows is the compute roof)
and the memory bandwidth (a copy of ``--bandwidth-mb`` MB, bytes read + written per second; the best of copy and
sum). For a phase of arithmetic intensity I (FLOPs per byte of compulsory memory traffic) the attainable rate is
``min(compute roof, I x bandwidth)``.

The phases, SmolLM2-135M-Instruct's real weights (float32, the presets' dtype), timed by genenv's own code paths
or the model's forward as genenv's sampler calls it:

- ``prefill``: one prompt of ``--prompt-tokens`` through the model, logits of the last position only;
- ``decode``: ``--decode-batch`` sequences with ``--context`` tokens cached each take ``--decode-steps`` tokens,
  one forward per token (the KV cache read every step);
- ``grpo step``: ``genenv.algos.grpo.grpo_step`` on ``--train-seqs`` samples of prompt + ``--response-tokens``
  (gradient checkpointing, micro-batches of 2, a KL reference, AdamW: the smollm2-apibank preset's settings);
- ``simulator update``: ``genenv.algos.rwr.rwr_update``, one step on ``--train-seqs`` examples of
  ``--sim-prompt-tokens`` + ``--sim-target-tokens`` (the paper's update; its KL measurement passes included).

FLOPs: prefill and decode analytically (:func:`forward_flops`: the matrix multiplies of the projections, the MLP,
the LM head on the positions whose logits are kept, and causal attention's useful products; a decode step's count
equals ``torch.utils.flop_counter``'s, ``tests/test_roofline.py``); the two training phases by that counter on one
run of genenv's code (:func:`counted_flops`, whatever passes the code makes). Bytes are the compulsory traffic
(every weight read once per pass, the KV cache per decode step, AdamW's state), so a phase's intensity is an upper
bound and its attainable rate too. Measure on an idle machine.

    .venv/bin/python benchmarks/roofline.py                       # both thread counts, both dtypes (about 5 min)
    .venv/bin/python benchmarks/roofline.py --threads 2 --quick   # smaller shapes, a quick look
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Shape:
    """A Llama decoder's sizes (SmolLM2-135M: 30 layers, hidden 576, 9 heads of 64, 3 KV heads, MLP 1536)."""
    layers: int = 30
    hidden: int = 576
    heads: int = 9
    kv_heads: int = 3
    head_dim: int = 64
    intermediate: int = 1536
    vocab: int = 49152

    @classmethod
    def of(cls, config) -> Shape:
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        return cls(config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
                   config.num_key_value_heads, head_dim, config.intermediate_size, config.vocab_size)

    @property
    def layer_matrices(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each of a layer's weight matrices, and the LM head's."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        return {"q_proj": (self.hidden, q), "k_proj / v_proj": (self.hidden, kv), "o_proj": (q, self.hidden),
                "gate_proj / up_proj": (self.hidden, self.intermediate), "down_proj": (self.intermediate, self.hidden),
                "lm_head": (self.hidden, self.vocab)}

    @property
    def parameters(self) -> int:
        """Weights read by one forward pass (the tied embedding read once, as the LM head; norms ignored)."""
        q, kv = self.heads * self.head_dim, self.kv_heads * self.head_dim
        per_layer = self.hidden * q + 2 * self.hidden * kv + q * self.hidden + 3 * self.hidden * self.intermediate
        return self.layers * per_layer + self.vocab * self.hidden


def linear_flops_per_token(shape: Shape) -> int:
    """FLOPs of one token through every layer's projections and MLP (2 per multiply-add)."""
    return 2 * (shape.parameters - shape.vocab * shape.hidden)


def attention_flops(shape: Shape, queries: int, context_before: int, causal_block: bool) -> int:
    """FLOPs of attention's two products (scores and the weighted sum, 2 x heads x head_dim per key each) for
    ``queries`` new positions after ``context_before`` cached ones; ``causal_block``: the new positions are one
    sequence's and attend to each other causally (a prefill), else each is one sequence's next token and attends to
    its own ``context_before`` cached positions and itself (a decode step of ``queries`` sequences)."""
    width = shape.heads * shape.head_dim
    if causal_block:
        keys = queries * context_before + queries * (queries + 1) // 2
    else:
        keys = queries * (context_before + 1)
    return shape.layers * 4 * width * keys


def forward_flops(shape: Shape, tokens: int, logit_positions: int, attention: int) -> int:
    """One forward pass: ``tokens`` through the layers, ``logit_positions`` through the LM head, plus attention."""
    return tokens * linear_flops_per_token(shape) + logit_positions * 2 * shape.hidden * shape.vocab + attention


def attainable(intensity: float, compute_roof: float, bandwidth: float) -> float:
    """The roofline: the rate a kernel of ``intensity`` FLOPs per byte can reach, FLOP/s."""
    return min(compute_roof, intensity * bandwidth)


def kv_cache_bytes(shape: Shape, sequences: int, positions: int, element_bytes: int) -> int:
    """Bytes of the keys and values cached for ``positions`` of ``sequences``."""
    return 2 * shape.layers * shape.kv_heads * shape.head_dim * sequences * positions * element_bytes


def counted_flops(fn, shape: Shape, tokens: int, logit_positions: int, attention: int) -> tuple[int, float]:
    """A training phase's FLOPs: ``fn()`` run once under ``torch.utils.flop_counter`` (its matrix multiplies,
    forward and backward, however many passes the code makes), plus attention's products where the counter saw none
    (PyTorch's CPU attention kernel has no FLOP formula): one forward's ``attention`` for every forward-equivalent
    pass it counted. Returns the FLOPs and those passes (the counted FLOPs over one forward's multiplies)."""
    from torch.utils.flop_counter import FlopCounterMode  # noqa: PLC0415
    with FlopCounterMode(display=False) as counter:
        fn()
    total = counter.get_total_flops()
    passes = total / forward_flops(shape, tokens, logit_positions, 0)
    attention_counted = any("attention" in str(op) and n for ops in counter.get_flop_counts().values()
                            for op, n in ops.items())
    return (total if attention_counted else total + round(passes * attention)), passes


def training_bytes(shape: Shape, passes: float, element_bytes: int = 4) -> int:
    """A training step's compulsory traffic: the weights read once per forward-equivalent pass, and AdamW's update
    (read the weight, its gradient and both moments, write the weight and both moments: 7 per parameter)."""
    return round((passes + 7) * shape.parameters * element_bytes)


# ---------------------------------------------------------------------------------------------- the roofs, measured
def timed(fn, repeats: int) -> float:
    """Median seconds of ``fn()`` over ``repeats`` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def matmul_rates(shape: Shape, rows: int, dtype: torch.dtype, repeats: int) -> dict[str, float]:
    """FLOP/s of ``F.linear`` (rows x in) @ (out x in)^T for each of the layer's matrices."""
    rates = {}
    generator = torch.Generator().manual_seed(0)
    for name, (n_in, n_out) in shape.layer_matrices.items():
        x = torch.randn(rows, n_in, generator=generator).to(dtype)
        w = torch.randn(n_out, n_in, generator=generator).to(dtype)
        with torch.no_grad():
            seconds = timed(lambda x=x, w=w: torch.nn.functional.linear(x, w), repeats)
        rates[name] = 2 * rows * n_in * n_out / seconds
    return rates


def bandwidth(megabytes: int, repeats: int) -> dict[str, float]:
    """Bytes per second of a copy (read + write) and of a sum (read) of ``megabytes`` of float32."""
    source = torch.ones(megabytes * 2**20 // 4)
    target = torch.empty_like(source)
    nbytes = source.numel() * 4
    return {"copy": 2 * nbytes / timed(lambda: target.copy_(source), repeats),
            "sum": nbytes / timed(lambda: source.sum(), repeats)}


# ---------------------------------------------------------------------------------------------- the phases, measured
def load_smollm2():
    from genenv.models.policy import Policy  # noqa: PLC0415
    from genenv.models.registry import resolve_model  # noqa: PLC0415
    return Policy.load(resolve_model("smollm2"), use_chat_template=False)


def phase_prefill(policy, shape: Shape, args) -> tuple[float, int, int]:
    ids = torch.randint(100, shape.vocab - 100, (1, args.prompt_tokens), generator=torch.Generator().manual_seed(1))

    def step():
        with torch.no_grad():
            policy.model(input_ids=ids, use_cache=True, logits_to_keep=1)
    seconds = timed(step, args.repeats)
    flops = forward_flops(shape, args.prompt_tokens, 1, attention_flops(shape, args.prompt_tokens, 0, True))
    nbytes = shape.parameters * 4 + kv_cache_bytes(shape, 1, args.prompt_tokens, 4)
    return seconds, flops, nbytes


def phase_decode(policy, shape: Shape, args) -> tuple[float, int, int]:
    from transformers import DynamicCache  # noqa: PLC0415
    batch, context, steps = args.decode_batch, args.context, args.decode_steps
    ids = torch.randint(100, shape.vocab - 100, (batch, context), generator=torch.Generator().manual_seed(2))
    nxt = torch.randint(100, shape.vocab - 100, (batch, 1), generator=torch.Generator().manual_seed(3))

    def decode():
        cache = DynamicCache()
        with torch.no_grad():
            policy.model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            start = time.perf_counter()
            for _ in range(steps):
                policy.model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
            return time.perf_counter() - start
    decode()
    seconds = statistics.median(decode() for _ in range(args.repeats))
    flops = sum(forward_flops(shape, batch, batch, attention_flops(shape, batch, context + s, False))
                for s in range(steps))
    nbytes = steps * shape.parameters * 4 + sum(kv_cache_bytes(shape, batch, context + s + 1, 4) for s in range(steps))
    return seconds, flops, nbytes


def training_phase(policy, step, shape: Shape, args, prompt_tokens: int, target_tokens: int) -> tuple[float, int, int]:
    """``step(optimizer)`` on ``--train-seqs`` sequences of prompt + target tokens, from the same weights each time
    (a fresh AdamW each call): counted once (:func:`counted_flops`), then timed; the weights restored after."""
    start_state = {k: v.clone() for k, v in policy.model.state_dict().items()}

    def fresh_step():
        step(torch.optim.AdamW(policy.trainable_parameters(), lr=1e-7))
        policy.model.load_state_dict(start_state)
    tokens = prompt_tokens + target_tokens
    flops, passes = counted_flops(fresh_step, shape, args.train_seqs * tokens, args.train_seqs * (target_tokens + 1),
                                  args.train_seqs * attention_flops(shape, tokens, 0, True))
    return timed(fresh_step, args.repeats), flops, training_bytes(shape, passes)


def phase_grpo(policy, reference, shape: Shape, args) -> tuple[float, int, int]:
    from genenv.algos.grpo import PolicySample, grpo_step  # noqa: PLC0415
    rng = np.random.default_rng(4)
    samples = [PolicySample(rng.integers(100, 40000, args.prompt_tokens).tolist(),
                            rng.integers(100, 40000, args.response_tokens).tolist(),
                            (rng.normal(size=args.response_tokens) * 0.3 - 3.0).tolist(), float(rng.normal()))
               for _ in range(args.train_seqs)]

    def step(optimizer):
        grpo_step(policy, reference, optimizer, samples, kl_coef=0.001, micro_batch=2)
    return training_phase(policy, step, shape, args, args.prompt_tokens, args.response_tokens)


def phase_rwr(policy, reference, shape: Shape, args) -> tuple[float, int, int]:
    from genenv.algos.rwr import WeightedExample, rwr_update  # noqa: PLC0415
    rng = np.random.default_rng(5)
    examples = [WeightedExample(rng.integers(100, 40000, args.sim_prompt_tokens).tolist(),
                                rng.integers(100, 40000, args.sim_target_tokens).tolist(), 1.0)
                for _ in range(args.train_seqs)]

    def step(optimizer):
        rwr_update(policy, reference, optimizer, examples, steps=1, batch_size=args.train_seqs, kl_coef=0.05,
                   max_kl=1e9, rng=np.random.default_rng(0))
    return training_phase(policy, step, shape, args, args.sim_prompt_tokens, args.sim_target_tokens)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--roof-tokens", type=int, default=512, help="rows of the matrix multiplies of the roof")
    parser.add_argument("--bandwidth-mb", type=int, default=512)
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--decode-batch", type=int, default=16)
    parser.add_argument("--decode-steps", type=int, default=16)
    parser.add_argument("--response-tokens", type=int, default=48)
    parser.add_argument("--train-seqs", type=int, default=8)
    parser.add_argument("--sim-prompt-tokens", type=int, default=160)
    parser.add_argument("--sim-target-tokens", type=int, default=320)
    parser.add_argument("--quick", action="store_true", help="small sizes: a look, not a measurement")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.roof_tokens, args.bandwidth_mb = 1, 128, 128
        args.prompt_tokens = args.context = 128
        args.decode_steps, args.train_seqs, args.sim_target_tokens = 4, 2, 64
    threads = [int(t) for t in args.threads.split(",")]
    shape = Shape()
    print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{torch.backends.cpu.get_cpu_capability()} kernels")
    roofs: dict[tuple[int, str], float] = {}
    bandwidths: dict[int, float] = {}
    print(f"\nMatrix multiplies on SmolLM2's shapes, {args.roof_tokens} rows (GFLOP/s)")
    names = list(shape.layer_matrices)
    print("| threads | dtype | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for n in threads:
        torch.set_num_threads(n)
        for dtype in (torch.float32, torch.bfloat16):
            rates = matmul_rates(shape, args.roof_tokens, dtype, args.repeats)
            roofs[(n, str(dtype).removeprefix("torch."))] = max(rates.values())
            print(f"| {n} | {str(dtype).removeprefix('torch.')} | "
                  + " | ".join(f"{rates[k] / 1e9:.1f}" for k in names) + " |", flush=True)
        measured = bandwidth(args.bandwidth_mb, args.repeats)
        bandwidths[n] = max(measured.values())
        print(f"memory, {n} thread(s): copy {measured['copy'] / 1e9:.1f} GB/s, sum {measured['sum'] / 1e9:.1f} GB/s",
              flush=True)
    policy = load_smollm2()
    policy.set_gradient_checkpointing(True)
    reference = policy.frozen_copy()
    shape = Shape.of(policy.model.config)
    print("\nSmolLM2-135M phases, float32 (compute roof: the best float32 multiply above; bandwidth: the best above)")
    print("| phase | threads | seconds | GFLOP/s | FLOPs per byte | attainable GFLOP/s | fraction |")
    print("|---|---|---|---|---|---|---|")
    for n in threads:
        torch.set_num_threads(n)
        phases = {"prefill": lambda: phase_prefill(policy, shape, args),
                  "decode": lambda: phase_decode(policy, shape, args),
                  "grpo step": lambda: phase_grpo(policy, reference, shape, args),
                  "simulator update": lambda: phase_rwr(policy, reference, shape, args)}
        for name, measure in phases.items():
            seconds, flops, nbytes = measure()
            intensity = flops / nbytes
            roof = attainable(intensity, roofs[(n, "float32")], bandwidths[n])
            print(f"| {name} | {n} | {seconds:.3f} | {flops / seconds / 1e9:.1f} | {intensity:.1f} | "
                  f"{roof / 1e9:.1f} | {flops / seconds / roof:.0%} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

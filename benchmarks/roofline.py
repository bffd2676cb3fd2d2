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
    python3 benchmarks/roofline.py --device cuda --dtype bfloat16 --model DIR   # a GPU (benchmarks/gpu.sh)

``--device cuda``: the same tables on a GPU, the roofs at ``--roof-tokens`` rows (pass 8192 for a GPU's peak)
and the phases in ``--dtype`` (bfloat16: prefill and decode with bf16 weights, the training phases in bf16
autocast over float32 weights and AdamW state, as ``autocast=bfloat16`` trains). ``--model DIR``: a
Hugging Face folder; one without weights (config and tokenizer only) gets SmolLM2's shapes with random weights
(seed 0), which time the same arithmetic (a forward's cost does not depend on the weights' values; only where
sampling stops does, so the rollout row counts the tokens it drew). ``--rollouts B``: a row of genenv's own
``Policy.generate`` (``B`` prompts x ``--group-size`` responses of up to ``--max-new-tokens``): rollouts and tokens
per second. ``--profile``: after the phase rows, the operators each phase spends its time in (torch.profiler),
which names what a phase below half its roof does besides multiplying. ``--side-by-side 1,4,16``: that many
processes, each its own model on the same device, sampling
rollouts for ``--seconds``: the rollouts per second of all of them together (how many runs one device holds).
"""

from __future__ import annotations

import argparse
import copy
import platform
import queue
import statistics
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from _shapes import synchronize


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


def _no_flops(*args, out_shape=None, **kwargs) -> int:
    return 0


def counted_flops(fn, shape: Shape, tokens: int, logit_positions: int, attention: int) -> tuple[int, float]:
    """A training phase's FLOPs: ``fn()`` run once under ``torch.utils.flop_counter`` (its matrix multiplies,
    forward and backward, however many passes the code makes), plus attention's products where the counter saw none
    (PyTorch's CPU attention kernel has no FLOP formula): one forward's ``attention`` for every forward-equivalent
    pass it counted. Returns the FLOPs and those passes (the counted FLOPs over one forward's multiplies)."""
    from torch.utils.flop_counter import FlopCounterMode  # noqa: PLC0415
    # attention's kernels counted as none and added analytically below, on every device: torch's formulas for the
    # GPU kernels reject grouped-query shapes (9 query heads over 3 KV heads: "shapes are incompatible")
    ignored = {getattr(torch.ops.aten, name): _no_flops for name in dir(torch.ops.aten)
               if "scaled_dot_product" in name and name.endswith(("attention", "attention_backward"))}
    with FlopCounterMode(display=False, custom_mapping=ignored) as counter:
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
def timed(fn, repeats: int, device: str = "cpu") -> float:
    """Median seconds of ``fn()`` over ``repeats`` calls after one warm-up call (a GPU synchronised around
    each)."""
    fn()
    times = []
    for _ in range(repeats):
        synchronize(device)
        start = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def matmul_rates(shape: Shape, rows: int, dtype: torch.dtype, repeats: int, device: str = "cpu") -> dict[str, float]:
    """FLOP/s of ``F.linear`` (rows x in) @ (out x in)^T for each of the layer's matrices."""
    rates = {}
    generator = torch.Generator().manual_seed(0)
    for name, (n_in, n_out) in shape.layer_matrices.items():
        x = torch.randn(rows, n_in, generator=generator).to(device, dtype)
        w = torch.randn(n_out, n_in, generator=generator).to(device, dtype)
        with torch.no_grad():
            seconds = timed(lambda x=x, w=w: torch.nn.functional.linear(x, w), repeats, device)
        rates[name] = 2 * rows * n_in * n_out / seconds
    return rates


def bandwidth(megabytes: int, repeats: int, device: str = "cpu") -> dict[str, float]:
    """Bytes per second of a copy (read + write) and of a sum (read) of ``megabytes`` of float32."""
    source = torch.ones(megabytes * 2**20 // 4, device=device)
    target = torch.empty_like(source)
    nbytes = source.numel() * 4
    return {"copy": 2 * nbytes / timed(lambda: target.copy_(source), repeats, device),
            "sum": nbytes / timed(lambda: source.sum(), repeats, device)}


# ---------------------------------------------------------------------------------------------- the phases, measured
def load_smollm2(model_dir: str | None = None, device: str = "cpu"):
    """SmolLM2-135M-Instruct's real weights (``genenv.models.registry``), or the Hugging Face folder ``model_dir``;
    a folder without weights (its config and tokenizer only) is built with random weights from its config (seed 0):
    the same shapes and arithmetic where the weights cannot be brought (a GPU machine reached through a 64 MiB
    copy)."""
    from genenv.models.policy import Policy  # noqa: PLC0415
    from genenv.models.registry import resolve_model  # noqa: PLC0415
    path = Path(model_dir) if model_dir else resolve_model("smollm2")
    if any(path.glob("*.safetensors")) or any(path.glob("*.bin")):
        return Policy.load(path, device=device, use_chat_template=False), "real weights"
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer  # noqa: PLC0415
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path), dtype=torch.float32)
    return Policy(model, AutoTokenizer.from_pretrained(path), device, use_chat_template=False), "random weights"


def _id_margin(shape: Shape) -> int:
    """How far token ids keep from the vocabulary's ends (its special tokens): 100, a quarter of a tiny one."""
    return min(100, shape.vocab // 4)


def random_ids(shape: Shape, size: tuple[int, ...], seed: int, device: str) -> torch.Tensor:
    margin = _id_margin(shape)
    return torch.randint(margin, shape.vocab - margin, size, generator=torch.Generator().manual_seed(seed)).to(device)


def phase_prefill(model, shape: Shape, args, element_bytes: int = 4, profile: list | None = None
                  ) -> tuple[float, int, int]:
    ids = random_ids(shape, (1, args.prompt_tokens), 1, args.device)

    def step():
        with torch.no_grad():
            model(input_ids=ids, use_cache=True, logits_to_keep=1)
    seconds = timed(step, args.repeats, args.device)
    if profile is not None:
        profile[:] = operator_shares(step)
    flops = forward_flops(shape, args.prompt_tokens, 1, attention_flops(shape, args.prompt_tokens, 0, True))
    nbytes = (shape.parameters + kv_cache_bytes(shape, 1, args.prompt_tokens, 1)) * element_bytes
    return seconds, flops, nbytes


def phase_decode(model, shape: Shape, args, element_bytes: int = 4, batch: int | None = None,
                 profile: list | None = None) -> tuple[float, int, int]:
    from transformers import DynamicCache  # noqa: PLC0415
    batch, context, steps = batch or args.decode_batch, args.context, args.decode_steps
    ids = random_ids(shape, (batch, context), 2, args.device)
    nxt = random_ids(shape, (batch, 1), 3, args.device)

    def decode():
        cache = DynamicCache()
        with torch.no_grad():
            model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
            synchronize(args.device)
            start = time.perf_counter()
            for _ in range(steps):
                model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
            synchronize(args.device)
            return time.perf_counter() - start
    decode()
    seconds = statistics.median(decode() for _ in range(args.repeats))
    if profile is not None:
        profile[:] = decode_profile(model, shape, args, batch)
    flops = sum(forward_flops(shape, batch, batch, attention_flops(shape, batch, context + s, False))
                for s in range(steps))
    nbytes = (steps * shape.parameters + sum(kv_cache_bytes(shape, batch, context + s + 1, 1)
                                             for s in range(steps))) * element_bytes
    return seconds, flops, nbytes


def operator_shares(fn, top: int = 8, calls: int = 1) -> list[tuple[str, float, float]]:
    """Where ``fn``'s time goes (``--profile``): torch's profiler over one call; the ``top`` operators by their own
    CPU time, as (name, milliseconds per ``calls``, share of the call's wall time). What a phase below half its
    roof spends outside the multiplies is what this names."""
    from torch.profiler import ProfilerActivity, profile  # noqa: PLC0415
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        start = time.perf_counter()
        fn()
        wall = time.perf_counter() - start
    rows = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)[:top]
    return [(e.key, e.self_cpu_time_total / 1e3 / calls, e.self_cpu_time_total / 1e6 / wall) for e in rows]


def decode_profile(model, shape: Shape, args, batch: int, top: int = 8) -> list[tuple[str, float, float]]:
    """:func:`operator_shares` of the ``--decode-steps`` steps after a prefill, per step."""
    from transformers import DynamicCache  # noqa: PLC0415
    ids = random_ids(shape, (batch, args.context), 2, args.device)
    nxt = random_ids(shape, (batch, 1), 3, args.device)
    cache = DynamicCache()

    def steps():
        for _ in range(args.decode_steps):
            model(input_ids=nxt, past_key_values=cache, use_cache=True, logits_to_keep=1)
    with torch.no_grad():
        model(input_ids=ids, past_key_values=cache, use_cache=True, logits_to_keep=1)
        return operator_shares(steps, top, calls=args.decode_steps)


def training_phase(policy, step, shape: Shape, args, prompt_tokens: int, target_tokens: int,
                   profile: list | None = None) -> tuple[float, int, int]:
    """``step(optimizer)`` on ``--train-seqs`` sequences of prompt + target tokens, as a run past its first step
    takes it: one AdamW whose state exists (a first step made before timing), the weights and that state put back
    before each timed step, outside its seconds (a fresh AdamW would time its state's allocation, a gigabyte of
    zeros on SmolLM2, which a run pays once). Counted once (:func:`counted_flops`), then timed (median of
    ``--repeats``); the weights restored after. With ``profile`` (a list), one more step's
    :func:`operator_shares` is put in it."""
    start_weights = {k: v.clone() for k, v in policy.model.state_dict().items()}
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=1e-7)
    step(optimizer)
    start_optimizer = copy.deepcopy(optimizer.state_dict())

    def restore():
        policy.model.load_state_dict(start_weights)
        optimizer.load_state_dict(copy.deepcopy(start_optimizer))

    def restored_step():
        restore()
        step(optimizer)
    tokens = prompt_tokens + target_tokens
    flops, passes = counted_flops(restored_step, shape, args.train_seqs * tokens,
                                  args.train_seqs * (target_tokens + 1),
                                  args.train_seqs * attention_flops(shape, tokens, 0, True))
    times = []
    for _ in range(args.repeats):
        restore()
        synchronize(args.device)
        began = time.perf_counter()
        step(optimizer)
        synchronize(args.device)
        times.append(time.perf_counter() - began)
    if profile is not None:
        restore()
        profile[:] = operator_shares(lambda: step(optimizer))
    policy.model.load_state_dict(start_weights)
    return statistics.median(times), flops, training_bytes(shape, passes)


def _id_range(shape: Shape) -> tuple[int, int]:
    """The training phases' token ids: 100 to 40,000 on SmolLM2, inside a tiny vocabulary's middle."""
    low = _id_margin(shape)
    return low, min(40000, shape.vocab - low)


def phase_grpo(policy, reference, shape: Shape, args, profile: list | None = None) -> tuple[float, int, int]:
    from genenv.algos.grpo import PolicySample, grpo_step  # noqa: PLC0415
    rng, low, high = np.random.default_rng(4), *_id_range(shape)
    samples = [PolicySample(rng.integers(low, high, args.prompt_tokens).tolist(),
                            rng.integers(low, high, args.response_tokens).tolist(),
                            (rng.normal(size=args.response_tokens) * 0.3 - 3.0).tolist(), float(rng.normal()))
               for _ in range(args.train_seqs)]

    def step(optimizer):
        grpo_step(policy, reference, optimizer, samples, kl_coef=0.001, micro_batch=2)
    return training_phase(policy, step, shape, args, args.prompt_tokens, args.response_tokens, profile)


def phase_rwr(policy, reference, shape: Shape, args, profile: list | None = None) -> tuple[float, int, int]:
    from genenv.algos.rwr import WeightedExample, rwr_update  # noqa: PLC0415
    rng, low, high = np.random.default_rng(5), *_id_range(shape)
    examples = [WeightedExample(rng.integers(low, high, args.sim_prompt_tokens).tolist(),
                                rng.integers(low, high, args.sim_target_tokens).tolist(), 1.0)
                for _ in range(args.train_seqs)]

    def step(optimizer):
        rwr_update(policy, reference, optimizer, examples, steps=1, batch_size=args.train_seqs, kl_coef=0.05,
                   max_kl=1e9, rng=np.random.default_rng(0))
    return training_phase(policy, step, shape, args, args.sim_prompt_tokens, args.sim_target_tokens, profile)


def rollout_prompts(count: int, seed: int = 0) -> list[str]:
    """``count`` distinct short task prompts (rollouts of a tool-calling agent start from prompts like these)."""
    rng = np.random.default_rng(seed)
    return [f"Task {i}: call the API that adds {a} and {b}, then report the result as JSON."
            for i, (a, b) in enumerate(rng.integers(10, 10**6, (count, 2)).tolist())]


def rollouts_per_second(policy, prompts: int, group_size: int, max_new_tokens: int, repeats: int,
                        seed: int = 0) -> tuple[float, float, float]:
    """genenv's ``Policy.generate`` (sampled at temperature 1, keyed) of ``prompts`` x ``group_size`` responses:
    (rollouts per second, drawn tokens per second, mean tokens per rollout), the median of ``repeats`` calls after
    a warm-up."""
    texts = rollout_prompts(prompts, seed)
    drawn = []

    def sample():
        out = policy.generate(texts, n=group_size, max_new_tokens=max_new_tokens, temperature=1.0, seed=seed)
        drawn.append(sum(len(g.token_ids) for group in out for g in group))
    seconds = timed(sample, repeats, policy.device)
    tokens = statistics.median(drawn)
    return prompts * group_size / seconds, tokens / seconds, tokens / (prompts * group_size)


def _side_by_side_worker(args, barrier, results) -> None:
    """One of ``--side-by-side`` processes: its own model on the device, sampling rollouts for ``args.seconds``
    once every process is ready."""
    torch.set_num_threads(1)
    policy, _ = load_smollm2(args.model, args.device)
    if args.dtype == "bfloat16":
        policy.model.to(torch.bfloat16)
    texts = rollout_prompts(args.rollouts)
    policy.generate(texts, n=args.group_size, max_new_tokens=args.max_new_tokens, temperature=1.0, seed=0)
    barrier.wait()
    synchronize(args.device)
    start, rollouts, calls = time.perf_counter(), 0, 0
    while time.perf_counter() - start < args.seconds:
        policy.generate(texts, n=args.group_size, max_new_tokens=args.max_new_tokens, temperature=1.0, seed=calls)
        rollouts += len(texts) * args.group_size
        calls += 1
    synchronize(args.device)
    results.put(rollouts / (time.perf_counter() - start))


def side_by_side(args, processes: int) -> tuple[float, float]:
    """Rollouts per second of ``processes`` models sampling at once on one device: (all together, per process)."""
    import multiprocessing  # noqa: PLC0415
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(processes), context.Queue()
    workers = [context.Process(target=_side_by_side_worker, args=(args, barrier, results)) for _ in range(processes)]
    for worker in workers:
        worker.start()
    rates, deadline = [], time.monotonic() + args.seconds + 600
    while len(rates) < processes:   # a worker that dies is an error here, not a wait until the deadline
        try:
            rates.append(results.get(timeout=1.0))
        except queue.Empty:
            dead = [w.exitcode for w in workers if w.exitcode not in (None, 0)]
            if dead or time.monotonic() > deadline:
                for worker in workers:
                    worker.kill()
                raise RuntimeError(f"side by side: {len(dead)} of {processes} processes failed (exit codes {dead})"
                                   if dead else f"side by side: no result in {args.seconds + 600:.0f} s")
    for worker in workers:
        worker.join()
    return sum(rates), sum(rates) / processes


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", default="1,2", help="CPU threads (one row each); ignored on a GPU")
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"), help="the phases' dtype")
    parser.add_argument("--model", default=None, help="a Hugging Face folder (default: SmolLM2's real weights); "
                        "config and tokenizer alone: random weights of its shapes")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--roof-tokens", type=int, default=512, help="rows of the matrix multiplies of the roof")
    parser.add_argument("--bandwidth-mb", type=int, default=512)
    parser.add_argument("--prompt-tokens", type=int, default=512)
    parser.add_argument("--context", type=int, default=512)
    parser.add_argument("--decode-batch", type=int, default=16)
    parser.add_argument("--large-batch", type=int, default=0, help="a second decode row at this batch (a GPU's)")
    parser.add_argument("--decode-steps", type=int, default=16)
    parser.add_argument("--response-tokens", type=int, default=48)
    parser.add_argument("--train-seqs", type=int, default=8)
    parser.add_argument("--sim-prompt-tokens", type=int, default=160)
    parser.add_argument("--sim-target-tokens", type=int, default=320)
    parser.add_argument("--rollouts", type=int, default=0, help="prompts of the rollout row (0: no row)")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--side-by-side", default="", help="process counts, e.g. 1,4,16 (needs --rollouts)")
    parser.add_argument("--seconds", type=float, default=20.0, help="each side-by-side measurement's length")
    parser.add_argument("--phases", default="prefill,decode,grpo,rwr", help="which phase rows ('' for none)")
    parser.add_argument("--quick", action="store_true", help="small sizes: a look, not a measurement")
    parser.add_argument("--profile", action="store_true", help="after the phase rows: where each one's time goes, "
                        "the operators by their own CPU time (torch.profiler; CPU only)")
    args = parser.parse_args(argv)
    if args.quick:
        args.repeats, args.roof_tokens, args.bandwidth_mb = 1, 128, 128
        args.prompt_tokens = args.context = 128
        args.decode_steps, args.train_seqs, args.sim_target_tokens = 4, 2, 64
    on_gpu = args.device != "cpu"
    threads = [0] if on_gpu else [int(t) for t in args.threads.split(",")]
    label = (lambda n: args.device) if on_gpu else (lambda n: str(n))
    column = "device" if on_gpu else "threads"
    shape = Shape()
    if on_gpu:
        print(f"{torch.cuda.get_device_name(args.device)}, torch {torch.__version__}, CUDA {torch.version.cuda}")
    else:
        print(f"{platform.processor() or platform.machine()}, torch {torch.__version__}, "
              f"{torch.backends.cpu.get_cpu_capability()} kernels")
    roofs: dict[tuple[int, str], float] = {}
    bandwidths: dict[int, float] = {}
    print(f"\nMatrix multiplies on SmolLM2's shapes, {args.roof_tokens} rows (GFLOP/s)")
    names = list(shape.layer_matrices)
    print(f"| {column} | dtype | " + " | ".join(names) + " |")
    print("|---|---|" + "---|" * len(names))
    for n in threads:
        if not on_gpu:
            torch.set_num_threads(n)
        for dtype in (torch.float32, torch.bfloat16):
            rates = matmul_rates(shape, args.roof_tokens, dtype, args.repeats, args.device)
            roofs[(n, str(dtype).removeprefix("torch."))] = max(rates.values())
            print(f"| {label(n)} | {str(dtype).removeprefix('torch.')} | "
                  + " | ".join(f"{rates[k] / 1e9:.1f}" for k in names) + " |", flush=True)
        measured = bandwidth(args.bandwidth_mb, args.repeats, args.device)
        bandwidths[n] = max(measured.values())
        print(f"memory, {label(n)}: copy {measured['copy'] / 1e9:.1f} GB/s, sum {measured['sum'] / 1e9:.1f} GB/s",
              flush=True)
    policy, weights = load_smollm2(args.model, args.device)
    shape = Shape.of(policy.model.config)
    bf16 = args.dtype == "bfloat16"
    element_bytes = 2 if bf16 else 4
    # inference in the dtype itself (bf16 weights); training in bf16 autocast over float32 weights (genenv's option)
    inference = copy.deepcopy(policy.model).to(torch.bfloat16) if bf16 else policy.model
    wanted = set(filter(None, args.phases.split(",")))
    profiles = []
    if wanted:
        policy.set_gradient_checkpointing(True)
        policy.autocast_bf16 = bf16
        reference = policy.frozen_copy()
        reference.autocast_bf16 = bf16
        print(f"\nSmolLM2-135M phases ({weights}), {args.dtype} (compute roof: the best {args.dtype} multiply above; "
              "bandwidth: the best above)")
        print(f"| phase | {column} | seconds | GFLOP/s | FLOPs per byte | attainable GFLOP/s | fraction |")
        print("|---|---|---|---|---|---|---|")
        for n in threads:
            if not on_gpu:
                torch.set_num_threads(n)
            phases = {}
            profiling = args.profile and not on_gpu
            kept: dict[str, list] = {}
            def keep(name):   # the list a phase's profile goes in (--profile), or None
                return kept.setdefault(name, []) if profiling else None
            if "prefill" in wanted:
                phases["prefill"] = lambda: phase_prefill(inference, shape, args, element_bytes, keep("prefill"))
            if "decode" in wanted:
                for batch in filter(None, (args.decode_batch, args.large_batch)):
                    phases[f"decode x{batch}"] = (lambda batch=batch: phase_decode(
                        inference, shape, args, element_bytes, batch, keep(f"decode x{batch}")))
            if "grpo" in wanted:
                phases["grpo step"] = lambda: phase_grpo(policy, reference, shape, args, keep("grpo step"))
            if "rwr" in wanted:
                phases["simulator update"] = lambda: phase_rwr(policy, reference, shape, args,
                                                               keep("simulator update"))
            for name, measure in phases.items():
                seconds, flops, nbytes = measure()
                intensity = flops / nbytes
                roof = attainable(intensity, roofs[(n, args.dtype)], bandwidths[n])
                print(f"| {name} | {label(n)} | {seconds:.3f} | {flops / seconds / 1e9:.1f} | {intensity:.1f} | "
                      f"{roof / 1e9:.1f} | {flops / seconds / roof:.0%} |", flush=True)
            profiles += [(label(n), name, rows) for name, rows in kept.items() if rows]
        del reference
        for n, name, rows in profiles:
            step = "a step" if name.startswith("decode") else "a call"
            print(f"\n{name}, {n} threads: where the time goes (torch.profiler, the operators' own time)")
            print(f"| operator | ms {step} | share of the time |")
            print("|---|---|---|")
            for op, ms, share in rows:
                print(f"| {op} | {ms:.2f} | {share:.0%} |")
    if args.rollouts:
        policy.set_gradient_checkpointing(False)
        policy.model = inference
        print(f"\ngenenv's Policy.generate, {args.rollouts} prompts x {args.group_size} responses of up to "
              f"{args.max_new_tokens} tokens, {args.dtype} ({weights})")
        print(f"| {column} | rollouts per second | tokens per second | tokens per rollout |")
        print("|---|---|---|---|")
        for n in threads:
            if not on_gpu:
                torch.set_num_threads(n)
            rate, tokens, mean = rollouts_per_second(policy, args.rollouts, args.group_size, args.max_new_tokens,
                                                     args.repeats)
            print(f"| {label(n)} | {rate:.1f} | {tokens:.0f} | {mean:.1f} |", flush=True)
    if args.side_by_side:
        del policy, inference
        print(f"\nSide by side: processes each with its own model on {args.device}, each sampling {args.rollouts} x "
              f"{args.group_size} rollouts a call for {args.seconds:.0f} s")
        print("| processes | rollouts per second, all | per process |")
        print("|---|---|---|")
        for count in [int(c) for c in args.side_by_side.split(",")]:
            total, each = side_by_side(args, count)
            print(f"| {count} | {total:.1f} | {each:.1f} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Throughput of genenv's generation and the loop's overhead, measured side by side in one run.

1. Generated tokens per second of ``Policy.generate`` (which also returns per-token log-probs) against a
   bare ``model.generate`` on the same batch with the same sampling settings. Target ratio >= 0.9.
2. The share of an epoch's wall time spent outside model forward/backward passes, generation and optimiser
   steps (parsing, scoring, pools, checkpoints, logging). Target <= 5% (issue 14).

``--shape smollm2-135m`` / ``llama-0.5b`` measures generation (1) with a model of that real shape and random
weights (``benchmarks/_shapes.py``) on ``--device`` in ``--dtype``, with the peak GPU memory of each on a GPU.

Usage: python benchmarks/throughput.py [--repeats 5] [--batch 512] [--epochs 4]
       python benchmarks/throughput.py --only generation --shape llama-0.5b --device cuda --dtype bfloat16 \
           --batch 256 --max-new-tokens 128
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np
import torch
from _shapes import add_shape_arguments, build_shape, chosen_device, peak_gpu_mb, reset_gpu_peak, synchronize
from transformers import GenerationConfig


def bench_generate(batch: int, repeats: int, threads: int, shape: str | None = None, device: str = "cpu",
                   dtype: str = "float32", max_new_tokens: int | None = None) -> tuple[float, float, dict]:
    """Tokens per second of ``Policy.generate`` and of a bare ``model.generate`` (medians), and on a GPU the peak
    memory of each (MB)."""
    from genenv.config import TinyModelConfig
    from genenv.domains import make_domain
    from genenv.models.policy import Policy
    from genenv.models.tiny import build_tiny_policy

    torch.set_num_threads(threads)
    domain = make_domain("addition")
    if shape:
        with tempfile.TemporaryDirectory() as folder:
            policy = Policy.load(build_shape(shape, folder), device=device, dtype=dtype)
    else:
        policy = build_tiny_policy(TinyModelConfig(), domain.alphabet, seed=0, device=device)
    tasks = domain.seed_tasks(np.random.default_rng(0), batch)
    prompts = [t.prompt for t in tasks]
    new_tokens = max_new_tokens or domain.agent_max_new_tokens
    enc = policy.tokenizer(prompts, padding=True, return_tensors="pt").to(device)
    bare_config = GenerationConfig(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, max_new_tokens=new_tokens,
                                   pad_token_id=policy.tokenizer.pad_token_id, eos_token_id=policy.eos_token_id,
                                   return_dict_in_generate=True)

    def run_bare() -> int:
        torch.manual_seed(0)
        with torch.no_grad():
            out = policy.model.generate(**enc, generation_config=bare_config)
        new = out.sequences[:, enc.input_ids.shape[1]:]
        # count tokens up to and including EOS, as Policy.generate does
        eos = (new == policy.eos_token_id).int()
        lengths = torch.where(eos.any(1), eos.argmax(1) + 1, torch.full((new.shape[0],), new.shape[1],
                                                                         device=new.device))
        return int(lengths.sum())

    def run_policy() -> int:
        out = policy.generate(prompts, n=1, max_new_tokens=new_tokens, temperature=1.0, seed=0, batch_size=batch)
        return sum(len(g[0].token_ids) for g in out)

    run_bare(), run_policy()  # warm-up
    bare, ours, peaks = [], [], {}
    for _ in range(repeats):  # interleaved, so drift in machine load hits both alike
        for name, run_once, rates in (("model.generate", run_bare, bare), ("Policy.generate", run_policy, ours)):
            reset_gpu_peak(device)
            start = time.perf_counter()
            tokens = run_once()
            synchronize(device)
            rates.append(tokens / (time.perf_counter() - start))
            if peak_gpu_mb(device) is not None:
                peaks[name] = max(peaks.get(name, 0.0), peak_gpu_mb(device))
    return statistics.median(ours), statistics.median(bare), peaks


def bench_overhead(epochs: int, threads: int) -> list[float]:
    from genenv.coevolve import run
    from genenv.config import load_config
    from genenv.io import read_jsonl

    # default eval cadence (every 10 epochs, and after the last), so the share is the real loop's
    # the default run itself (its warm start is cached under ~/.cache/genenv after the first time)
    overrides = [f"epochs={epochs}", f"threads={threads}", "progress=false"]
    with tempfile.TemporaryDirectory() as tmp:
        out = run(load_config("default", overrides), run_dir=f"{tmp}/run", log=lambda m: None)
        rows = read_jsonl(f"{out}/metrics.jsonl")
    return [1.0 - r["model_time_fraction"] for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--epochs", type=int, default=30)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", choices=["generation", "overhead"],
                        help="measure one of the two (default: both)")
    add_shape_arguments(parser, "generation with a model of this real shape and random weights (not the tiny "
                                "default)")
    args = parser.parse_args()

    if args.only != "overhead":
        device = chosen_device(args)
        ours, bare, peaks = bench_generate(args.batch, args.repeats, args.threads, args.shape, device, args.dtype,
                                           args.max_new_tokens)
        model = f"{args.shape} {device} {args.dtype}" if args.shape else "tiny default"
        print(f"{'generation (tokens/s)':34s} {'Policy.generate':>16s} {'model.generate':>16s} {'ratio':>7s}")
        print(f"{model + ', batch ' + str(args.batch):34s} {ours:16.0f} {bare:16.0f} {ours / bare:7.3f}"
              f"   target >= 0.9: {'ok' if ours / bare >= 0.9 else 'MISSED'}")
        if peaks:
            print(f"{'peak GPU memory (MB)':34s} {peaks['Policy.generate']:16,.0f} {peaks['model.generate']:16,.0f}")
    if args.only == "generation":
        return
    outside = bench_overhead(args.epochs, args.threads)
    share = float(np.mean(outside))
    median = float(np.median(outside))
    print(f"epoch time outside model passes: mean {share:.1%}, median {median:.1%}, max {max(outside):.1%} over "
          f"{len(outside)} epochs   target <= 5% (mean): {'ok' if share <= 0.05 else 'MISSED'}")


if __name__ == "__main__":
    main()

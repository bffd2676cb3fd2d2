"""Rollouts per second of the same sampling work on each engine genenv decodes with, side by side in one run.

The work: ``--prompts`` chat prompts of about ``--prompt-tokens`` tokens, ``--samples`` samples each (a GRPO group),
up to ``--max-new-tokens`` new tokens, temperature 1, every sequence keyed as genenv's loop keys it. Each engine
draws it once to warm up (vLLM's and llama.cpp's first call pays their loading and the weight sync) and then
``--repeats`` times; the median is reported. Engines:

- ``transformers``: ``Policy.generate`` with ``prefix_cached_sampling`` (a prompt prefilled once for its samples);
- ``llama.cpp``: ``sampler=llama.cpp`` (``--llamacpp-dtype``, f16 by default; CPU only);
- ``vllm``: ``sampler=vllm`` with vLLM's prefix caching off, and ``vllm+prefix`` with it on (``--dtype``).

Models: ``smollm2`` (SmolLM2-135M-Instruct, the packaged real model) and ``qwen2-0.5b`` (a random-weight Qwen2 folder
with Qwen2.5-0.5B's blocks: 24 layers, width 896, 14 heads, 2 KV heads, MLP 4864; its vocabulary is a small
trained BPE, so the head is cheaper than the real model's 151k rows). Prints a table per model: seconds, rollouts
per second, and each engine's ratio to transformers.

    .venv/bin/python benchmarks/engines_speed.py
    .venv/bin/python benchmarks/engines_speed.py --models smollm2 --engines transformers,vllm,vllm+prefix \\
        --device cuda --dtype bfloat16 --prompts 64
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

ENGINES = ("transformers", "llama.cpp", "vllm", "vllm+prefix")
QWEN2_05B = dict(hidden_size=896, layers=24, heads=14, intermediate_size=4864, max_positions=4096)


def prompts_of(count: int, tokens: int) -> list[str]:
    """``count`` distinct prompts of about ``tokens`` tokens (words of a fixed text, each prompt its own start)."""
    words = ("Call the API that books a meeting room for the team on Tuesday at 10 and tells every member by mail; "
             "the request names the room, the time, the attendees and the agenda, and the answer must be one JSON "
             "call.").split()
    return [" ".join(words[(i + j) % len(words)] for j in range(tokens)) for i in range(count)]


def model_folder(name: str, root: Path) -> str:
    """The folder of ``name``: smollm2 (the real weights), qwen2-0.5b (random), or a model folder; a folder with a
    config and tokenizer but no weights gets random ones (the same arithmetic as its real weights)."""
    path = Path(name)
    if path.is_dir():
        if any(path.glob("*.safetensors")):
            return str(path)
        from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer
        out = root / f"{path.name}-random"
        torch.manual_seed(0)
        AutoModelForCausalLM.from_config(AutoConfig.from_pretrained(path)).save_pretrained(out)
        AutoTokenizer.from_pretrained(path).save_pretrained(out)
        return str(out)
    if name == "smollm2":
        from genenv.models.registry import resolve_model
        return str(resolve_model("smollm2"))
    if name == "qwen2-0.5b":
        from genenv.models.architectures import random_folder
        texts = prompts_of(200, 40)
        return str(random_folder("qwen2", root / "qwen2-0.5b", texts, **QWEN2_05B))
    raise SystemExit(f"--models: {name!r} is not smollm2, qwen2-0.5b or a model folder")


def policy_on(engine: str, folder: str, model: str, args):
    from genenv.models.policy import Policy
    policy = Policy.load(folder, device=args.device, use_chat_template=True, dtype=args.dtype)
    policy.prefill_once = True
    if engine == "llama.cpp":
        from genenv.models.llamacpp import packaged_sampler
        policy.sampler = packaged_sampler(policy, model if model == "smollm2" else folder, threads=args.threads,
                                               dtype=args.llamacpp_dtype,
                                               context=8192, parallel=args.samples)
    elif engine.startswith("vllm"):
        from genenv.models.vllm_sampler import engine_for
        policy.sampler = engine_for(policy, folder, args.device,
                                         dtype=args.dtype, prefix_caching=engine == "vllm+prefix",
                                         max_model_len=args.prompt_tokens * 2 + args.max_new_tokens + 64)
    return policy


def timed_draws(policy, prompt_ids, args) -> tuple[list[float], int]:
    from genenv.seeding import grid_keys
    seconds, tokens = [], 0
    for repeat in range(args.repeats + 1):
        keys = grid_keys(0, len(prompt_ids), args.samples, repeat)
        start = time.perf_counter()
        out = policy.generate(None, prompt_ids=prompt_ids, n=args.samples, max_new_tokens=args.max_new_tokens,
                              temperature=1.0, seed=repeat, keys=keys, batch_size=len(prompt_ids) * args.samples)
        if args.device == "cuda":
            torch.cuda.synchronize()
        if repeat:   # the first draw warms up (loading, the weight sync, kernels)
            seconds.append(time.perf_counter() - start)
            tokens += sum(len(g.token_ids) for row in out for g in row)
    return seconds, tokens // max(1, args.repeats)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="smollm2,qwen2-0.5b")
    parser.add_argument("--engines", default=",".join(ENGINES))
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=200)
    parser.add_argument("--max-new-tokens", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--dtype", default="float32", choices=("float32", "bfloat16"),
                        help="transformers' and vLLM's weights")
    parser.add_argument("--llamacpp-dtype", default="f16", choices=("f32", "f16", "bf16", "q8_0"))
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    engines = [e for e in args.engines.split(",") if e]
    for engine in engines:
        if engine not in ENGINES:
            raise SystemExit(f"--engines: {engine!r} is not one of {', '.join(ENGINES)}")
    print(f"{args.prompts} prompts x {args.samples} samples, about {args.prompt_tokens} prompt tokens, up to "
          f"{args.max_new_tokens} new; device {args.device}, dtype {args.dtype}, {args.threads} threads, median of "
          f"{args.repeats} after one warm-up draw")
    with tempfile.TemporaryDirectory(prefix="genenv-engines-") as root:
        for model in [m for m in args.models.split(",") if m]:
            folder = model_folder(model, Path(root))
            base = None
            print(f"\n{model}")
            print("| engine | seconds | rollouts/s | new tokens/s | x transformers | loading + warm-up s |")
            print("|---|---|---|---|---|---|", flush=True)
            for engine in engines:
                if engine == "llama.cpp" and args.device != "cpu":
                    continue
                start = time.perf_counter()
                policy = policy_on(engine, folder, model, args)
                prompt_ids = policy.encode_prompts(prompts_of(args.prompts, args.prompt_tokens))
                seconds, tokens = timed_draws(policy, prompt_ids, args)
                load = time.perf_counter() - start - sum(seconds)
                median = statistics.median(seconds)
                rollouts = args.prompts * args.samples / median
                base = base or (rollouts if engine == "transformers" else None)
                ratio = f"{rollouts / base:.2f}" if base else ""
                print(f"| {engine} | {median:.2f} | {rollouts:.2f} | {tokens / median:.0f} | {ratio} | {load:.1f} |",
                      flush=True)
                if policy.sampler is not None and hasattr(policy.sampler, "close"):
                    policy.sampler.close()
                del policy
            print(f"({statistics.mean(len(p) for p in prompt_ids):.0f} prompt tokens on average)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

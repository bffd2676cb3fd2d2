"""llama.cpp builds side by side on this machine (issue 60, item 2): SmolLM2's prefill and decode tokens per second
through genenv's own llama.cpp sampler, each build in a process of its own, the builds interleaved in every repeat.

    .venv/bin/python benchmarks/llama_builds.py --build installed= --build avx512=/tmp/llbuild/site --repeats 3

A build is ``LABEL=SITE``: ``SITE`` a folder holding a ``llama_cpp`` package (``pip install --no-deps --target SITE
WHEEL``), put first on the child's path; an empty ``SITE`` is the one installed in the virtual environment. Per
build and weight type (``--dtypes``: f16 and q8_0, the quantized type whose multi-token prompts crashed the native
build's AMX kernels): prefill, ``--prompts`` prompts of ``--prompt-tokens`` tokens each, no two sharing a prefix,
one new token each; decode, one prompt's ``--parallel`` samples side by side up to ``--new-tokens`` tokens (keyed
draws at temperature 1, the same in every build; the decode time is the window's minus one prefill of its prompt).
Prints the median of the repeats and each build's ratio to the first. A child that crashes is reported with its
exit status (-11: a segmentation fault) instead of a number.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

CHILD = r"""
import json, sys, time
import torch
from genenv.models.llamacpp import packaged_sampler
from genenv.models.policy import Policy
from genenv.models.registry import resolve_model
from genenv.seeding import sequence_uniforms
import llama_cpp
dtype, threads, prompts_n, prompt_tokens, parallel, new_tokens = sys.argv[1], *map(int, sys.argv[2:7])
policy = Policy.load(resolve_model("smollm2"), use_chat_template=True)
sampler = packaged_sampler(policy, "smollm2", threads=threads, dtype=dtype, context=4096, parallel=parallel)
vocab = policy.tokenizer.vocab_size
prompts = [[(7919 * (k + 1) + 104729 * j) % (vocab - 200) + 100 for j in range(prompt_tokens)]
           for k in range(prompts_n + 1)]
sampler.sample([prompts[-1]], 1, 1, 1.0, None)                  # load and warm up
start = time.perf_counter()
sampler.sample(prompts[:prompts_n], 1, 1, 1.0, None)
prefill = time.perf_counter() - start
uniforms = torch.from_numpy(sequence_uniforms(0, list(range(parallel)), new_tokens))
start = time.perf_counter()
samples = sampler.sample([prompts[0][::-1]], parallel, new_tokens, 1.0, uniforms)[0]
window = time.perf_counter() - start
generated = sum(len(tokens) for tokens, _ in samples)
sampler.close()
per_prompt = prefill / prompts_n
print(json.dumps({"prefill_tokens_per_s": prompts_n * prompt_tokens / prefill,
                  "decode_tokens_per_s": generated / max(window - per_prompt, 1e-9), "generated": generated,
                  "llama_cpp": llama_cpp.__file__}))
"""


def run_child(site: str, dtype: str, args) -> dict:
    env = dict(os.environ)
    if site:
        env["PYTHONPATH"] = os.pathsep.join([site, *filter(None, [env.get("PYTHONPATH")])])
    done = subprocess.run([sys.executable, "-c", CHILD, dtype, str(args.threads), str(args.prompts),
                           str(args.prompt_tokens), str(args.parallel), str(args.new_tokens)],
                          capture_output=True, text=True, env=env, timeout=1200)
    if done.returncode != 0:
        return {"exit": done.returncode, "stderr": done.stderr[-400:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", action="append", required=True, help="LABEL=SITE (empty SITE: the installed one)")
    parser.add_argument("--dtypes", default="f16,q8_0")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--prompt-tokens", type=int, default=450)
    parser.add_argument("--parallel", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    builds = [spec.split("=", 1) for spec in args.build]
    results: dict[tuple[str, str], list[dict]] = {}
    for _ in range(args.repeats):
        for dtype in args.dtypes.split(","):
            for label, site in builds:
                results.setdefault((label, dtype), []).append(run_child(site, dtype, args))
    print(f"SmolLM2 on llama.cpp, {args.threads} threads; prefill: {args.prompts} prompts of {args.prompt_tokens} "
          f"tokens; decode: {args.parallel} side by side, up to {args.new_tokens} tokens; median of {args.repeats}")
    print("| build | weights | prefill tokens/s | decode tokens/s | prefill ratio | decode ratio | library |")
    print("|---|---|---|---|---|---|---|")
    for dtype in args.dtypes.split(","):
        first = None
        for label, _ in builds:
            rows = results[(label, dtype)]
            crashed = [row for row in rows if "exit" in row]
            if crashed:
                print(f"| {label} | {dtype} | exit {crashed[0]['exit']} | | | | {crashed[0]['stderr'][-120:]!r} |")
                continue
            prefill = statistics.median(row["prefill_tokens_per_s"] for row in rows)
            decode = statistics.median(row["decode_tokens_per_s"] for row in rows)
            first = first or (prefill, decode)
            print(f"| {label} | {dtype} | {prefill:.0f} | {decode:.1f} | {prefill / first[0]:.2f}x | "
                  f"{decode / first[1]:.2f}x | {rows[0]['llama_cpp']} |")


if __name__ == "__main__":
    main()

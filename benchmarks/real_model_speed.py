"""A real model's speed on this machine, today's code path against the faster ones, side by side in one run
(issue 40).

Part ``grpo``: one GRPO step of SmolLM2-135M-Instruct (its real weights) on groups of G responses to API-Bank
prompts (the ``apibank`` domain's first-turn prompts, the ``smollm2-apibank`` preset's settings: gradient
checkpointing, micro-batches of 2, a KL reference), unshared (today) against ``agent.shared_prefix`` (each
group's prompt encoded once; micro-batches then hold whole groups). Responses are fixed random token strings of
``--response-tokens`` (an API call is 20-60 tokens), so both paths see the same work. Prints the median seconds
per step of each, the ratio, the columns each runs through the model, and how far their losses and weights
after the step are apart (they must agree within floating-point tolerance).

Part ``sampling``: ``Policy.generate`` of G responses to each of ``--groups`` API-Bank prompts, today (each row
prefills its prompt) against ``prefix_cached_sampling`` (each prompt prefilled once, its KV cache copied to its
rows), with the same keys; prints the seconds of each and in how many responses the tokens agree.

Part ``engine``: the same sampling (prefix-cached) and greedy answers on transformers against llama.cpp
(``sampler=llama.cpp``, f32, f16 and q8_0 GGUF weights), with the weight sync's seconds and the tokens' agreement.

Part ``bf16``: the GRPO step (shared prefix) and sampling (prefix-cached) in float32 against bf16 autocast
(``autocast=bfloat16``: float32 weights and optimiser state), with how far the loss and log-probs move.

Part ``curve``: a short training run (``--steps`` GRPO steps on the same groups of the model's own sampled
responses) in float32 and in bf16 autocast from the same start: the loss and KL curves side by side.

Part ``run``: whole epochs of a real-model preset (default ``smollm2-apibank``) as two ``genenv run``s on the
same warm start, today against the fast options (``--bf16`` adds bf16 autocast, ``--llamacpp`` llama.cpp decoding):
agent rollouts per hour (generation + scoring + update) and GRPO steps of each.

Targets (issue 40): agent rollouts per hour >= 10x today's at group size 8; the GRPO step alone >= 4x today's
at the preset's prompt lengths, group size 8.

Usage: python benchmarks/real_model_speed.py [--part grpo|sampling|engine|bf16|curve|run]
       [--groups 2] [--group-size 8] [--repeats 3]
       [--threads 2]
       [--data ../shared/data/api-bank]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from pathlib import Path

import numpy as np
import torch


def grpo_groups(policy, domain, groups: int, group_size: int, response_tokens: int, seed: int = 0):
    """``groups`` API-Bank first-turn prompts, each with ``group_size`` random responses and advantages."""
    from genenv.algos.grpo import PolicySample  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    tasks = domain.seed_tasks(rng, groups)
    samples, sizes, prompt_lengths = [], [], []
    for task in tasks:
        _, observation = domain.reset(task, seed=seed)
        prompt = policy.encode_prompts([domain.agent_context([], observation)])[0]
        prompt_lengths.append(len(prompt))
        advantages = rng.normal(size=group_size)
        for advantage in advantages:
            response = rng.integers(100, 40000, size=response_tokens).tolist()
            old = (rng.normal(size=response_tokens) * 0.3 - 3.0).tolist()
            samples.append(PolicySample(prompt, response, old, float(advantage)))
        sizes.append(group_size)
    return samples, sizes, prompt_lengths


def bench_grpo(args) -> None:
    from genenv.algos.grpo import grpo_step  # noqa: PLC0415
    from genenv.domains import make_domain  # noqa: PLC0415
    from genenv.models.packing import pack_groups  # noqa: PLC0415
    from genenv.models.policy import Policy  # noqa: PLC0415
    from genenv.models.registry import resolve_model  # noqa: PLC0415

    torch.set_num_threads(args.threads)
    domain = make_domain("apibank", data=args.data, max_task_chars=800)
    policy = Policy.load(resolve_model("smollm2"), use_chat_template=True)
    policy.set_gradient_checkpointing(True)
    reference = policy.frozen_copy()
    samples, sizes, lengths = grpo_groups(policy, domain, args.groups, args.group_size, args.response_tokens)
    batch_columns = len(samples) * (max(lengths) + args.response_tokens)
    packed = pack_groups([[(s.prompt_ids, s.response_ids) for s in samples[i * args.group_size:
                                                                           (i + 1) * args.group_size]]
                          for i in range(args.groups)], policy.tokenizer.pad_token_id)
    print(f"SmolLM2-135M, {args.groups} groups x {args.group_size} responses of {args.response_tokens} tokens; "
          f"prompts of {min(lengths)}-{max(lengths)} tokens; threads {args.threads}")
    print(f"columns through the model per pass: unshared {batch_columns}, shared prefix {packed.columns} "
          f"({batch_columns / packed.columns:.1f}x fewer)")
    start = {name: p.detach().clone() for name, p in policy.model.named_parameters()}
    times: dict[bool, list[float]] = {False: [], True: []}
    outcome = {}
    for repeat in range(args.repeats):
        for shared in (False, True):
            with torch.no_grad():
                for name, p in policy.model.named_parameters():
                    p.copy_(start[name])
            optimizer = torch.optim.SGD(policy.trainable_parameters(), lr=1e-5)
            begin = time.perf_counter()
            stats = grpo_step(policy, reference, optimizer, samples, kl_coef=0.001, micro_batch=args.micro_batch,
                              shared_prefix=shared, group_sizes=sizes)
            times[shared].append(time.perf_counter() - begin)
            if repeat == 0:
                outcome[shared] = (stats["loss"], {n: p.detach().clone() for n, p in policy.model.named_parameters()})
            print(f"  repeat {repeat + 1}: {'shared  ' if shared else 'unshared'} {times[shared][-1]:.2f} s",
                  flush=True)
    today, shared = statistics.median(times[False]), statistics.median(times[True])
    weight_gap = max((outcome[True][1][n] - outcome[False][1][n]).abs().max().item() for n in start)
    print(f"GRPO step (median of {args.repeats}): today {today:.2f} s, shared prefix {shared:.2f} s: "
          f"{today / shared:.2f}x (target >= 4x)")
    print(f"agreement: loss {outcome[False][0]:.6g} vs {outcome[True][0]:.6g}; largest weight difference after "
          f"the step {weight_gap:.2e}")


def bench_sampling(args) -> None:
    """Policy.generate of ``group_size`` responses to each of ``groups`` API-Bank prompts, today (every row
    prefills its prompt) against ``prefix_cached_sampling`` (each prompt prefilled once), with the same keys."""
    from genenv.domains import make_domain  # noqa: PLC0415
    from genenv.models.policy import Policy  # noqa: PLC0415
    from genenv.models.registry import resolve_model  # noqa: PLC0415

    torch.set_num_threads(args.threads)
    domain = make_domain("apibank", data=args.data, max_task_chars=800)
    policy = Policy.load(resolve_model("smollm2"), use_chat_template=True)
    tasks = domain.seed_tasks(np.random.default_rng(0), args.groups)
    prompts = [domain.agent_context([], domain.reset(task, seed=0)[1]) for task in tasks]
    lengths = [len(ids) for ids in policy.encode_prompts(prompts)]
    print(f"SmolLM2-135M sampling, {args.groups} prompts of {min(lengths)}-{max(lengths)} tokens x "
          f"{args.group_size} responses of up to {args.max_new_tokens} tokens; threads {args.threads}")
    times: dict[bool, list[float]] = {False: [], True: []}
    tokens = {}
    for repeat in range(args.repeats):
        for cached in (False, True):
            policy.prefill_once = cached
            begin = time.perf_counter()
            out = policy.generate(prompts, n=args.group_size, max_new_tokens=args.max_new_tokens, seed=repeat)
            times[cached].append(time.perf_counter() - begin)
            tokens[cached] = [g.token_ids for group in out for g in group]
            print(f"  repeat {repeat + 1}: {'prefix-cached' if cached else 'today        '} "
                  f"{times[cached][-1]:.2f} s, {sum(map(len, tokens[cached]))} tokens", flush=True)
        same = sum(a == b for a, b in zip(tokens[False], tokens[True]))
        print(f"  the same tokens in {same} of {len(tokens[False])} responses")
    today, cached = statistics.median(times[False]), statistics.median(times[True])
    print(f"sampling (median of {args.repeats}): today {today:.2f} s, prefix-cached {cached:.2f} s: "
          f"{today / cached:.2f}x")


def bench_engine(args) -> None:
    """Policy.generate of ``group_size`` responses to each of ``groups`` API-Bank prompts (sampled) and one greedy
    response to each of ``--greedy-prompts`` of them (evaluation), on transformers with prefix-cached sampling
    against llama.cpp (``sampler=llama.cpp``) with f32, f16 and q8_0 GGUF weights; the same keys. Prints the
    seconds of each (median, the engines interleaved in every repeat), the ratios, the seconds a weight sync takes,
    and in how many responses the tokens agree with transformers'."""
    from genenv.domains import make_domain  # noqa: PLC0415
    from genenv.models.llamacpp import LlamaCppSampler  # noqa: PLC0415
    from genenv.models.policy import Policy  # noqa: PLC0415
    from genenv.models.registry import KNOWN_MODELS, packaged_file, resolve_model  # noqa: PLC0415

    torch.set_num_threads(args.threads)
    domain = make_domain("apibank", data=args.data, max_task_chars=800)
    policy = Policy.load(resolve_model("smollm2"), use_chat_template=True)
    policy.prefill_once = True
    tasks = domain.seed_tasks(np.random.default_rng(0), max(args.groups, args.greedy_prompts))
    prompts = [domain.agent_context([], domain.reset(task, seed=0)[1]) for task in tasks]
    lengths = [len(ids) for ids in policy.encode_prompts(prompts)]
    print(f"SmolLM2-135M, {args.groups} prompts of {min(lengths)}-{max(lengths)} tokens x {args.group_size} sampled "
          f"responses and {args.greedy_prompts} greedy ones of up to {args.max_new_tokens} tokens; threads "
          f"{args.threads}")
    template = packaged_file(KNOWN_MODELS["smollm2"])
    engines = {"transformers": None}
    for dtype in ("f32", "f16", "q8_0"):
        sampler = LlamaCppSampler(policy, template, threads=args.threads, dtype=dtype, parallel=args.group_size)
        begin = time.perf_counter()
        sampler.sync()
        print(f"llama.cpp {dtype}: weight sync (GGUF written and loaded) {time.perf_counter() - begin:.2f} s")
        engines[f"llama.cpp {dtype}"] = sampler
    times = {name: {"sampled": [], "greedy": []} for name in engines}
    tokens = {}
    for repeat in range(args.repeats):
        for name, sampler in engines.items():
            policy.sampler = sampler
            begin = time.perf_counter()
            out = policy.generate(prompts[:args.groups], n=args.group_size, max_new_tokens=args.max_new_tokens,
                                  seed=repeat)
            times[name]["sampled"].append(time.perf_counter() - begin)
            begin = time.perf_counter()
            greedy = policy.generate(prompts[:args.greedy_prompts], max_new_tokens=args.max_new_tokens, greedy=True)
            times[name]["greedy"].append(time.perf_counter() - begin)
            tokens[name] = ([g.token_ids for group in out for g in group], [g[0].token_ids for g in greedy])
            print(f"  repeat {repeat + 1}: {name:12} sampled {times[name]['sampled'][-1]:.2f} s "
                  f"({sum(map(len, tokens[name][0]))} tokens), greedy {times[name]['greedy'][-1]:.2f} s", flush=True)
    policy.sampler = None
    base = {kind: statistics.median(times["transformers"][kind]) for kind in ("sampled", "greedy")}
    for name in engines:
        same = [sum(a == b for a, b in zip(tokens["transformers"][k], tokens[name][k])) for k in (0, 1)]
        medians = {kind: statistics.median(times[name][kind]) for kind in ("sampled", "greedy")}
        line = ", ".join(f"{kind} {seconds:.2f} s ({base[kind] / seconds:.2f}x)" for kind, seconds in medians.items())
        print(f"{name:16} {line}; the same tokens as transformers in {same[0]} of {len(tokens[name][0])} "
              f"sampled, {same[1]} of {len(tokens[name][1])} greedy responses")
    for sampler in engines.values():
        if sampler is not None:
            sampler.close()


def smollm2_on_apibank(args):
    """SmolLM2 (gradient checkpointing, prefix-cached sampling), its frozen KL reference, the apibank domain and
    ``--groups`` of its first-turn prompts: the setup the bf16 parts share."""
    from genenv.domains import make_domain  # noqa: PLC0415
    from genenv.models.policy import Policy  # noqa: PLC0415
    from genenv.models.registry import resolve_model  # noqa: PLC0415

    torch.set_num_threads(args.threads)
    domain = make_domain("apibank", data=args.data, max_task_chars=800)
    policy = Policy.load(resolve_model("smollm2"), use_chat_template=True)
    policy.set_gradient_checkpointing(True)
    policy.prefill_once = True
    reference = policy.frozen_copy()
    prompts = [domain.agent_context([], domain.reset(task, seed=0)[1])
               for task in domain.seed_tasks(np.random.default_rng(0), args.groups)]
    return domain, policy, reference, prompts


def bench_bf16(args) -> None:
    """The GRPO step (shared prefix) and sampling (prefix-cached) of SmolLM2 in float32 against bf16 autocast,
    on the same API-Bank groups; prints the seconds of each, the ratios, and how far the loss and the sampled
    log-probs move."""
    from genenv.algos.grpo import grpo_step  # noqa: PLC0415

    domain, policy, reference, prompts = smollm2_on_apibank(args)
    samples, sizes, lengths = grpo_groups(policy, domain, args.groups, args.group_size, args.response_tokens)
    print(f"SmolLM2-135M, {args.groups} groups x {args.group_size}; prompts of {min(lengths)}-{max(lengths)} tokens; "
          f"threads {args.threads}")
    start = {name: p.detach().clone() for name, p in policy.model.named_parameters()}
    times = {(part, bf16): [] for part in ("grpo", "sampling") for bf16 in (False, True)}
    seen = {}
    for repeat in range(args.repeats):
        for bf16 in (False, True):
            policy.autocast_bf16 = reference.autocast_bf16 = bf16
            with torch.no_grad():
                for name, p in policy.model.named_parameters():
                    p.copy_(start[name])
            begin = time.perf_counter()
            stats = grpo_step(policy, reference, torch.optim.SGD(policy.trainable_parameters(), lr=1e-5), samples,
                              kl_coef=0.001, micro_batch=args.micro_batch, shared_prefix=True, group_sizes=sizes)
            times["grpo", bf16].append(time.perf_counter() - begin)
            begin = time.perf_counter()
            out = policy.generate(prompts, n=args.group_size, max_new_tokens=args.max_new_tokens, seed=repeat)
            times["sampling", bf16].append(time.perf_counter() - begin)
            with torch.no_grad():
                batch = policy.build_batch([x.prompt_ids for x in samples[:4]], [x.response_ids for x in samples[:4]])
                logp, _ = policy.token_logprobs(batch)
            seen[bf16] = (stats["loss"], logp[batch.response_mask.bool()].numpy(), sum(len(g) for g in out))
            print(f"  repeat {repeat + 1}: {'bf16' if bf16 else 'fp32'} GRPO {times['grpo', bf16][-1]:.2f} s, "
                  f"sampling {times['sampling', bf16][-1]:.2f} s", flush=True)
    for part in ("grpo", "sampling"):
        fp32, bf16 = statistics.median(times[part, False]), statistics.median(times[part, True])
        print(f"{part} (median of {args.repeats}): fp32 {fp32:.2f} s, bf16 autocast {bf16:.2f} s: {fp32 / bf16:.2f}x")
    gap = np.abs(seen[False][1] - seen[True][1])
    print(f"loss fp32 {seen[False][0]:.6g}, bf16 {seen[True][0]:.6g}; log-probs of the same {gap.size} response "
          f"tokens: mean |difference| {gap.mean():.3g}, largest {gap.max():.3g} (mean log-prob "
          f"{seen[False][1].mean():.2f})")


def bench_curve(args) -> None:
    """A short training run in float32 and in bf16 autocast from the same start: ``--steps`` GRPO steps (shared
    prefix, AdamW at the preset's lr 1e-5, KL to the start) on the same groups of SmolLM2's own sampled responses
    to API-Bank prompts (``--groups`` x ``--group-size``, advantages +-1 alternating within each group); prints
    each step's loss, KL and seconds side by side and writes both curves to ``--curve-out`` (a PNG and a JSON)."""
    import json  # noqa: PLC0415

    from genenv.algos.grpo import PolicySample, grpo_step  # noqa: PLC0415

    _, policy, reference, prompts = smollm2_on_apibank(args)
    generations = policy.generate(prompts, n=args.group_size, max_new_tokens=args.max_new_tokens, seed=0)
    samples = [PolicySample(g.prompt_ids, g.token_ids, g.logprobs, 1.0 if j % 2 == 0 else -1.0)
               for group in generations for j, g in enumerate(group)]
    sizes = [len(group) for group in generations]
    start = {name: p.detach().clone() for name, p in policy.model.named_parameters()}
    curves = {}
    for label, bf16 in (("fp32", False), ("bf16", True)):
        policy.autocast_bf16 = reference.autocast_bf16 = bf16
        with torch.no_grad():
            for name, p in policy.model.named_parameters():
                p.copy_(start[name])
        optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=1e-5)
        curves[label] = []
        for step in range(args.steps):
            begin = time.perf_counter()
            stats = grpo_step(policy, reference, optimizer, samples, kl_coef=0.001, micro_batch=args.micro_batch,
                              shared_prefix=True, group_sizes=sizes)
            curves[label].append({"step": step + 1, "loss": stats["loss"], "kl": stats.get("kl", 0.0),
                                  "seconds": time.perf_counter() - begin})
            print(f"  {label} step {step + 1}: loss {stats['loss']:.5f}, kl {stats.get('kl', 0.0):.2e}, "
                  f"{curves[label][-1]['seconds']:.1f} s", flush=True)
    print(f"SmolLM2-135M, {args.groups} groups x {args.group_size} sampled responses, {args.steps} steps:")
    print("step  loss fp32   loss bf16   |diff|     kl fp32    kl bf16")
    for a, b in zip(curves["fp32"], curves["bf16"]):
        print(f"{a['step']:4d}  {a['loss']:+.5f}   {b['loss']:+.5f}   {abs(a['loss'] - b['loss']):.5f}   "
              f"{a['kl']:.2e}   {b['kl']:.2e}")
    seconds = {label: statistics.median(row["seconds"] for row in rows) for label, rows in curves.items()}
    print(f"median step: fp32 {seconds['fp32']:.1f} s, bf16 {seconds['bf16']:.1f} s "
          f"({seconds['fp32'] / seconds['bf16']:.2f}x)")
    if args.curve_out:
        import matplotlib  # noqa: PLC0415

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # noqa: PLC0415

        out = Path(args.curve_out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "bf16_curve.json").write_text(json.dumps(curves, indent=1))
        figure, axes = plt.subplots(1, 2, figsize=(9, 3.5))
        for label, rows in curves.items():
            axes[0].plot([r["step"] for r in rows], [r["loss"] for r in rows], marker="o", label=label)
            axes[1].plot([r["step"] for r in rows], [r["kl"] for r in rows], marker="o", label=label)
        axes[0].set(xlabel="GRPO step", ylabel="loss", title="loss")
        axes[1].set(xlabel="GRPO step", ylabel="KL to the start", title="KL")
        axes[0].legend()
        figure.tight_layout()
        figure.savefig(out / "bf16_curve.png", dpi=100)
        print(f"curves: {out / 'bf16_curve.png'}")


FAST_OPTIONS = ("agent.shared_prefix=true", "prefix_cached_sampling=true")


def bench_run(args) -> None:
    """Whole epochs of a real-model preset, today against the fast options (and bf16 autocast with --bf16), each
    a ``genenv run`` of its own on the same warm start: agent rollouts per hour (generation + scoring + update:
    rollouts over the epochs' seconds, evaluations left out) and GRPO steps, side by side."""
    import json  # noqa: PLC0415
    import subprocess  # noqa: PLC0415
    import sys  # noqa: PLC0415
    import tempfile  # noqa: PLC0415

    fast = [*FAST_OPTIONS, *(["autocast=bfloat16"] if args.bf16 else []),
            *(["agent.sampler=llama.cpp", "env.sampler=llama.cpp"] if args.llamacpp else [])]
    results = {}
    with tempfile.TemporaryDirectory() as folder:
        for label, options in (("today", []), ("fast", fast)):
            run_dir = Path(folder) / label
            command = [sys.executable, "-m", "genenv.cli", "run", "--preset", args.preset, "--out", str(run_dir),
                       f"epochs={args.epochs}", f"eval_every={args.epochs + 1}", f"threads={args.threads}",
                       f"domain.heldout_per_level={args.heldout_per_level}",
                       "progress=false", *args.override, *options]
            subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
            rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
            seconds = sum(row["seconds_total"] - row["seconds_by_phase"].get("evaluate", 0.0) for row in rows)
            rollouts = sum(row["rollouts_this_epoch"] for row in rows)
            results[label] = (rollouts / seconds * 3600, sum(row["agent_updates"] for row in rows), seconds)
            print(f"  {label}: {rollouts} rollouts in {seconds:.0f} s = {results[label][0]:.0f}/hour, "
                  f"{results[label][1]} GRPO steps", flush=True)
    print(f"{args.preset}, {args.epochs} epochs: agent rollouts per hour today {results['today'][0]:.0f}, with "
          f"{' '.join(fast)} {results['fast'][0]:.0f}: {results['fast'][0] / results['today'][0]:.2f}x "
          "(target >= 10x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--part", choices=["grpo", "sampling", "engine", "bf16", "curve", "run"], default="grpo")
    parser.add_argument("--preset", default="smollm2-apibank", help="run: the real-model preset")
    parser.add_argument("--epochs", type=int, default=2, help="run: epochs of each run")
    parser.add_argument("--bf16", action="store_true", help="run: the fast side also uses bf16 autocast")
    parser.add_argument("--llamacpp", action="store_true", help="run: the fast side also decodes with llama.cpp")
    parser.add_argument("--heldout-per-level", type=int, default=2,
                        help="run: held-out and dev tasks per level (evaluated after the warm start and the last "
                             "epoch, not timed; it is part of the warm starts' cache key)")
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                        help="run: an override for both runs (e.g. domain.options.data=PATH, agent.group_size=8)")
    parser.add_argument("--max-new-tokens", type=int, default=64, help="sampling: the preset's agent.max_new_tokens")
    parser.add_argument("--groups", type=int, default=2, help="groups per step (the preset's minibatch_groups)")
    parser.add_argument("--greedy-prompts", type=int, default=8, help="engine: prompts answered greedily")
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--steps", type=int, default=10, help="curve: GRPO steps of each run")
    parser.add_argument("--curve-out", default=None, help="curve: folder for bf16_curve.png and bf16_curve.json")
    parser.add_argument("--response-tokens", type=int, default=40)
    parser.add_argument("--micro-batch", type=int, default=2, help="the preset's agent.micro_batch")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data", default=os.environ.get("GENENV_APIBANK_DATA", "../shared/data/api-bank"))
    args = parser.parse_args()
    {"grpo": bench_grpo, "sampling": bench_sampling, "engine": bench_engine, "bf16": bench_bf16, "curve": bench_curve,
     "run": bench_run}[args.part](args)


if __name__ == "__main__":
    main()

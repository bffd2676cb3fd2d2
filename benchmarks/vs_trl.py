"""Agent-update throughput of genenv's GRPO beside TRL's GRPOTrainer and a bare loop, measured in one process.

One step of each = sample ``--prompts`` x ``--samples`` rollouts of the default addition domain, score them with
the domain's verifier, take one optimiser step. All three start from the same tiny Llama model (the default
preset's warm-started agent, seed 0: realistic response lengths and mixed rewards), the same prompts, response
length, learning rate and thread count:

- genenv: ``rollout`` (``Policy.generate`` with per-token log-probs) -> group advantages -> one ``grpo_step`` on
  every rollout (a run trains on the informative groups alone, which is cheaper still: not counted here);
- TRL: ``GRPOTrainer`` (trl==1.16.0, ``pip install -e .[benchmark]``), ``per_device_train_batch_size`` = prompts x
  samples (it counts completions), ``num_generations`` = samples, one optimiser step per generation batch, at
  beta 0 (no reference model) and beta 0.001 (genenv's default KL coefficient);
- bare: ``model.generate`` + one forward/backward of the token-mean log-likelihood weighted by the group
  advantages + AdamW: the floor of what any GRPO implementation on transformers costs.

Each step is timed alone (TRL's per step, from a callback, so its one-off set-up is left out); rounds interleave
the contenders so drift in machine load hits all alike; medians are printed as rollouts per second and ratios.

With ``--shape smollm2-135m`` or ``--shape llama-0.5b`` the three start instead from a model of that real shape
with random weights (``benchmarks/_shapes.py``; SmolLM2's tokenizer), on ``--device`` (cuda when there is one) in
``--dtype`` (bfloat16 for a GPU), and on a GPU each contender's peak memory is printed too (issue 14, part 3).

Usage: python benchmarks/vs_trl.py [--threads 1] [--rounds 7] [--prompts 32] [--samples 8]
       python benchmarks/vs_trl.py --shape smollm2-135m --device cuda --dtype bfloat16 --max-new-tokens 128
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import warnings

import numpy as np
import torch
from _shapes import add_shape_arguments, build_shape, chosen_device, peak_gpu_mb, reset_gpu_peak, synchronize

from genenv.algos.grpo import PolicySample, group_advantages, grpo_step
from genenv.config import load_config
from genenv.domains import make_domain
from genenv.models.policy import Policy
from genenv.rollout import rollout
from genenv.warmstart import warm_start_agent


def genenv_contender(domain, make_policy, samples, lr, beta, max_new_tokens):
    policy = make_policy()
    reference = policy.frozen_copy() if beta > 0 else None
    optimizer = torch.optim.AdamW(policy.trainable_parameters(), lr=lr, weight_decay=0.0)

    def step(tasks, seed) -> int:
        groups = rollout(domain, policy, tasks, group_size=samples, max_new_tokens=max_new_tokens,
                         temperature=1.0, seed=seed)
        # every rollout in the step, as TRL and the bare loop train on (a run trains on informative groups only)
        batch = [PolicySample(e.turns[0].prompt_ids, e.turns[0].response_ids, e.turns[0].logprobs, float(a))
                 for group in groups for e, a in zip(group, group_advantages([e.reward for e in group]))]
        grpo_step(policy, reference, optimizer, batch, kl_coef=beta)
        return len(batch)
    return step


def bare_contender(domain, make_policy, samples, lr, max_new_tokens):
    policy = make_policy()
    model, tokenizer, device = policy.model, policy.tokenizer, policy.device
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    eos, pad = policy.eos_token_id, tokenizer.pad_token_id

    def step(tasks, seed) -> int:
        prompts = [t.prompt for t in tasks for _ in range(samples)]
        enc = tokenizer(prompts, padding=True, return_tensors="pt").to(device)
        torch.manual_seed(seed)
        model.eval()
        with torch.no_grad():
            sequences = model.generate(**enc, do_sample=True, temperature=1.0, top_k=0, top_p=1.0,
                                       max_new_tokens=max_new_tokens, pad_token_id=pad, eos_token_id=eos)
        width = enc.input_ids.shape[1]
        new = sequences[:, width:]
        is_eos = new == eos
        after_eos = (is_eos.cumsum(1) - is_eos.long()) > 0
        mask = (~after_eos).float()
        texts = tokenizer.batch_decode(new, skip_special_tokens=True)
        rewards = np.array([domain.score(task, text) for task, text in zip([t for t in tasks for _ in range(samples)],
                                                                            texts)])
        advantages = torch.tensor(np.concatenate([group_advantages(g) for g in rewards.reshape(-1, samples)]),
                                  dtype=torch.float32, device=device)
        model.train()
        attention = torch.cat([enc.attention_mask, mask.long()], dim=1)
        logits = model(input_ids=sequences, attention_mask=attention, logits_to_keep=new.shape[1] + 1).logits
        logits = logits[:, :-1].float()
        logp = logits.gather(-1, new.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)
        loss = -((logp * advantages.unsqueeze(1)) * mask).sum() / mask.sum()
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return len(prompts)
    return step


def trl_pass(domain, policy_folder, tokenizer, rounds, samples, lr, beta, others, workdir, *, max_new_tokens,
             device="cpu", dtype="float32", peaks=None) -> list[float]:
    """Train TRL's GRPOTrainer for one step per round (the rounds' prompts in order); after each of its steps the
    callback runs ``others(round_index)``, so the contenders interleave. Returns TRL's per-step seconds (and, on a
    GPU, appends each step's peak memory to ``peaks``)."""
    from datasets import Dataset  # noqa: PLC0415 (benchmark extra)
    from transformers import TrainerCallback  # noqa: PLC0415
    from trl import GRPOConfig, GRPOTrainer  # noqa: PLC0415 (benchmark extra)

    step_seconds: list[float] = []
    tasks_by_prompt = {t.prompt: t for tasks in rounds for t in tasks}

    class Interleave(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            reset_gpu_peak(device)
            self.start = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            synchronize(device)
            step_seconds.append(time.perf_counter() - self.start)
            if peaks is not None and peak_gpu_mb(device) is not None:
                peaks.append(peak_gpu_mb(device))
            others(len(step_seconds) - 1)

    def reward(prompts, completions, **kwargs):
        return [domain.score(tasks_by_prompt[p], c) for p, c in zip(prompts, completions)]

    prompts = len(rounds[0])
    args = GRPOConfig(output_dir=workdir, per_device_train_batch_size=prompts * samples, num_generations=samples,
                      max_completion_length=max_new_tokens, learning_rate=lr, beta=beta,
                      temperature=1.0, top_k=0, top_p=1.0, max_steps=len(rounds), gradient_accumulation_steps=1,
                      steps_per_generation=1, num_iterations=1, shuffle_dataset=False, seed=0,
                      use_cpu=not device.startswith("cuda"), bf16=dtype == "bfloat16", report_to="none",
                      save_strategy="no", logging_strategy="no", disable_tqdm=True,
                      lr_scheduler_type="constant", warmup_steps=0, weight_decay=0.0, max_grad_norm=1.0,
                      dataloader_num_workers=0, model_init_kwargs={"dtype": getattr(torch, dtype)})
    data = Dataset.from_list([{"prompt": t.prompt} for tasks in rounds for t in tasks])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = GRPOTrainer(model=str(policy_folder), processing_class=tokenizer, reward_funcs=reward, args=args,
                              train_dataset=data, callbacks=[Interleave()])
        trainer.train()
    return step_seconds


def timed_steps(contenders: dict, rounds, rates: dict, device: str = "cpu", peaks: dict | None = None):
    """``others`` for :func:`trl_pass`: one step of every contender on round ``index``, each timed alone (and, on a
    GPU, its peak memory recorded in ``peaks``)."""
    def run_round(index: int) -> None:
        for name, step in contenders.items():
            reset_gpu_peak(device)
            start = time.perf_counter()
            rollouts = step(rounds[index], seed=index)
            synchronize(device)
            if index > 0:  # round 0 warms every contender up
                rates.setdefault(name, []).append(rollouts / (time.perf_counter() - start))
            if peaks is not None and peak_gpu_mb(device) is not None:
                peaks.setdefault(name, []).append(peak_gpu_mb(device))
    return run_round


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--prompts", type=int, default=32)
    parser.add_argument("--samples", type=int, default=8)
    parser.add_argument("--lr", type=float, default=3e-4)
    add_shape_arguments(parser, "a model of this real shape with random weights instead of the default's tiny agent")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    device = chosen_device(args)
    cfg = load_config("default", [f"threads={args.threads}", "progress=false"])
    domain = make_domain(cfg.domain.name, **cfg.domain.options)
    max_new_tokens = args.max_new_tokens or domain.agent_max_new_tokens
    rng = np.random.default_rng(0)
    rounds = [domain.seed_tasks(rng, args.prompts) for _ in range(args.rounds + 1)]
    rollouts = args.prompts * args.samples
    rates: dict[str, list[float]] = {}
    peaks: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as workdir:
        folder = f"{workdir}/model"
        if args.shape:
            build_shape(args.shape, folder)
        else:
            policy, _ = warm_start_agent(cfg, domain, log=print)  # the default run's agent (cached after the first)
            policy.save(folder)
        tokenizer = Policy.load(folder).tokenizer
        make_policy = lambda: Policy.load(folder, device=device, dtype=args.dtype)  # noqa: E731
        for beta in (0.0, 0.001):  # one pass per KL coefficient, TRL interleaved with genenv and the bare loop
            others = {f"genenv beta {beta:g}": genenv_contender(domain, make_policy, args.samples, args.lr, beta,
                                                                max_new_tokens),
                      f"bare loop (pass beta {beta:g})": bare_contender(domain, make_policy, args.samples, args.lr,
                                                                        max_new_tokens)}
            trl_peaks: list[float] = []
            seconds = trl_pass(domain, folder, tokenizer, rounds, args.samples, args.lr, beta,
                               timed_steps(others, rounds, rates, device, peaks), f"{workdir}/trl",
                               max_new_tokens=max_new_tokens, device=device, dtype=args.dtype, peaks=trl_peaks)
            rates[f"TRL beta {beta:g}"] = [rollouts / s for s in seconds[1:]]
            if trl_peaks:
                peaks[f"TRL beta {beta:g}"] = trl_peaks
            del others   # the pass's models go before the next pass's are loaded
    medians = {name: statistics.median(r) for name, r in rates.items()}
    model = f"{args.shape} (random weights)" if args.shape else "the default's tiny agent"
    print(f"{args.prompts} prompts x {args.samples} samples per step, {max_new_tokens} new tokens at most, {model}, "
          f"{device} {args.dtype}, {args.threads} thread(s), {args.rounds} interleaved rounds after one warm-up "
          "(medians)")
    for name, rate in medians.items():
        peak = f"   peak GPU memory {max(peaks[name]):,.0f} MB" if peaks.get(name) else ""
        print(f"  {name:<26s} {rate:8.0f} rollouts/s{peak}")
    for beta in ("0", "0.001"):
        ours = medians[f"genenv beta {beta}"]
        print(f"beta {beta}: genenv / TRL {ours / medians[f'TRL beta {beta}']:.2f}x, "
              f"genenv / bare loop {ours / medians[f'bare loop (pass beta {beta})']:.2f}x")


if __name__ == "__main__":
    main()

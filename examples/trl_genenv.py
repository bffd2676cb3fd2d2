"""TRL's GRPOTrainer trains the agent; genenv's simulator writes its tasks and learns from their p_hat (issue 59).

    .venv/bin/python examples/trl_genenv.py --preset smoke --steps 20      # docs/trl.md: several processes, GPUs
    .venv/bin/torchrun --nproc_per_node 2 examples/trl_genenv.py --preset smoke --steps 4

It keeps what it trained under --out: the agent (agent/), genenv's simulator, pools and metrics (genenv/), and a
checkpoint every --save-steps steps (and at Ctrl-C or SIGTERM, which stop after the step) that --resume goes on
from.
"""

import argparse
import sys
import warnings
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--preset", default="smoke")
parser.add_argument("--steps", type=int, default=20)
parser.add_argument("--generations", type=int, default=4, help="completions per prompt (GRPO's group)")
parser.add_argument("--out", default="runs/trl-genenv")
parser.add_argument("--save-steps", type=int, default=10, help="a checkpoint (TRL's and genenv's) every N steps")
parser.add_argument("--resume", action="store_true", help="go on from the last checkpoint under --out")
parser.add_argument("--report-to", default="none", help="TRL's trackers: tensorboard, wandb, trackio, ... (they "
                    "get genenv's metrics as genenv/<name>); none: the console and --out only")
parser.add_argument("--use-vllm", action="store_true", help="TRL's vLLM colocate mode writes the agent's completions "
                    "(needs vLLM and an agent folder vLLM decodes; docs/trl.md)")
parser.add_argument("overrides", nargs="*", help="genenv config overrides, e.g. curriculum=random")
args = parser.parse_args()   # (before the heavy imports: --help answers at once)


def refuse(message: str):
    """A setting refused at start: one line per problem on stderr, exit status 2 (as genenv's own commands)."""
    for line in message.splitlines():
        print(f"genenv: {line}", file=sys.stderr)
    raise SystemExit(2)


if not args.use_vllm:   # TRL warns, five times on import, that the installed vLLM is newer than it tested; unused here
    warnings.filterwarnings("ignore", message="TRL currently supports vLLM versions", category=UserWarning)
from transformers.trainer_utils import get_last_checkpoint  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402

from genenv.config import ConfigError, load_config  # noqa: E402
from genenv.integrations.trl import (  # noqa: E402
    GenEnvCallback,
    SaveAndStopOnSignal,
    SimulatorSide,
    domain_scorer,
    grpo_batch,
    task_stream,
)
from genenv.warmstart import warm_start_agent  # noqa: E402

resume_from = get_last_checkpoint(args.out) if Path(args.out).is_dir() else None
if args.resume and resume_from is None:
    refuse(f"--resume: no checkpoint-<step> under {args.out} to go on from")
if resume_from and not args.resume:
    refuse(f"--out {args.out} holds a run ({Path(resume_from).name}): add --resume, or choose another --out")
try:
    cfg = load_config(args.preset, args.overrides)
    if args.use_vllm and cfg.device == "cpu":   # measured: docs/trl.md
        refuse("--use-vllm: on CPU, TRL 1.16's colocate mode fails at its first weight sync: it calls the engine "
               "model's load_weights, which vLLM 0.32's CPU backend refuses after the engine has repacked its linear "
               "weights (\"'Parameter' object has no attribute 'weight_loader'\"); on CPU use genenv's own loop with "
               "agent.sampler=vllm (docs/vllm.md), or TRL with vLLM on a GPU")
    side = SimulatorSide(cfg, log=print)                        # the domain, curriculum, simulator and pools
    agent, _ = warm_start_agent(cfg, side.domain, log=print)    # or any causal LM and its tokenizer
    scorer = domain_scorer(side, agent.tokenizer)   # the domain's verifier: a reward function, or tools (multi-turn)
except ConfigError as error:   # refused at start (the preflight: every problem, a line each naming its field)
    refuse("\n".join(f"config error: {line}" for line in str(error).splitlines()))
config = GRPOConfig(
    output_dir=args.out, max_steps=args.steps,   # grpo_batch: one round a step, split over the processes
    max_completion_length=cfg.agent.max_new_tokens * side.domain.max_turns, learning_rate=cfg.agent.lr,
    logging_steps=1, report_to=args.report_to, save_strategy="steps", save_steps=args.save_steps,
    use_cpu=cfg.device == "cpu", bf16=False, use_vllm=args.use_vllm, vllm_mode="colocate",
    **grpo_batch(side, args.generations))
trainer = GRPOTrainer(model=agent.model, processing_class=agent.tokenizer, args=config, train_dataset=task_stream(side),
                      callbacks=[GenEnvCallback(side, scorer, args.generations), SaveAndStopOnSignal()],
                      **scorer.trainer_arguments())
trainer.train(resume_from_checkpoint=resume_from)
trainer.save_model(f"{args.out}/agent")   # (GenEnvCallback kept genenv's side in {out}/genenv at the end)
for row in side.metrics[-3:]:   # (the main process's: it observes the rounds)
    print({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()})
if side.main_process:
    step = trainer.state.global_step
    stopped = f"stopped at step {step} of {args.steps}; " if step < args.steps else ""
    print(f"{stopped}kept in {args.out}: agent/ (the trained agent), genenv/ (the simulator, its pools, metrics.jsonl:"
          f" a row a round), checkpoint-<step>/ (every {args.save_steps} steps and at a stop by Ctrl-C or SIGTERM; "
          "--resume goes on from the last)")

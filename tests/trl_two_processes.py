"""Run by tests/test_trl.py under `torchrun --nproc_per_node 2` (gloo, CPU): a few GRPO steps with genenv's simulator,
each process writing what it saw to OUT/rank<r>.json.

    trl_two_processes.py OUT STEPS GENERATIONS PRESET [overrides...]

A single-turn preset is scored by DomainReward, a multi-turn one by DomainEnvironments (TRL's tool calls; the agent
then needs a tool-calling chat template, ``agent.model=FOLDER``)."""

import json
import sys

from trl import GRPOConfig, GRPOTrainer

from genenv.config import load_config
from genenv.integrations.trl import GenEnvCallback, SimulatorSide, domain_scorer, grpo_batch, task_stream, world
from genenv.warmstart import warm_start_agent

out, steps, generations, preset, overrides = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:]
cfg = load_config(preset, ["threads=1", *overrides])
side = SimulatorSide(cfg)
agent, _ = warm_start_agent(cfg, side.domain, log=lambda m: None)
written, scored = {}, []
write_round = side.write_round


def recorded_write(round_index):
    tasks = write_round(round_index)
    written[round_index] = [t.text for t in tasks]
    return tasks


class Recording(GenEnvCallback):
    """This process's scored (round, task, reward) rows, as the callback takes them after each step."""

    def on_step_end(self, args, state, control, **kwargs):
        scored.extend(self.reward.pending)
        return super().on_step_end(args, state, control, **kwargs)


side.write_round = recorded_write
scorer = domain_scorer(side, agent.tokenizer)
callback = Recording(side, scorer, generations)
processes = 2
args = GRPOConfig(output_dir=out, use_cpu=True, bf16=False, max_steps=steps, report_to=[], logging_steps=1,
                  max_completion_length=8 * side.domain.max_turns, save_strategy="no", learning_rate=1e-4,
                  **grpo_batch(side, generations, processes))
trainer = GRPOTrainer(model=agent.model, args=args, train_dataset=task_stream(side), processing_class=agent.tokenizer,
                      callbacks=[callback], **scorer.trainer_arguments())
trainer.train()
rank, size = world()
with open(f"{out}/rank{rank}.json", "w") as f:
    json.dump({"rank": rank, "size": size, "main": side.main_process, "written": written, "scored": scored,
               "observed": callback.logs, "has_simulator": side.players is not None,
               "prompts_per_round": side.prompts_per_round}, f)

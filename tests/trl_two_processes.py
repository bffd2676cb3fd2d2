"""Run by tests/test_trl.py under `torchrun --nproc_per_node 2` (gloo, CPU): a few GRPO steps of the smoke preset's
tiny agent with genenv's simulator, each process writing what it saw to OUT/rank<r>.json."""

import json
import sys

from trl import GRPOConfig, GRPOTrainer

from genenv.config import load_config
from genenv.integrations.trl import DomainReward, GenEnvCallback, SimulatorSide, grpo_batch, task_stream, world
from genenv.warmstart import warm_start_agent

out, steps, generations = sys.argv[1], int(sys.argv[2]), 4
cfg = load_config("smoke", ["threads=1"])
side = SimulatorSide(cfg)
agent, _ = warm_start_agent(cfg, side.domain, log=lambda m: None)
written, scored = {}, []
write_round = side.write_round


def recorded_write(round_index):
    tasks = write_round(round_index)
    written[round_index] = [t.text for t in tasks]
    return tasks


class Recording(DomainReward):
    def __call__(self, prompts, completions, task, round, **kwargs):   # noqa: A002
        rewards = super().__call__(prompts, completions, task, round, **kwargs)
        scored.extend((int(r), json.loads(t)["text"], x) for r, t, x in zip(round, task, rewards))
        return rewards


side.write_round = recorded_write
reward = Recording(side)
callback = GenEnvCallback(side, reward, generations)
processes = 2
args = GRPOConfig(output_dir=out, use_cpu=True, bf16=False, max_steps=steps, report_to=[], logging_steps=1,
                  max_completion_length=8, save_strategy="no", learning_rate=1e-4,
                  **grpo_batch(side, generations, processes))
trainer = GRPOTrainer(model=agent.model, reward_funcs=reward, args=args, train_dataset=task_stream(side),
                      processing_class=agent.tokenizer, callbacks=[callback])
trainer.train()
rank, size = world()
with open(f"{out}/rank{rank}.json", "w") as f:
    json.dump({"rank": rank, "size": size, "main": side.main_process, "written": written, "scored": scored,
               "observed": callback.logs, "has_simulator": side.players is not None,
               "prompts_per_round": side.prompts_per_round}, f)

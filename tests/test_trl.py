"""genenv inside TRL's GRPOTrainer (genenv.integrations.trl): a few steps of a tiny agent on the smoke preset, in
one process: the rounds' tasks reach the trainer, p_hat comes from every completion's reward, the simulator learns
once per round, genenv's metrics reach TRL's logs, and what cannot run under TRL is refused."""

import json

import pytest
import torch

pytest.importorskip("trl", reason="trl is not installed (the trl extra; `make install` adds it)")

from genenv.config import ConfigError, load_config  # noqa: E402
from genenv.domains import Task, make_domain  # noqa: E402
from genenv.integrations.trl import (  # noqa: E402
    DomainEnvironments,
    DomainReward,
    GenEnvCallback,
    SimulatorSide,
    domain_scorer,
    grouped_rewards,
    grpo_batch,
    task_stream,
)


def test_grouped_rewards_by_round_then_task():
    rows = [(0, "a", 1.0), (0, "b", 0.0), (1, "a", 0.5), (0, "a", 0.0)]
    assert grouped_rewards(rows) == {0: {"a": [1.0, 0.0], "b": [0.0]}, 1: {"a": [0.5]}}


class _Recording(DomainReward):
    """The reward function, keeping every row it scored (the callback clears what it has observed)."""

    def __init__(self, side):
        super().__init__(side)
        self.seen = []

    def __call__(self, prompts, completions, task, round, **kwargs):   # noqa: A002
        out = super().__call__(prompts, completions, task, round, **kwargs)
        self.seen += [(int(r), json.loads(t)["text"], p, x) for r, t, p, x in zip(round, task, prompts, out)]
        return out


def test_a_trl_run_trains_the_simulator_on_every_completions_reward(tmp_path):
    from trl import GRPOConfig, GRPOTrainer

    from genenv.warmstart import warm_start_agent
    cfg = load_config("smoke", ["threads=1"])
    side = SimulatorSide(cfg)
    agent, _ = warm_start_agent(cfg, side.domain, log=lambda m: None)
    reward = _Recording(side)
    written = {}
    write_round = side.write_round
    side.write_round = lambda r: written.setdefault(r, write_round(r))
    generations = 4
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, max_steps=3, report_to=[],
                      max_completion_length=8,
                      logging_steps=1, save_strategy="no", learning_rate=1e-4, **grpo_batch(side, generations))
    callback = GenEnvCallback(side, reward, generations)
    trainer = GRPOTrainer(model=agent.model, reward_funcs=reward, args=args, train_dataset=task_stream(side),
                          processing_class=agent.tokenizer, callbacks=[callback])
    trainer.train()
    # every round the trainer scored is observed once, in order, after all its completions were scored
    assert [row["round"] for row in callback.logs] == [0, 1, 2]
    scored = grouped_rewards([(r, text, x) for r, text, _, x in reward.seen])
    for round_index, tasks in scored.items():
        assert sum(map(len, tasks.values())) == side.prompts_per_round * generations
        # the trainer's prompts are the round's tasks, each num_generations times
        assert sorted(tasks) == sorted({t.text for t in written[round_index]})
        assert all(len(rewards) % generations == 0 for rewards in tasks.values())
    # p_hat of each valid generated task: the mean of its completions' rewards (success threshold 1)
    pool = side.state.task_pool
    for text, rewards in scored[2].items():
        entry = pool.entries[pool._index[text]]
        assert entry.p_hat_history[-1] == pytest.approx(sum(r >= 1.0 for r in rewards) / len(rewards))
    assert sum(row["env_steps"] > 0 for row in callback.logs) >= 2   # the simulator learns once per round
    logged = [entry for entry in trainer.state.log_history if "genenv/round" in entry]
    assert [entry["genenv/round"] for entry in logged[:3]] == [0, 1, 2]
    prompts = {p for _, _, p, _ in reward.seen}
    assert all(side.agent_prompt(t) in prompts for t in written[0])


def test_a_signal_that_reads_no_agent_runs_in_trl_and_its_metrics_join_the_rounds_row():
    """Issue 88: TRL's side calls the signal's one hook as genenv's loop does (with no agent: TRL holds it); the
    round's row carries the signal's own metrics, and the paper's signal adds none."""
    rows = {}
    for name, overrides in (("paper", []), ("progress", ["experimental.signal=learning_progress",
                                                         "experimental.progress.min_count=1"])):
        side = SimulatorSide(load_config("smoke", ["threads=1", *overrides]))
        tasks = side.write_round(0)
        rows[name] = side.observe(0, {t.text: [1.0, 0.0, 1.0, 0.0] for t in tasks})
    assert not any(key.startswith("teacher_") for key in rows["paper"])
    # nothing observed before the first round: every valid task's cluster is unmeasured and earns the most, 1
    assert rows["progress"]["valid_fraction"] > 0 and rows["progress"]["teacher_reward_mean"] == 1.0
    assert rows["progress"]["teacher_backward_passes"] == rows["progress"]["teacher_forward_sequences"] == 0


def test_what_trl_cannot_host_is_refused_with_the_field_named():
    for overrides, field in ((["experimental.signal=probe_gain"], "experimental.signal=probe_gain: the signal reads "
                              "the agent"), (["curriculum=static"], "curriculum")):
        with pytest.raises(ConfigError, match=field):
            SimulatorSide(load_config("smoke", ["threads=1", *overrides]))
    # a multi-turn domain runs through TRL's tool calls: an agent whose chat template cannot carry them is refused,
    # at the side's start (before the simulator's warm start) and by the scorer given the agent's own tokenizer
    cfg = load_config("multihop-smoke", ["threads=1"])
    with pytest.raises(ConfigError, match="agent.model: domain 'multihop' is multi-turn.*the tiny model has no chat"):
        SimulatorSide(cfg)
    from genenv.models.architectures import FAMILIES, build_tokenizer
    plain = build_tokenizer(FAMILIES["qwen2"], ["a b c"])   # ChatML without tools: it drops them
    side = SimulatorSide(load_config("smoke", ["threads=1"]))
    side.domain = make_domain("multihop")
    with pytest.raises(ConfigError, match="agent.model: domain 'multihop' is multi-turn.*drops tool calls"):
        domain_scorer(side, plain)


def test_the_example_runs(tmp_path):
    """examples/trl_genenv.py, two steps on the smoke preset: what a TRL user copies."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(root / "examples" / "trl_genenv.py"), "--steps", "2", "--out",
                           str(tmp_path), "threads=1"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "'round': 1" in done.stdout and "'env_steps': 4" in done.stdout


def _example(*arguments, cwd):
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    return subprocess.Popen([sys.executable, str(root / "examples" / "trl_genenv.py"), *arguments, "threads=1"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)


def test_the_example_keeps_what_it_trained_and_a_stopped_run_resumes_to_the_uninterrupted_ones_rounds(tmp_path):
    """The example keeps the trained agent, genenv's state and metrics under --out; SIGTERM mid-run stops it after
    a step with a checkpoint, and --resume goes on to the same rounds (metrics, pool, simulator) as a run never
    stopped."""
    import signal
    import time

    from safetensors.torch import load_file
    steps = ["--steps", "12", "--save-steps", "2"]
    whole = _example(*steps, "--out", "whole", cwd=tmp_path)
    out, err = whole.communicate(timeout=600)
    assert whole.returncode == 0, err[-2000:]
    assert "kept in whole: agent/" in out.splitlines()[-1]
    assert (tmp_path / "whole" / "agent" / "model.safetensors").exists()
    stopped = _example(*steps, "--out", "stopped", cwd=tmp_path)
    first = tmp_path / "stopped" / "checkpoint-2" / "genenv" / "metrics.jsonl"
    deadline = time.monotonic() + 600
    while not first.exists() and stopped.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    stopped.send_signal(signal.SIGTERM)
    out, err = stopped.communicate(timeout=600)
    assert stopped.returncode == 0, err[-2000:]
    last = out.splitlines()[-1]
    assert last.startswith("stopped at step ") and int(last.split()[3]) < 12, last
    resumed = _example(*steps, "--out", "stopped", "--resume", cwd=tmp_path)
    out, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err[-2000:]
    rows = [(tmp_path / run / "genenv" / "metrics.jsonl").read_text().splitlines() for run in ("whole", "stopped")]
    assert len(rows[0]) == 12 and rows[0] == rows[1]   # a round a step, each observed
    states = [json.loads((tmp_path / run / "genenv" / "state.json").read_text()) for run in ("whole", "stopped")]
    assert states[0]["run_state"] == states[1]["run_state"]
    weights = [load_file(tmp_path / run / "genenv" / "env.safetensors") for run in ("whole", "stopped")]
    assert all(torch.equal(weights[0][name], weights[1][name]) for name in weights[0])
    again = _example(*steps, "--out", "whole", cwd=tmp_path)   # a folder that holds a run is not started over
    out, err = again.communicate(timeout=600)
    assert again.returncode == 2 and "holds a run (checkpoint-12): add --resume" in err


def test_the_example_refuses_trls_vllm_mode_on_cpu_at_start_saying_why(tmp_path):
    """`--use-vllm` on CPU: TRL's colocate mode fails at its first weight sync on vLLM 0.32's CPU backend (measured,
    docs/trl.md), so the example says so in one line before any warm start."""
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, str(root / "examples" / "trl_genenv.py"), "--use-vllm", "--out",
                           str(tmp_path), "threads=1"], capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 2 and "'Parameter' object has no attribute 'weight_loader'" in done.stderr
    assert "warm start" not in done.stdout and not any(tmp_path.iterdir())


def _two_processes(out, steps: int, generations: int, preset: str, *overrides) -> tuple[dict, dict]:
    """tests/trl_two_processes.py under `torchrun --nproc_per_node 2` (gloo on CPU; accelerate reads its
    environment), checked: the main process alone holds the simulator and writes each round, both processes get the
    same tasks, each scores its share of the completions, and the main process observes every round once with the
    completions of both. Returns what each process saw."""
    import subprocess
    import sys
    from collections import Counter
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    torchrun = Path(sys.executable).with_name("torchrun")
    done = subprocess.run([str(torchrun), "--nproc_per_node", "2", str(root / "tests" / "trl_two_processes.py"),
                           str(out), str(steps), str(generations), preset, *overrides], capture_output=True,
                          text=True, timeout=900, cwd=out)
    assert done.returncode == 0, done.stderr[-3000:]
    main, other = (json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1))
    assert main["size"] == 2 and main["main"] and main["has_simulator"]
    assert not other["main"] and not other["has_simulator"] and other["observed"] == []
    assert main["written"] == other["written"] and len(main["written"]) >= steps
    per_round = main["prompts_per_round"] * generations
    mine, theirs = Counter(r for r, _, _ in main["scored"]), Counter(r for r, _, _ in other["scored"])
    assert [row["round"] for row in main["observed"]] == list(range(steps))
    for round_index in range(steps):
        assert mine[round_index] > 0 and theirs[round_index] > 0                 # each process scored a share
        assert mine[round_index] + theirs[round_index] == per_round              # and the main one saw them all
        texts = {text for r, text, _ in main["scored"] + other["scored"] if r == round_index}
        assert texts == set(main["written"][str(round_index)])
        counts = Counter(text for r, text, _ in main["scored"] + other["scored"] if r == round_index)
        assert all(count % generations == 0 for count in counts.values())   # a prompt's G completions, its task
    return main, other


@pytest.mark.slow
def test_two_processes_share_the_rounds_and_the_main_one_learns_from_all_completions(tmp_path):
    main, _ = _two_processes(tmp_path, 3, 4, "smoke")
    assert any(row["env_steps"] > 0 for row in main["observed"])


@pytest.mark.slow
def test_a_multi_turn_domain_in_two_processes(tmp_path):
    """multihop through TRL's tool calls in two processes, the agent a tool-calling Qwen2 folder: the same rounds
    on both, every episode's reward on the main one, each prompt's completions on its task."""
    folder = _tool_calling_qwen(tmp_path)
    _two_processes(tmp_path, 2, 2, "multihop-smoke", f"agent.model={folder}", "agent.warmstart.steps=2")


def _trainer(out, stop_at=None, overrides=()):
    """A 4-step run of the smoke preset that checkpoints every 2 steps; ``stop_at``: killed after that step."""
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from genenv.warmstart import warm_start_agent

    class Stop(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if stop_at is not None and state.global_step >= stop_at:
                control.should_training_stop = True
            return control

    side = SimulatorSide(load_config("smoke", ["threads=1", *overrides]))
    agent, _ = warm_start_agent(side.cfg, side.domain, log=lambda m: None)
    written = {}
    write_round = side.write_round
    side.write_round = lambda r: written.setdefault(r, write_round(r))
    reward = DomainReward(side)
    args = GRPOConfig(output_dir=str(out), use_cpu=True, bf16=False, max_steps=4, report_to=[], logging_steps=1,
                      max_completion_length=8,
                      save_strategy="steps", save_steps=2, learning_rate=1e-4, seed=3, **grpo_batch(side, 4))
    trainer = GRPOTrainer(model=agent.model, reward_funcs=reward, args=args, train_dataset=task_stream(side),
                          processing_class=agent.tokenizer, callbacks=[GenEnvCallback(side, reward, 4), Stop()])
    return trainer, side, written


def test_a_run_resumed_from_trls_checkpoint_repeats_the_uninterrupted_one(tmp_path):
    """Killed after step 2 and resumed from checkpoint-2: the simulator's weights and optimiser, the pools, the
    rounds written before the checkpoint and not yet trained on, and the random states come back, so every round's
    tasks and metrics, the pool and the simulator's final weights equal the uninterrupted run's."""
    whole, whole_side, whole_written = _trainer(tmp_path / "whole")
    whole.train()
    first, _, _ = _trainer(tmp_path / "resumed", stop_at=2)
    first.train()
    assert (tmp_path / "resumed" / "checkpoint-2" / "genenv" / "state.json").exists()
    resumed, side, written = _trainer(tmp_path / "resumed")
    resumed.train(resume_from_checkpoint=str(tmp_path / "resumed" / "checkpoint-2"))
    assert side.metrics == whole_side.metrics and len(side.metrics) == 4
    assert {r: [t.text for t in tasks] for r, tasks in written.items()} == \
        {r: [t.text for t in tasks] for r, tasks in whole_written.items() if r in written}
    assert side.state.task_pool.outcomes == whole_side.state.task_pool.outcomes
    for a, b in zip(side.players.env.model.parameters(), whole_side.players.env.model.parameters()):
        assert torch.equal(a, b)


def test_a_frozen_simulator_on_an_endpoint_writes_the_rounds_and_resumes(tmp_path, endpoint):
    """env.backend=openai (an untrained simulator served elsewhere, docs/trl.md): the endpoint writes every round's
    tasks, nothing of the simulator is saved beside TRL's checkpoint, and a resumed run repeats the whole one."""
    pytest.importorskip("openai")
    from fake_endpoint import Endpoint
    remote = ["curriculum=random", "env.backend=openai", f"env.openai.base_url={endpoint}", "env.openai.model=fake"]
    whole, whole_side, whole_written = _trainer(tmp_path / "whole", overrides=remote)
    whole.train()
    assert whole_side.players.env_opt is None and len(whole_side.metrics) == 4
    assert len(Endpoint.requests) > 0 and all(r["valid_fraction"] > 0 for r in whole_side.metrics)
    saved = tmp_path / "whole" / "checkpoint-2" / "genenv"
    assert (saved / "state.json").exists() and not (saved / "env.safetensors").exists()
    first, _, _ = _trainer(tmp_path / "resumed", stop_at=2, overrides=remote)
    first.train()
    resumed, side, written = _trainer(tmp_path / "resumed", overrides=remote)
    resumed.train(resume_from_checkpoint=str(tmp_path / "resumed" / "checkpoint-2"))
    assert side.metrics == whole_side.metrics
    assert {r: [t.text for t in tasks] for r, tasks in written.items()} == \
        {r: [t.text for t in tasks] for r, tasks in whole_written.items() if r in written}


def test_the_simulator_side_samples_under_the_constraint_when_asked():
    """env.constrained reaches a TRL run's simulator (its sampling, its update and KL terms: the players' one
    constraint, passed to each call), as it does genenv's own loop."""
    side = SimulatorSide(load_config("smoke", ["threads=1", "env.constrained=true"]))
    assert side.players.env_constraint is not None
    assert not hasattr(side.players.env, "constraint") and not hasattr(side.players.env_ref, "constraint")
    assert SimulatorSide(load_config("smoke", ["threads=1"])).players.env_constraint is None


def test_the_simulator_side_sets_its_simulator_up_as_the_loop_does():
    """env.lora_rank, gradient_checkpointing and autocast reach a TRL run's simulator through the same
    function genenv's own loop uses (players.prepare_player): adapters trained, the reference the adapters switched
    off, bfloat16 autocast on both sides of the KL; the optimiser holds only the adapters."""
    side = SimulatorSide(load_config("smoke", ["threads=1", "env.lora_rank=4", "gradient_checkpointing=true",
                                               "autocast=bfloat16"]))
    env, env_ref = side.players.env, side.players.env_ref
    assert env.has_lora and env.checkpointing
    assert env.autocast_bf16 and env_ref.autocast_bf16
    trained = {id(p) for group in side.players.env_opt.param_groups for p in group["params"]}
    assert trained == {id(p) for p in env.trainable_parameters()}
    assert len(trained) < len(list(env.model.parameters()))
    plain = SimulatorSide(load_config("smoke", ["threads=1"])).players
    assert not plain.env.has_lora and not plain.env.autocast_bf16
    assert len(plain.env_opt.param_groups[0]["params"]) == len(list(plain.env.model.parameters()))


@pytest.mark.slow
def test_the_documented_two_process_command_runs_as_written(tmp_path):
    """docs/trl-distributed.md's `.venv/bin/torchrun --nproc_per_node 2 examples/trl_genenv.py ...` line, word for
    word (issue 78: it stopped in GRPOConfig, the per-device batch a whole round on each process): it finishes, and
    the main process prints the rounds it observed."""
    import re
    import shlex
    import subprocess
    import sys
    from pathlib import Path
    root = Path(__file__).resolve().parents[1]
    page = (root / "docs" / "trl-distributed.md").read_text()
    block = re.search(r"```bash\n(.*?)```", page.split("## Several processes")[1], re.S).group(1)
    line = next(entry.split("#")[0].strip() for entry in block.splitlines() if "torchrun" in entry)
    words = shlex.split(line)
    assert words[0] == ".venv/bin/torchrun"   # as every command in the docs is written (issue 87, item 6)
    words[0] = str(Path(sys.executable).with_name("torchrun"))
    words = [str(root / w) if w.endswith(".py") else w for w in words]
    done = subprocess.run([*words, "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=900,
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.search(r"\{'round': \d+, 'valid_fraction'", done.stdout)   # the main process observed rounds


def test_grpo_batch_splits_a_round_over_the_processes_or_says_why_not():
    from genenv.integrations.trl import grpo_batch

    class Side:   # (grpo_batch reads only the round's size and whether its domain is multi-turn)
        prompts_per_round = 12
        domain = type("Domain", (), {"multi_turn": False})
    assert grpo_batch(Side(), 4, processes=2)["per_device_train_batch_size"] == 24
    assert grpo_batch(Side(), 4, processes=1)["generation_batch_size"] == 48
    with pytest.raises(ConfigError, match=r"\(15\) must split evenly over the 2 processes"):
        Side.prompts_per_round = 5
        grpo_batch(Side(), 3, processes=2)
    assert load_config("smoke")   # (the module imports without a process group)


# ---------------------------------------------------------------- multi-turn domains: TRL's tool calls are the actions
def test_a_multi_turn_episode_through_the_environments_tool_earns_what_genenvs_rollout_earns(tmp_path):
    """DomainEnvironment on multihop: the expert's actions through its tool give the episode genenv's rollouts give
    (the sum of checked_step's rewards), an action past the end changes nothing, and get_reward keeps (round, task,
    reward) for the callback; a wrong answer earns 0."""
    import numpy as np

    from genenv.integrations.trl import DomainEnvironment
    folder = _tool_calling_qwen(tmp_path)   # (an agent whose template carries tool calls: checked at the start)
    side = SimulatorSide(load_config("multihop-smoke", ["threads=1", f"agent.model={folder}"]), main_process=False)
    domain = side.domain
    task = domain.seed_tasks(np.random.default_rng(0), 1)[0]
    row = {"prompt": side.agent_prompt(task), "task": json.dumps(task.to_json()), "round": 3}
    assert row["prompt"][0]["role"] == "user" and domain.agent_context([], domain.reset(task)[1]) \
        == row["prompt"][0]["content"]
    log = type("Log", (), {"pending": []})()
    environment = DomainEnvironment(domain, log)
    assert environment.reset(**row) is None   # the prompt already holds the first observation
    state, _ = domain.reset(task, seed=0)
    expected = 0.0
    for _, _, action in domain.expert_steps(task):
        result = domain.checked_step(state, action)
        state, expected = result.state, expected + result.reward
        shown = environment.act(action)
        assert shown.startswith(result.observation)
    assert expected == 1.0 and shown.endswith("The episode has ended.")
    assert environment.act("answer: something else") == "The episode has ended."
    assert environment.get_reward() == 1.0 and log.pending == [(3, task.text, 1.0)]
    environment.reset(**row)
    environment.act("answer: certainly not the answer")
    assert environment.get_reward() == 0.0 and log.pending[-1] == (3, task.text, 0.0)
    # the tool TRL builds from the class: one, `act`, with its argument described
    from transformers.utils import get_json_schema
    schema = get_json_schema(environment.act)
    assert schema["function"]["name"] == "act" and "action" in schema["function"]["parameters"]["properties"]
    assert [name for name in vars(DomainEnvironment) if not name.startswith("_")] == ["reset", "act", "get_reward"]


def _tool_calling_qwen(root) -> str:
    """A random Qwen2 folder with the released Qwen2.5 chat template (TRL's copy, which renders tools and whose
    tool calls TRL parses), its tokenizer trained on multihop's texts."""
    import numpy as np
    from trl.chat_template_utils import qwen2_5_chat_template

    from genenv.domains import make_domain
    from genenv.models.architectures import random_folder
    cfg = load_config("multihop-smoke")
    domain = make_domain(cfg.domain.name, **cfg.domain.options)
    tasks = domain.seed_tasks(np.random.default_rng(0), 50)
    texts = [domain.agent_context([], domain.reset(t)[1]) + t.answer for t in tasks]
    return str(random_folder("qwen2", root / "qwen2", texts, chat_template=qwen2_5_chat_template, seed=0))


def test_a_multi_turn_domain_trains_in_trl_every_completion_of_a_prompt_on_its_task(tmp_path):
    """multihop through GRPOTrainer's environment_factory with a tool-calling agent: each completion's environment
    is reset with its prompt's task (every completion of a group the same task), every episode's reward reaches the
    callback, and each round is observed once with all its completions (p_hat of a task from all of them)."""
    from trl import GRPOConfig, GRPOTrainer

    from genenv.warmstart import warm_start_agent
    folder = _tool_calling_qwen(tmp_path)
    cfg = load_config("multihop-smoke", ["threads=1", f"agent.model={folder}", "agent.warmstart.steps=2"])
    side = SimulatorSide(cfg)
    agent, _ = warm_start_agent(cfg, side.domain, log=lambda m: None)
    scorer = domain_scorer(side, agent.tokenizer)
    assert isinstance(scorer, DomainEnvironments)
    resets, episodes = [], []

    class Recording(DomainEnvironments):
        def __call__(self):
            environment = super().__call__()
            reset, get_reward = environment.reset, environment.get_reward

            def recorded(**row):
                resets.append((int(row["round"]), row["prompt"][0]["content"], Task.from_json(json.loads(row["task"]))))
                return reset(**row)

            def reward():
                value = get_reward()
                episodes.append(environment._log.pending[-1])
                return value
            environment.reset, environment.get_reward = recorded, reward
            return environment
    scorer = Recording(side)
    generations = 2
    args = GRPOConfig(output_dir=str(tmp_path / "out"), use_cpu=True, bf16=False, max_steps=2, report_to=[],
                      max_completion_length=24, logging_steps=1, save_strategy="no", learning_rate=1e-4,
                      **grpo_batch(side, generations))
    assert args.max_tool_calling_iterations == side.domain.max_turns
    callback = GenEnvCallback(side, scorer, generations)
    trainer = GRPOTrainer(model=agent.model, args=args, train_dataset=task_stream(side),
                          processing_class=agent.tokenizer, callbacks=[callback], **scorer.trainer_arguments())
    assert [tool.__name__ for tool in trainer.tools] == ["act"]   # the agent's one tool: a step of the domain
    trainer.train()
    assert [row["round"] for row in callback.logs] == [0, 1]
    for round_index in (0, 1):
        seen = [(prompt, task) for r, prompt, task in resets if r == round_index]
        assert len(seen) == side.prompts_per_round * generations
        by_task = {}
        for prompt, task in seen:   # the prompt shown and the task reset are the same task
            assert prompt == side.agent_prompt(task)[0]["content"]
            by_task[task.text] = by_task.get(task.text, 0) + 1
        assert all(count % generations == 0 for count in by_task.values())
    # every episode's reward reached the callback, and each task's p_hat is the share of its completions solved
    assert len(episodes) == 2 * side.prompts_per_round * generations
    pool = side.state.task_pool
    for text, rewards in grouped_rewards(episodes)[1].items():
        entry = pool.entries[pool._index[text]]
        assert entry.p_hat_history[-1] == pytest.approx(sum(r >= 1.0 for r in rewards) / len(rewards))
    logged = [entry for entry in trainer.state.log_history if "genenv/round" in entry]
    assert [entry["genenv/round"] for entry in logged[:2]] == [0, 1]


def test_genenvs_grpo_loss_equals_trls_on_one_batch_under_matching_settings(tmp_path):
    """Issue 88, item 5: one batch (two groups of four, responses of unequal lengths, old log-probs off the policy
    so the ratio clips, a policy moved off its reference so the KL counts) scored by TRL's own GRPOTrainer code
    (`_compute_loss`, loss_type="bnpo": the token mean over the batch; its advantages from `nanstd`, eps 1e-4; the KL
    unweighted, use_bias_correction_kl=False) and by genenv's (agent.advantage_scaling=trl, the same clip and KL
    coefficient): the same loss. With TRL's default use_bias_correction_kl=True the KL term is weighed by the
    ratio, which genenv's is not: a different loss once the samples are off-policy (asserted below)."""
    import numpy as np
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer
    from trl.trainer.utils import nanstd

    from genenv.algos.grpo import PolicySample, _grpo_micro_loss, group_advantages
    from genenv.warmstart import warm_start_agent
    cfg = load_config("smoke", ["threads=1"])
    domain = make_domain(cfg.domain.name, **cfg.domain.options)
    agent, _ = warm_start_agent(cfg, domain, log=lambda m: None)
    reference = agent.frozen_copy()
    args = GRPOConfig(output_dir=str(tmp_path), use_cpu=True, bf16=False, report_to=[], loss_type="bnpo", beta=0.04,
                      epsilon=0.2, scale_rewards="group", temperature=1.0, num_generations=4,
                      use_bias_correction_kl=False,   # (TRL's default weighs the KL by the ratio; genenv does not)
                      per_device_train_batch_size=8, max_completion_length=8)
    trainer = GRPOTrainer(model=agent.model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                          args=args, train_dataset=Dataset.from_dict({"prompt": ["x"] * 8}),
                          processing_class=agent.tokenizer)   # (its reference: a copy of the agent as it is now)
    trainer.current_gradient_accumulation_steps = 1
    with torch.no_grad():   # the policy a little off its reference: the KL term is not zero
        generator = torch.Generator().manual_seed(0)
        for parameter in agent.model.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    tasks = domain.seed_tasks(np.random.default_rng(0), 2)
    prompts = [agent.encode_prompt(task.prompt) for task in tasks]
    assert len(prompts[0]) == len(prompts[1])   # (TRL counts positions from the row's start: no prompt padding)
    rng = np.random.default_rng(1)
    vocab = agent.model.get_output_embeddings().weight.shape[0]
    rewards = [[1.0, 0.0, 0.0, 1.0], [1.0, 0.0, 0.0, 0.0]]
    trl_rewards = torch.tensor(rewards)
    trl_advantages = ((trl_rewards - trl_rewards.mean(1, keepdim=True)) / (nanstd(trl_rewards, dim=1)[:, None] + 1e-4))
    np.testing.assert_allclose(np.concatenate([group_advantages(r, "trl") for r in rewards]),
                               trl_advantages.flatten().numpy(), rtol=1e-6)
    responses = [rng.integers(3, vocab, size=n).tolist() for n in (3, 5, 4, 6, 2, 5, 3, 4)]
    batch = agent.build_batch([prompts[i // 4] for i in range(8)], responses)
    with torch.no_grad():
        now, _ = agent.token_logprobs(batch)
    old = (now + torch.from_numpy(rng.normal(0.0, 0.3, now.shape)).float()) * batch.response_mask
    advantages = np.concatenate([group_advantages(r, "trl") for r in rewards])
    samples = [PolicySample(prompts[i // 4], responses[i], old[i, :len(responses[i])].tolist(), float(advantages[i]))
               for i in range(8)]
    genenv_loss, _ = _grpo_micro_loss(agent, reference, samples, None, 0.2, 0.04, 0.0, 1.0)

    width = batch.response_ids.shape[1]
    completion_ids = torch.tensor([r + [agent.tokenizer.pad_token_id] * (width - len(r)) for r in responses])
    completion_mask = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in responses])
    prompt_ids = torch.tensor([prompts[i // 4] for i in range(8)])
    with torch.no_grad():
        ref_logps, _, _ = trainer._get_per_token_logps_and_entropies(
            trainer.ref_model, torch.cat([prompt_ids, completion_ids], 1),
            torch.cat([torch.ones_like(prompt_ids), completion_mask], 1), width)
    inputs = {"prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids), "completion_ids": completion_ids,
              "completion_mask": completion_mask, "advantages": trl_advantages.flatten(),
              "old_per_token_logps": old, "ref_per_token_logps": ref_logps}
    agent.model.train()
    trl_loss = trainer._compute_loss(agent.model, inputs)
    assert genenv_loss.item() == pytest.approx(trl_loss.item(), rel=1e-5, abs=1e-7)
    assert abs(genenv_loss.item()) > 1e-3   # (a loss that says something)
    trainer.args.use_bias_correction_kl = True
    assert abs(trainer._compute_loss(agent.model, inputs).item() - genenv_loss.item()) > 1e-4

"""genenv's simulator and curriculum inside TRL's ``GRPOTrainer`` (issue 59): TRL trains the agent (on accelerate:
one process, DDP, FSDP, DeepSpeed), genenv writes its tasks and trains the simulator on their p_hat.

Three pieces, each what TRL already takes:

- :class:`SimulatorSide`, genenv's half of a run, built from a genenv config: the domain, the data split, the
  curriculum, the warm-started simulator with its KL reference and optimiser, the pools. ``write_round(r)`` is the
  loop's phases 1-2 (the curriculum's seeds, the simulator's tasks, the domain's validation) plus pool draws that
  fill the round to a fixed number of prompts; ``observe(r, rewards)`` is phases 4-7 (p_hat per task from every
  completion's reward, R_env or the curriculum's signal, the simulator's update, the pools) with the same functions
  genenv's own loop calls (:mod:`genenv.coevolve`).
- :func:`task_stream`, a ``datasets.IterableDataset`` of the rounds' tasks as prompts (``prompt``) with the task
  itself (``task``, JSON) for the reward; TRL repeats each prompt ``num_generations`` times.
- :class:`DomainReward`, a function in TRL's ``reward_funcs`` signature scoring each completion with the domain's
  verifier (the same ``reset``/``step`` genenv's rollouts use); for a multi-turn domain, in its place,
  :class:`DomainEnvironments`, TRL's ``environment_factory``: one :class:`DomainEnvironment` per completion, reset
  with its row's task, whose tool ``act`` is a step of the domain and whose ``get_reward`` is the episode's reward
  (:func:`domain_scorer` picks). Either hands the rewards to
- :class:`GenEnvCallback`, whose ``on_step_end`` gives a round's rewards to ``observe`` once they are all in and
  logs genenv's curriculum metrics (``genenv/...``) through TRL's logger.

What differs from genenv's loop, by TRL's design: the trainer's dataloader reads one generation batch ahead, so a
round's tasks are written by the simulator as it was before the previous round's update (one round late); TRL
draws the agent's completions and computes its advantages. A signal that reads the agent (two experimental
ones do) and the fixed-data curricula are refused with a message.
Across processes the main one writes and learns (see :class:`SimulatorSide`); the launcher on CPU is
``torchrun --nproc_per_node N`` (gloo; ``accelerate launch --cpu`` starts one process), on GPUs ``accelerate launch``.
"""

from __future__ import annotations

import json
import os
import random
import signal
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from genenv.checkpoint import load_optimizers, save_optimizers
from genenv.coevolve import (
    draw_tasks,
    generate_tasks,
    grow_pools,
    rollout_budget,
    score_tasks,
    scoring,
    simulator_update,
    update_simulator,
    validate_tasks,
)
from genenv.config import ConfigError, RunConfig
from genenv.domains import Invalid, Task
from genenv.engine import LocalEngine
from genenv.generation import Candidate
from genenv.io import atomic_write_json, atomic_write_jsonl
from genenv.metrics import mean
from genenv.model_check import tool_call_problem
from genenv.players import Players, RunState, prepare_player, simulator_constraint
from genenv.preflight import multi_turn_refusal, preflight
from genenv.rollout import Episode
from genenv.splits import data_split, training_seed_tasks
from genenv.warmstart import warm_start_simulator


def world() -> tuple[int, int]:
    """(this process's rank, the number of processes) of the initialised process group; (0, 1) without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class SimulatorSide:
    """genenv's half of a TRL run (see the module's docstring); ``prompts_per_round``: the unique prompts of one of
    TRL's generation batches (``generation_batch_size // num_generations``). Across processes (``accelerate
    launch``, ``torchrun``) the simulator, its optimiser and the pools live on the main process only
    (``main_process``: rank 0 by the launcher's ``RANK``); the others hold the domain, score their completions and
    receive each round's tasks from it."""

    def __init__(self, cfg: RunConfig, prompts_per_round: int | None = None, log=lambda message: None,
                 main_process: bool | None = None):
        self.cfg, self.log = cfg, log
        self.main_process = int(os.environ.get("RANK", "0")) == 0 if main_process is None else main_process
        # every problem of the config, TRL's own refusals included, before the simulator's warm start
        self.curriculum, self.domain = preflight(cfg, trl=True)
        fresh, replay = rollout_budget(cfg)
        self.prompts_per_round = prompts_per_round or fresh + replay
        if self.prompts_per_round < 1:
            raise ConfigError("prompts_per_round: at least 1")
        self.split = data_split(cfg, self.domain)
        self.rounds: dict[int, tuple[list, list[Task]]] = {}   # round -> (its candidates, its drawn tasks)
        self.metrics: list[dict] = []
        self.next_round = 0   # the round the task stream writes next (a resumed run goes on from its checkpoint's)
        self.replay: dict[int, list[Task]] = {}   # rounds written before a checkpoint and not yet trained on
        self.players = self.state = self.engine = None
        if not self.main_process:
            return
        env, _ = warm_start_simulator(cfg, self.domain, log=log)
        constraint = simulator_constraint(cfg, self.domain, env)   # as genenv's loop sets its simulator up
        env_ref, env_opt = prepare_player(cfg, "env", env)
        self.players = Players(None, None, env, env_ref, None, env_opt, constraint)
        self.state = RunState()
        for task in training_seed_tasks(cfg, self.domain, self.split):
            self.state.task_pool.add(task, "seed", -1)
        self.engine = LocalEngine(self.domain, self.players)

    # ------------------------------------------------------------------ phases 1-2: the round's tasks
    def write_round(self, round_index: int) -> list[Task]:
        """The round's ``prompts_per_round`` tasks: the simulator's valid ones first (at most that many), then pool
        tasks the curriculum draws for the other slots (replay and the slots of invalid generations). Written on
        the main process and sent to the others (every process's dataloader asks for the same rounds in step)."""
        if round_index in self.replay:   # written before the checkpoint this run resumed from: the same tasks
            tasks = self.replay.pop(round_index)
        else:
            tasks = self._write_round(round_index) if self.main_process else None
        self.next_round = max(self.next_round, round_index + 1)
        _, size = world()
        if size > 1:
            payload = [[t.to_json() for t in tasks] if self.main_process else None]
            dist.broadcast_object_list(payload, src=0)
            tasks = [Task.from_json(t) for t in payload[0]]
        return tasks

    def _write_round(self, round_index: int) -> list[Task]:
        cfg = self.cfg
        generated = self.curriculum.fresh_tasks(cfg, self.domain, self.state.task_pool, round_index)
        if generated is None:
            generated = generate_tasks(cfg, self.domain, self.players.env, self.state, round_index, self.engine)
        generated = validate_tasks(self.domain, generated, self.split)
        kept, valid = [], 0
        for candidate in generated:   # a round holds no more valid generations than it has prompts
            if candidate.valid:
                if valid == self.prompts_per_round:
                    continue
                valid += 1
            kept.append(candidate)
        drawn = draw_tasks(cfg, self.curriculum, self.state, round_index, valid)
        drawn = (drawn * self.prompts_per_round)[:self.prompts_per_round - valid] if drawn else []
        self.rounds[round_index] = (kept, drawn)
        return [c.parsed for c in kept if c.valid] + drawn

    def agent_prompt(self, task: Task) -> str | list[dict]:
        """The agent's prompt for ``task``, as genenv's rollouts build it (``reset`` then ``agent_context``); for a
        multi-turn domain as one user message (TRL renders it with the tools of :class:`DomainEnvironment`)."""
        _, observation = self.domain.reset(task, seed=0)
        context = self.domain.agent_context([], observation)
        return [{"role": "user", "content": context}] if self.domain.multi_turn else context

    # ------------------------------------------------------------------ phases 4-7: what the round's rewards teach
    def observe(self, round_index: int, rewards: dict[str, list[float]]) -> dict:
        """The round's rewards, every completion of every task (task text -> rewards): p_hat, the simulator's
        reward and update, the pools; returns the round's curriculum metrics."""
        cfg = self.cfg
        generated, drawn = self.rounds.pop(round_index)
        valid = [c for c in generated if c.valid]
        groups = [[Episode(c.parsed, [], float(r)) for r in rewards.get(c.parsed.text, [])] for c in valid]
        generated = score_tasks(generated, groups, scoring(cfg))
        drawn_groups = [[Episode(t, [], float(r)) for r in rewards.get(t.text, [])] for t in drawn]
        update = simulator_update(cfg, self.curriculum.trains_simulator)   # (its signal reads no agent: preflight)
        signal_stats = update.signal.before_agent_update(self.domain, None, self.state, generated, round_index)
        env_stats = update_simulator(cfg, self.domain, self.players, self.state, generated, round_index, update)
        grow_pools(cfg, self.state, generated, drawn, drawn_groups, round_index)
        scored = [c for c in generated if c.valid and c.p_hat_task is not None]
        row = {"round": round_index, "valid_fraction": len(valid) / max(1, len(generated)),
               "p_hat_mean": mean([c.p_hat_task for c in scored]),
               "band_hit_rate": mean([float(c.in_band) for c in scored]),
               "r_env_mean": mean([c.r_env for c in scored]), "pool_size": len(self.state.task_pool),
               "env_steps": env_stats.get("env_steps", 0), "env_kl_to_initial": env_stats.get("env_kl_to_initial"),
               **signal_stats}   # (a signal's own metrics, as in genenv's rows)
        self.metrics.append(row)
        return row


    # ------------------------------------------------------------------ checkpoints (TRL's, a folder beside its own)
    def save(self, folder: Path, pending_rows: list) -> None:
        """The simulator's weights and optimiser, the pools (every event, in order), the rounds written and not yet
        observed (their candidates, to be trained on and observed after a resume as they would have been), the
        round the stream writes next, and every observed round's metrics (``metrics.jsonl``, a row per round). Only
        the main process holds anything to save."""
        if not self.main_process:
            return
        folder.mkdir(parents=True, exist_ok=True)
        if self.players.env_opt is not None:   # a frozen endpoint has nothing of its own to save
            self.players.env.save_weights(folder / "env.safetensors")
            save_optimizers(folder / "optimizers.safetensors", {"env": self.players.env_opt}, torch.get_rng_state())
        rounds = {str(r): {"generated": [candidate_json(c) for c in generated], "drawn": [t.to_json() for t in drawn]}
                  for r, (generated, drawn) in self.rounds.items()}
        atomic_write_json(folder / "state.json", {
            "next_round": self.next_round, "metrics": self.metrics, "pending_rows": [list(r) for r in pending_rows],
            "task_pool": self.state.task_pool.pending, "env_pool": self.state.env_pool.pending,
            "run_state": self.state.to_json(),
            "rounds": rounds})
        atomic_write_jsonl(folder / "metrics.jsonl", self.metrics)

    def load(self, folder: Path) -> list:
        """What :meth:`save` wrote (on the main process; the others only learn the round to go on from). Returns
        the rewards of rounds not yet observed (for the callback)."""
        data = json.loads((folder / "state.json").read_text()) if self.main_process else None
        payload = [None if data is None else data["next_round"]]
        if world()[1] > 1:
            dist.broadcast_object_list(payload, src=0)
        if not self.main_process:
            self.next_round = payload[0]
            return []
        if self.players.env_opt is not None:
            self.players.env.load_weights(folder / "env.safetensors")
            saved = load_optimizers(folder / "optimizers.safetensors")
            self.players.env_opt.load_state_dict(saved["env"])
        self.state = RunState.from_json(data["run_state"])
        for event in data["task_pool"]:
            self.state.task_pool.apply(event)
            self.state.task_pool.pending.append(event)
        for event in data["env_pool"]:
            self.state.env_pool.apply(event)
            self.state.env_pool.pending.append(event)
        self.metrics, self.next_round = data["metrics"], data["next_round"]
        self.rounds = {int(r): ([candidate_from_json(c) for c in saved_round["generated"]],
                                [Task.from_json(t) for t in saved_round["drawn"]])
                       for r, saved_round in data["rounds"].items()}
        # the rounds written before the checkpoint and not yet trained on are served again, first
        self.replay = {r: [c.parsed for c in generated if c.valid] + drawn
                       for r, (generated, drawn) in self.rounds.items()}
        self.next_round = min([self.next_round, *self.replay])
        return [tuple(r) for r in data["pending_rows"]]


def candidate_json(c: Candidate) -> dict:
    """A written, not yet observed candidate as JSON (the simulator's update reads its tokens and log-probs)."""
    parsed = c.parsed.to_json() if c.valid else {"invalid": c.parsed.reason, "text": c.parsed.text}
    return {"batch": c.batch, "seed": c.seed.to_json(), "context": c.context, "prompt_ids": list(c.prompt_ids),
            "token_ids": list(c.token_ids), "raw": c.raw, "parsed": parsed, "source": c.source,
            "logprobs": list(c.logprobs), "request_error": c.request_error}


def candidate_from_json(data: dict) -> Candidate:
    parsed = data["parsed"]
    parsed = Invalid(parsed["invalid"], parsed["text"]) if "invalid" in parsed else Task.from_json(parsed)
    return Candidate(data["batch"], Task.from_json(data["seed"]), data["context"], data["prompt_ids"],
                     data["token_ids"], data["raw"], parsed, source=data["source"], logprobs=tuple(data["logprobs"]),
                     request_error=data["request_error"])


def task_stream(side: SimulatorSide):
    """The rounds' tasks as a ``datasets.IterableDataset`` of ``{"prompt", "task"}`` rows, round after round from
    the side's ``next_round`` when the trainer first reads it (a resumed run: its checkpoint's), ``task`` the task
    as JSON for :class:`DomainReward`.

    The stream is named (a fixed fingerprint): ``IterableDataset.from_generator`` would name it by hashing the
    generator, which pickles what it closes over, the side with both players' weights (2.6 s for a 31k-parameter
    model; a real model's weights in full)."""
    from datasets.io.generator import GeneratorDatasetInputStream  # noqa: PLC0415 (the trl extra)

    def rows():
        round_index = side.next_round
        while True:
            for task in side.write_round(round_index):
                yield {"prompt": side.agent_prompt(task), "task": json.dumps(task.to_json()),
                       "round": round_index}
            round_index += 1

    return GeneratorDatasetInputStream(generator=rows, streaming=True, fingerprint="genenv-task-stream").read()


class DomainReward:
    """TRL's reward function: each completion scored by the domain's verifier (as genenv's rollouts score an
    answer). Every (round, task, reward) is kept for :class:`GenEnvCallback`."""

    def __init__(self, side: SimulatorSide):
        self.side = side
        self.__name__ = f"genenv_{side.domain.name}"
        self.pending: list[tuple[int, str, float]] = []

    def __call__(self, prompts, completions, task, round, **kwargs) -> list[float]:   # noqa: A002 (TRL's column)
        domain, out = self.side.domain, []
        for completion, task_json, round_index in zip(completions, task, round):
            parsed = Task.from_json(json.loads(task_json))
            state, _ = domain.reset(parsed, seed=0)
            text = completion if isinstance(completion, str) else completion[-1]["content"]
            reward = float(domain.step(state, text).reward)
            out.append(reward)
            self.pending.append((int(round_index), parsed.text, reward))
        return out

    def trainer_arguments(self) -> dict:
        return {"reward_funcs": self}


class DomainEnvironment:
    """One rollout of a multi-turn domain as TRL's environment (``environment_factory``: an instance per rollout,
    reset with the rollout's dataset row). Its one tool, :meth:`act`, is a step of the domain (``checked_step``, as
    genenv's rollouts take one); the episode ends as there (terminated, truncated, or after ``domain.max_turns``
    actions) and earns the sum of its steps' rewards, :meth:`get_reward`, which also keeps (round, task, reward)
    for :class:`GenEnvCallback`. Public methods other than ``reset`` and ``get_reward`` become TRL tools, so this
    class has no others."""

    def __init__(self, domain, log):
        self._domain, self._log = domain, log   # ``log.pending``: where the episodes' rewards go (the callback's)
        self._task = self._state = None

    def reset(self, task: str, round: int, **columns) -> None:   # noqa: A002 (the stream's column)
        """Start the episode of the row's task (every completion of a prompt gets the same one). The prompt already
        holds the first observation, so nothing is added to it."""
        self._task, self._round = Task.from_json(json.loads(task)), int(round)
        self._state, _ = self._domain.reset(self._task, seed=0)
        self._reward, self._actions, self._ended = 0.0, 0, False

    def act(self, action: str) -> str:
        """Take one action in the task, written as the task's instructions say, and see what happens.

        Args:
            action: The action, in the words the task's instructions give.

        Returns:
            What the environment shows after the action.
        """
        if self._ended:
            return "The episode has ended."
        result = self._domain.checked_step(self._state, action)
        self._state = result.state
        self._reward += result.reward
        self._actions += 1
        self._ended = result.terminated or result.truncated or self._actions >= self._domain.max_turns
        if self._ended:
            return (result.observation + "\n" if result.observation else "") + "The episode has ended."
        return result.observation

    def get_reward(self) -> float:
        """The episode's reward (0 for a completion that took no action), kept for the callback."""
        self._log.pending.append((self._round, self._task.text, self._reward))
        return self._reward


class DomainEnvironments:
    """TRL's ``environment_factory`` for a multi-turn domain: each call a new :class:`DomainEnvironment`; every
    episode's (round, task, reward) lands in ``pending`` for :class:`GenEnvCallback`."""

    def __init__(self, side: SimulatorSide):
        self.side = side
        self.pending: list[tuple[int, str, float]] = []

    def __call__(self) -> DomainEnvironment:
        return DomainEnvironment(self.side.domain, self)

    def trainer_arguments(self) -> dict:
        return {"environment_factory": self}


def domain_scorer(side: SimulatorSide, tokenizer=None) -> DomainReward | DomainEnvironments:
    """What scores the agent's completions in TRL: :class:`DomainReward` for a single-turn domain,
    :class:`DomainEnvironments` for a multi-turn one (its actions are TRL tool calls, so the agent's chat template
    must render tools: with ``tokenizer`` given, one that cannot is a ConfigError naming the field). Pass
    ``scorer.trainer_arguments()`` to ``GRPOTrainer`` and ``scorer`` to :class:`GenEnvCallback`."""
    if not side.domain.multi_turn:
        return DomainReward(side)
    problem = tool_call_problem(tokenizer) if tokenizer is not None else None
    if problem:
        raise ConfigError(multi_turn_refusal(side.domain.name, problem))
    return DomainEnvironments(side)


def grouped_rewards(rows: list[tuple[int, str, float]]) -> dict[int, dict[str, list[float]]]:
    """(round, task text, reward) rows as round -> task text -> rewards, in the order given."""
    out: dict[int, dict[str, list[float]]] = {}
    for round_index, text, reward in rows:
        out.setdefault(round_index, {}).setdefault(text, []).append(reward)
    return out


def _callback_base():
    from transformers import TrainerCallback  # noqa: PLC0415
    return TrainerCallback


class GenEnvCallback(_callback_base()):
    """After each step: every round whose completions have all been scored is observed (the simulator learns once
    per round), and its metrics go to TRL's logs as ``genenv/<name>``."""

    def __init__(self, side: SimulatorSide, reward: DomainReward | DomainEnvironments, num_generations: int):
        self.side, self.reward, self.num_generations = side, reward, num_generations
        self.rows: list[tuple[int, str, float]] = []   # the main process's rewards of rounds not yet observed
        self.logs: list[dict] = []

    def on_step_end(self, args, state, control, **kwargs):
        """Every process's new rewards go to the main process (a prompt's completions may sit on several); there,
        each round whose completions are all in is observed, once."""
        rows, self.reward.pending = self.reward.pending, []
        _, size = world()
        if size > 1:
            parts = [None] * size
            dist.all_gather_object(parts, rows)
            rows = [row for part in parts for row in part]
        if not self.side.main_process:
            return control
        self.rows += rows
        grouped = grouped_rewards(self.rows)
        expected = self.side.prompts_per_round * self.num_generations
        done = [r for r, tasks in grouped.items() if sum(map(len, tasks.values())) >= expected]
        for round_index in sorted(done):
            row = self.side.observe(round_index, grouped[round_index])
            self.logs.append({**row, "step": state.global_step})
            self.rows = [p for p in self.rows if p[0] != round_index]
        return control

    def on_save(self, args, state, control, **kwargs):
        """Beside TRL's checkpoint (``checkpoint-<step>``), genenv's: ``checkpoint-<step>/genenv``."""
        self.side.save(Path(args.output_dir) / f"checkpoint-{state.global_step}" / "genenv", self.rows)
        return control

    def on_train_end(self, args, state, control, **kwargs):
        """What the run trained, kept: genenv's state as at a checkpoint, in ``<output_dir>/genenv`` (the simulator,
        its optimiser, the pools, ``metrics.jsonl``)."""
        self.side.save(Path(args.output_dir) / "genenv", self.rows)
        return control

    def on_train_begin(self, args, state, control, **kwargs):
        """A run resumed from a checkpoint (``trainer.train(resume_from_checkpoint=...)``; TRL has restored its step)
        restores genenv's from the same checkpoint."""
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.global_step > 0 and (checkpoint / "genenv").exists():
            self.rows = self.side.load(checkpoint / "genenv")
            self.resumed_from = checkpoint
        return control

    def on_step_begin(self, args, state, control, **kwargs):
        """The first step after a resume starts from the random state its checkpoint saved. (With
        ``ignore_data_skip``, which the stream needs, the trainer restores that state before it makes the dataloader's
        iterator, whose creation draws a number from torch's generator; the uninterrupted run made its iterator at
        the start. Restoring it again here gives the resumed run the same completions.)"""
        checkpoint, self.resumed_from = getattr(self, "resumed_from", None), None
        if checkpoint is not None:
            restore_rng_state(checkpoint, world()[0])
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        """The last observed round's metrics join the step's log: the reporters after this callback (TensorBoard,
        W&B, the console) get them in ``logs``, and ``state.log_history`` (which the trainer appended a copy of
        ``logs`` to just before) in its last entry."""
        if logs is not None and self.logs:
            last = self.logs[-1]
            extra = {f"genenv/{k}": v for k, v in last.items() if isinstance(v, (int, float)) and k != "step"}
            logs.update(extra)
            if state.log_history:
                state.log_history[-1].update(extra)
        return control


class SaveAndStopOnSignal(_callback_base()):
    """Ctrl-C (SIGINT) or SIGTERM (a scheduler's preemption) while training: the step under way finishes (a step is
    one round), a checkpoint is saved, TRL's and genenv's, and training stops; ``trainer.train(resume_from_checkpoint
    =...)`` goes on from it with what the uninterrupted run would have had. A second signal stops at once. Build it
    in the main thread (Python's signal handlers live there); across processes, every process stops at the same
    step (the flag is gathered after each)."""

    def __init__(self, signals=(signal.SIGINT, signal.SIGTERM)):
        self.asked = False
        for number in signals:
            signal.signal(number, self._ask)

    def _ask(self, number, frame):
        if self.asked:
            raise KeyboardInterrupt
        self.asked = True

    def on_step_end(self, args, state, control, **kwargs):
        asked = self.asked
        _, size = world()
        if size > 1:
            parts = [None] * size
            dist.all_gather_object(parts, asked)
            asked = any(parts)
        if asked:
            control.should_save = control.should_training_stop = True
        return control


def restore_rng_state(checkpoint: Path, rank: int) -> None:
    """The python, numpy and torch (CPU and CUDA) random states the trainer saved in ``checkpoint`` for this
    process (``rng_state.pth``, or ``rng_state_<rank>.pth`` with several; the trainer's own file, read as it reads
    it)."""
    path = checkpoint / f"rng_state_{rank}.pth"
    path = path if path.exists() else checkpoint / "rng_state.pth"
    if not path.exists():
        return
    saved = torch.load(path, weights_only=False)   # the trainer's own file of this run (numpy states inside)
    random.setstate(saved["python"])
    np.random.set_state(saved["numpy"])
    torch.set_rng_state(saved["cpu"])
    if torch.cuda.is_available() and "cuda" in saved:
        torch.cuda.random.set_rng_state_all(saved["cuda"]) if isinstance(saved["cuda"], list) else \
            torch.cuda.random.set_rng_state(saved["cuda"])


def launched_processes() -> int:
    """The processes of this launch: the process group's size once it is set up, else the ``WORLD_SIZE`` that
    ``torchrun`` and ``accelerate launch`` export (1 for a plain ``python``)."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size()
    return int(os.environ.get("WORLD_SIZE", "1"))


def grpo_batch(side: SimulatorSide, num_generations: int, processes: int | None = None) -> dict:
    """The GRPOConfig settings that make one TRL generation batch one genenv round, for any number of processes:
    ``generation_batch_size`` (``prompts_per_round * num_generations``), ``per_device_train_batch_size`` (that round
    split evenly over the ``processes``, :func:`launched_processes` by default, so one optimiser step takes one
    round), ``num_generations``, ``shuffle_dataset=False`` (a buffered shuffle would read rounds ahead) and
    ``ignore_data_skip=True`` (a resumed run's stream goes on from its checkpoint's round itself; skipping would
    write the skipped rounds again), and for a multi-turn domain ``max_tool_calling_iterations`` (its
    ``max_turns``: TRL's tool calls are its actions). A round that does not split evenly is a ConfigError naming
    the numbers."""
    processes = launched_processes() if processes is None else processes
    round_size = side.prompts_per_round * num_generations
    if processes < 1 or round_size % processes:
        raise ConfigError(f"prompts_per_round: a round of {side.prompts_per_round} prompts x {num_generations} "
                          f"completions ({round_size}) must split evenly over the {processes} processes; choose "
                          "prompts_per_round (or the completions per prompt) so that it does")
    settings = {"generation_batch_size": round_size, "per_device_train_batch_size": round_size // processes,
                "num_generations": num_generations, "shuffle_dataset": False, "ignore_data_skip": True}
    if side.domain.multi_turn:
        settings["max_tool_calling_iterations"] = side.domain.max_turns
    return settings


__all__ = ["DomainEnvironment", "DomainEnvironments", "DomainReward", "GenEnvCallback", "SaveAndStopOnSignal",
           "SimulatorSide", "domain_scorer", "grouped_rewards", "grpo_batch", "launched_processes",
           "task_stream"]

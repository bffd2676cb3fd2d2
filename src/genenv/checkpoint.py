"""A run's atomic persistence in the run folder: its players and state (:mod:`genenv.players`) saved and loaded.

``checkpoints/initial/`` holds the warm-started players (the KL references, as Hugging Face folders);
``checkpoints/latest/`` the weights, optimiser states, RNG state and run state after the last finished epoch,
built in a side folder and swapped in atomically. The pools live in append-only logs next to it
(``task_pool.log.jsonl``, ``env_pool.log.jsonl``): each checkpoint records how many bytes of each log are its
own, so events appended by a run killed before its swap are dropped on resume.
"""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import socket
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:   # Windows: runs are not locked
    fcntl = None

import torch
import yaml
from safetensors import safe_open
from safetensors.torch import save_file

from genenv.config import ConfigError, RunConfig, merge_overrides, to_dict
from genenv.io import (
    append_jsonl,
    atomic_write_jsonl,
    atomic_write_text,
    build_then_swap,
    read_jsonl,
    read_pool_log,
)
from genenv.models.policy import Policy
from genenv.models.registry import hub_revision
from genenv.models.remote import REMOTE_FILE, RemoteSimulator
from genenv.players import Players, RunState, make_players, samplers
from genenv.run_config import CONFIG_HISTORY, RESUMABLE_FIELDS, changed_fields, resumable, run_config, run_config_dict
from genenv.signals import check_config

# ============================================================================ saving

def save_initial(agent: Policy, env: Policy, run_dir: Path) -> None:
    """The warm-started players (before any adapter), the KL references every resume rebuilds from."""
    agent.save(run_dir / "checkpoints" / "initial" / "agent")
    env.save(run_dir / "checkpoints" / "initial" / "env")


def save_checkpoint(players: Players, state: RunState, run_dir: Path, last_metrics: dict | None = None,
                    sync_first=()) -> None:
    """Write checkpoints/latest atomically and durably: build a new folder, fsync it (with the pool logs and
    the files in ``sync_first``: the metrics rows and samples the checkpoint covers, written unsynced), then
    swap it in. The fsyncs run as one parallel batch (:func:`~genenv.io.fsync_paths`).

    The epoch's metrics row travels with the checkpoint, so a run killed between the checkpoint and the
    metrics append gets the row back on resume."""
    _checkpoint_job(players, state, run_dir, last_metrics, sync_first)()


def _checkpoint_job(players: Players, state: RunState, run_dir: Path, last_metrics: dict | None,
                    sync_first) -> Callable[[], None]:
    """Everything of a checkpoint that must be taken now (the pool logs, the run state, the torch RNG state),
    and the rest as a function that writes it: the weights and optimiser states, read when it runs, so they must
    not change before it returns (:class:`CheckpointWriter` sees to that)."""
    root = run_dir / "checkpoints"
    root.mkdir(parents=True, exist_ok=True)
    # Pools: append this epoch's events to the logs first, after cutting them back to the bytes the previous
    # checkpoint owns (kept in the state, never re-read from a folder a kill may have renamed); the new
    # checkpoint records its own sizes, so bytes appended by a run killed before the swap are dropped on resume.
    pool_logs = []
    for name, pool in (("task_pool", state.task_pool), ("env_pool", state.env_pool)):
        pool_logs.append(root / f"{name}.log.jsonl")
        state.pool_log_bytes[name] = append_pool_log(pool_logs[-1], pool.pending, state.pool_log_bytes[name])
        pool.pending = []
    state_text = json.dumps({**state.to_json(), "last_metrics": last_metrics})
    torch_rng = torch.get_rng_state()
    sync_first = [*sync_first, *pool_logs]

    def write(build: Path) -> None:
        # weights only: config and tokenizer never change and live in checkpoints/initial/
        players.agent.save_weights(build / "agent.safetensors")
        players.env.save_weights(build / "env.safetensors")
        save_optimizers(build / "optimizers.safetensors",
                        {"agent": players.agent_opt, "env": players.env_opt}, torch_rng)
        (build / "state.json").write_text(state_text)

    def job() -> None:
        # the build, the pool logs and the rows/samples it covers all reach the disk before the swap makes it latest
        build_then_swap(root / "latest", write, build_name=f".build-{state.epoch}", sync_first=sync_first)
    return job


class CheckpointWriter:
    """A run's checkpoints, written in a background thread while the next epoch writes tasks and rolls them out
    (``background=False``: in place, for tests to compare against): the weights and optimiser states are only
    read until the next update, so :meth:`wait`, called before anything changes them, is all the copy it needs.
    The files, their order, the fsyncs and the atomic swap are :func:`save_checkpoint`'s; a run killed while one
    is being written resumes from the one before, as when killed inside :func:`save_checkpoint`.

    An error in the writing thread is raised by the next :meth:`wait` (or :meth:`save`)."""

    def __init__(self, background: bool = True):
        self.background = background
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def save(self, players: Players, state: RunState, run_dir: Path, last_metrics: dict | None = None,
             sync_first=()) -> None:
        self.wait()
        job = _checkpoint_job(players, state, run_dir, last_metrics, sync_first)
        if not self.background:
            job()
            return
        self._thread = threading.Thread(target=self._write, args=(job,), name="genenv-checkpoint")
        self._thread.start()   # not a daemon: an interpreter exiting on an error still finishes the checkpoint

    def _write(self, job: Callable[[], None]) -> None:
        try:
            job()
        except BaseException as error:   # handed to the main thread by wait()
            self._error = error

    def wait(self) -> None:
        """Block until the checkpoint being written (if any) is on disk (the loop times it as checkpoint_wait)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._error is not None:
            error, self._error = self._error, None
            raise error


def export_final(players: Players, run_dir: Path) -> None:
    """The trained players as ordinary Hugging Face folders: runs/<name>/final/{agent,env}."""
    for name, policy in (("agent", players.agent), ("env", players.env)):
        build_then_swap(run_dir / "final" / name, policy.save)


def append_pool_log(path: Path, events: list[dict], keep_bytes: int) -> int:
    """Cut the log back to ``keep_bytes`` (what the last checkpoint owns), append ``events``; return its size.
    Not fsynced here: :func:`save_checkpoint` syncs it with the checkpoint that records the size."""
    with open(path, "ab") as handle:
        handle.truncate(keep_bytes)
        handle.seek(keep_bytes)
        handle.write("".join(map(_event_line, events)).encode())
        handle.flush()
        return handle.tell()


def _event_line(event: dict) -> str:
    """``json.dumps(event)`` and a newline. A p_hat event (most of a pool's events: one per rolled-out task and
    epoch) is formatted directly, as json would write it (a finite float's repr), a quarter of the cost."""
    keys = list(event)
    if keys == ["p_hat", "index"] and type(event["p_hat"]) is float and math.isfinite(event["p_hat"]) \
            and type(event["index"]) is int:
        p_hat = event["p_hat"]
        return f'{{"p_hat": {p_hat!r}, "index": {event["index"]}}}\n'
    return json.dumps(event) + "\n"


def save_config(cfg: RunConfig, run_dir: Path) -> None:
    """The run's config as YAML, and after it, as comments, what decodes each player
    (:func:`genenv.players.samplers`) and, for a Hugging Face Hub id, the commit its model resolved to."""
    found = samplers(cfg)
    notes = "".join(f"# sampler of the {'agent' if name == 'agent' else 'simulator'}: {text}\n"
                    for name, text in found.items())
    for name, player in (("agent", cfg.agent), ("simulator", cfg.env)):   # a Hub id: the commit it resolved to
        revision = hub_revision(player.model)
        if revision:
            notes += f"# model of the {name}: {player.model} at revision {revision}\n"
    atomic_write_text(run_dir / "config.yaml", yaml.safe_dump(to_dict(cfg), sort_keys=False) + notes)


def _plain(cfg: RunConfig) -> dict:
    """``cfg`` as a run writes it (its plugin strategies' knobs filled in, sections it does not read
    dropped: :func:`genenv.signals.check_config`), through a YAML round trip: tuples and lists compare equal."""
    cfg = copy.deepcopy(cfg)
    check_config(cfg)
    return yaml.safe_load(yaml.safe_dump(to_dict(cfg)))


def config_changes(cfg: RunConfig, run_dir: Path) -> dict[str, tuple]:
    """The fields where ``cfg`` differs from the run folder's config as it runs now (config.yaml and the changes
    its resumes made)."""
    return changed_fields(_plain(run_config(run_config_dict(run_dir))), _plain(cfg))


def record_config_changes(run_dir: Path, changes: dict[str, tuple], epoch: int) -> None:
    """Append a resume's accepted changes to ``config_changes.jsonl`` (config.yaml keeps what the run started
    with)."""
    append_jsonl(run_dir / CONFIG_HISTORY, {"resumed_at_epoch": epoch, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                                            "changes": {key: list(pair) for key, pair in changes.items()}})


# ============================================================================ resuming

def save_optimizers(path: Path, optimizers: dict[str, torch.optim.Optimizer], torch_rng: torch.Tensor) -> None:
    """Optimizer states and the torch RNG state as one safetensors file: tensors by name, everything else
    (hyper-parameters, scalar state) as JSON metadata. Faster to write than ``torch.save`` for the hundreds of
    small tensors of a checkpoint taken every epoch, and loaded without unpickling anything."""
    tensors, meta = {"torch_rng": torch_rng.contiguous()}, {}
    for name, optimizer in optimizers.items():
        if optimizer is None:   # a player that does not train (a frozen remote simulator)
            continue
        state_dict = optimizer.state_dict()
        scalars = {}
        for index, state in state_dict["state"].items():
            for key, value in state.items():
                if torch.is_tensor(value):
                    tensors[f"{name}/{index}/{key}"] = value.detach().contiguous()
                else:
                    scalars.setdefault(str(index), {})[key] = value
        meta[name] = {"param_groups": state_dict["param_groups"], "scalars": scalars}
    save_file(tensors, str(path), metadata={"genenv_optimizers": json.dumps(meta)})


def load_optimizers(path: Path) -> dict:
    """What :func:`save_optimizers` wrote: ``{name: optimizer state dict, ..., "torch_rng": tensor}``."""
    with safe_open(str(path), framework="pt") as handle:
        meta = json.loads(handle.metadata()["genenv_optimizers"])
        tensors = {key: handle.get_tensor(key) for key in handle.keys()}
    out = {"torch_rng": tensors.pop("torch_rng")}
    for name, saved in meta.items():
        state: dict[int, dict] = {}
        for key, tensor in tensors.items():
            owner, index, field_name = key.split("/", 2)
            if owner == name:
                state.setdefault(int(index), {})[field_name] = tensor
        for index, values in saved["scalars"].items():
            state.setdefault(int(index), {}).update(values)
        out[name] = {"state": state, "param_groups": saved["param_groups"]}
    return out


def has_checkpoint(run_dir: Path) -> bool:
    """Whether a resume of ``run_dir`` finds a checkpoint (checkpoints/latest, or the latest.old that
    :func:`latest_checkpoint` takes back); asking changes nothing."""
    return any((Path(run_dir) / "checkpoints" / name).exists() for name in ("latest", "latest.old"))


def epochs_without_checkpoint(run_dir: Path) -> int:
    """Epochs a run folder's metrics hold when it has no checkpoint to resume them from: 0 for a run with one, or
    stopped in its warm start (a run checkpoints before its first epoch). More means its checkpoints were removed
    (to free disk): resuming would start it over from epoch 0 and overwrite those metrics."""
    metrics = Path(run_dir) / "metrics.jsonl"
    if has_checkpoint(run_dir) or not metrics.exists():
        return 0
    return len(read_jsonl(metrics))


def no_checkpoint_message(run_dir: Path, epochs: int) -> str:
    return (f"{run_dir} holds {epochs} epochs of metrics but no checkpoint (checkpoints/latest was removed), so it "
            "cannot be resumed or extended: a resume would start it over from epoch 0 and overwrite them. Keep it "
            "as it is (read it with `genenv report`), or start a new run with another --out")


LOCK_FILE = "run.lock"


class RunInUse(RuntimeError):
    """Another process holds the run folder's lock."""


@contextmanager
def run_lock(run_dir: Path, purpose: str = "running it"):
    """Hold ``run_dir/run.lock`` (an exclusive ``flock``) while writing the folder: a second ``genenv run
    --resume``, a comparison re-run in another terminal, or a prune of the same folder stops with RunInUse
    naming the holder, instead of two processes interleaving one run's checkpoints and metrics. The kernel drops
    the lock when its process dies (``kill -9`` too), so a killed run never leaves a stale one. The file stays
    (unlinking it would let a later process lock a file another one still holds); without ``fcntl`` (Windows)
    nothing is locked."""
    if fcntl is None:
        yield
        return
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    handle = open(run_dir / LOCK_FILE, "a+")
    try:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            raise RunInUse(f"{run_dir} is in use by {holder}: wait for it to end or stop it, then run this "
                           "again") from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"genenv pid {os.getpid()} on {socket.gethostname()} ({purpose})\n")
        handle.flush()
        yield
    finally:
        handle.close()   # closing the descriptor releases the lock


def run_in_use(run_dir: Path) -> str | None:
    """Who holds ``run_dir``'s lock now (RunInUse's message), or None."""
    if not (Path(run_dir) / LOCK_FILE).exists():
        return None
    try:
        with run_lock(run_dir, "checking it"):
            return None
    except RunInUse as err:
        return str(err)


# what `genenv prune` removes from a finished run: the states a resume needs, and nothing a report or an export reads
PRUNED = ("latest", "latest.old", "initial")


def run_finished(run_dir: Path, epochs: int | None = None) -> bool:
    """``epochs`` (default: the run's own) in metrics.jsonl and its final players exported."""
    run_dir = Path(run_dir)
    if not (run_dir / "final" / "agent").exists() or not (run_dir / "metrics.jsonl").exists():
        return False
    epochs = int(run_config_dict(run_dir)["epochs"]) if epochs is None else epochs
    return len(read_jsonl(run_dir / "metrics.jsonl")) >= epochs


def _size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def prunable(run_dir: Path) -> dict[str, int]:
    """The bytes ``prune_run`` would free, by folder (a half-pruned folder's leftovers included)."""
    root = Path(run_dir) / "checkpoints"
    found = [root / name for name in PRUNED] + sorted(root.glob(".*.pruning"))
    return {path.name: _size(path) for path in found if path.is_dir()}


def comparison_of(run_dir: Path) -> Path | None:
    """The comparison folder a run belongs to (``<comparison>/runs/<arm>/seed<k>``), or None."""
    parents = Path(run_dir).parents
    return parents[2] if len(parents) > 2 and (parents[2] / "compare.json").exists() else None


def in_use_by(run_dir: Path) -> str | None:
    """Who is writing ``run_dir`` now: a process holding it, or the comparison it belongs to (which may be about
    to extend it). None when nobody is."""
    comparison = comparison_of(run_dir)
    return run_in_use(run_dir) or (run_in_use(comparison) if comparison is not None else None)


def prune_run(run_dir: Path) -> int:
    """Remove a finished run's checkpoint states (``PRUNED``), keeping its pool logs, metrics, samples and
    final players; returns the bytes freed. Each folder is renamed before it is deleted, so a prune stopped
    midway leaves whole checkpoints or none (a later prune removes the rest). The run can then be read, reported
    and exported, never resumed or extended (a resume asking for more epochs is refused, naming it)."""
    run_dir = Path(run_dir)
    if not run_finished(run_dir):
        raise ConfigError(f"{run_dir}: not a finished run; its checkpoint is what a resume continues from, so "
                          "prune keeps it")
    freed = 0
    root = run_dir / "checkpoints"
    with run_lock(run_dir, "pruning it"):
        comparison = comparison_of(run_dir)   # (its own lock is this prune's now)
        holder = run_in_use(comparison) if comparison is not None else None
        if holder:
            raise RunInUse(holder)
        for name in PRUNED:
            if (root / name).is_dir():
                os.replace(root / name, root / f".{name}.pruning")
        for path in sorted(root.glob(".*.pruning")):
            freed += _size(path)
            shutil.rmtree(path)
    return freed


def latest_checkpoint(run_dir: Path) -> Path | None:
    """checkpoints/latest, or None before the first one. A run killed between the two renames of a swap left
    only latest.old: it takes its name back first, so no later save runs without a complete checkpoint."""
    ckpt = run_dir / "checkpoints" / "latest"
    if not ckpt.exists() and ckpt.with_name("latest.old").exists():
        os.replace(ckpt.with_name("latest.old"), ckpt)
    return ckpt if ckpt.exists() else None


def load_checkpoint(cfg: RunConfig, ckpt: Path, run_dir: Path, domain=None) -> tuple[Players, RunState]:
    initial = run_dir / "checkpoints" / "initial"
    agent = Policy.load(initial / "agent", device=cfg.device, dtype=cfg.dtype)
    env = (RemoteSimulator.from_config(cfg.env.openai) if (initial / "env" / REMOTE_FILE).exists() else
           Policy.load(initial / "env", device=cfg.device, dtype=cfg.dtype))
    players = make_players(cfg, agent, env, domain)  # references of the initial weights, then adapters
    agent.load_weights(ckpt / "agent.safetensors")  # the checkpoint holds the adapted model's weights
    env.load_weights(ckpt / "env.safetensors")
    if (ckpt / "optimizers.safetensors").exists():
        saved = load_optimizers(ckpt / "optimizers.safetensors")
    else:  # a run folder written before optimizer states moved to safetensors
        saved = torch.load(ckpt / "optimizers.pt", weights_only=False)
    players.agent_opt.load_state_dict(saved["agent"])
    if players.env_opt is not None:   # (a frozen remote simulator has none)
        players.env_opt.load_state_dict(saved["env"])
    torch.set_rng_state(saved["torch_rng"])
    saved_state = json.loads((ckpt / "state.json").read_text())
    state = RunState.from_json(saved_state)
    root = run_dir / "checkpoints"
    for name, pool in (("task_pool", state.task_pool), ("env_pool", state.env_pool)):
        for event in read_pool_log(root / f"{name}.log.jsonl", saved_state["pool_log_bytes"][name]):
            pool.apply(event)
    _restore_metrics(run_dir / "metrics.jsonl", state.epoch, saved_state.get("last_metrics"))
    return players, state


def _restore_metrics(path: Path, epochs_done: int, last_metrics: dict | None) -> None:
    """Keep the metrics of checkpointed epochs only; put back the last one if the kill came before it."""
    rows = [r for r in read_jsonl(path) if r.get("epoch", 1 << 30) < epochs_done]
    if last_metrics is not None and last_metrics["epoch"] == epochs_done - 1 and (
            not rows or rows[-1]["epoch"] != last_metrics["epoch"]):
        rows.append(last_metrics)
    atomic_write_jsonl(path, rows)


def load_run_config(run_dir: str | Path, overrides=(), resuming: bool = False) -> RunConfig:
    """A run folder's config as it runs now, with dotted ``overrides`` on top (``genenv run --resume DIR
    epochs=300``). ``resuming``: an override may change only what leaves the run's meaning alone
    (``config.RESUMABLE_FIELDS``: epochs, the evaluation and checkpoint cadence, threads, progress, the engine);
    anything else is a ConfigError naming the field."""
    current = run_config(run_config_dict(run_dir))   # (in today's spelling, so an override in it applies)
    cfg = run_config(merge_overrides(to_dict(current), overrides))
    if resuming:
        for key, (old, new) in changed_fields(_plain(current), _plain(cfg)).items():
            if not resumable(key):
                raise ConfigError(f"{key}: a resume cannot change it ({old!r} -> {new!r}): it changes what the run "
                                  "is. Start a new run (another --out) instead; a resume may change "
                                  + ", ".join(f.rstrip(".") + ("*" if f.endswith(".") else "")
                                              for f in RESUMABLE_FIELDS))
    return cfg

"""What a run generated, as tables another trainer reads (issue 43): `genenv export RUN_OR_COMPARE --to parquet|hf DIR`.

Four tables, one row per:

- ``tasks``: task of the training pool (D_train) at the run's last checkpoint: its text, the agent's prompt, the
  grounded answer, level, source (``seed`` or ``generated``), the epoch it joined (-1 for seed tasks), its p_hat
  history (one value per epoch it was rolled out) and the domain's own fields (``meta``, JSON);
- ``generations``: simulator generation (or fixed-set draw) of ``samples/epoch_N.jsonl``: the context it was
  written from, the raw text, valid or the reason it was rejected, the parsed task, p_hat, R_env, in-band;
- ``rollouts``: agent rollout the run kept beside its generations (``samples_rollouts_shown`` per task): the
  task's prompt, the response, its reward;
- ``verl``: the pool's tasks in veRL's prompt schema (``data_source``, ``prompt`` as chat messages, ``ability``,
  ``reward_model`` with ``style`` and ``ground_truth``, ``extra_info``), so a veRL or TRL user trains on what the
  simulator wrote.

A comparison folder exports every run in it, each row with its ``arm`` and ``seed``. ``--to parquet`` writes
``DIR/<table>.parquet`` (pyarrow); ``--to hf`` a Hugging Face ``datasets`` folder (``DatasetDict.save_to_disk``,
one split per table; ``datasets.load_from_disk(DIR)`` reads it). Both need the ``export`` extra
(``pip install 'genenv-coevolve[export]'``; ``make install`` has it).
"""

from __future__ import annotations

import json
from pathlib import Path

from genenv.io import publish_dir, read_jsonl, read_pool_log, run_folders
from genenv.run_config import run_config_dict

TABLES = ("tasks", "generations", "rollouts", "verl")
# a sample's fields as columns (its "seed", the seed task the simulator varied, becomes "seed_task": "seed" is
# the run's)
GENERATION_FIELDS = ("source", "batch", "seed_task", "context", "generated", "valid", "reason", "task", "answer",
                     "level", "p_hat", "p_hat_task", "r_env", "in_band")


class ExportError(ValueError):
    """A folder that is neither a run nor a comparison, or a missing optional dependency."""


def _pool_events(run_dir: Path, notes: list[str]) -> list[dict]:
    """The task pool's events up to the last checkpoint (what a resume would rebuild). A finished run whose
    ``checkpoints/latest`` was removed (to free disk) still has them: its last checkpoint, after its last epoch,
    covered the whole log. Without a log to read, ``notes`` says why the tasks table has none of its tasks."""
    state_file = run_dir / "checkpoints" / "latest" / "state.json"
    log_file = run_dir / "checkpoints" / "task_pool.log.jsonl"
    if state_file.exists():
        return read_pool_log(log_file, json.loads(state_file.read_text())["pool_log_bytes"]["task_pool"])
    if log_file.exists() and (run_dir / "final" / "agent").exists():
        return read_pool_log(log_file, log_file.stat().st_size)
    why = ("its pool log (checkpoints/task_pool.log.jsonl) was removed" if (run_dir / "final").exists() else
           "it has no checkpoint yet")
    notes.append(f"{run_dir}: no tasks or verl rows: {why}; its generations and rollouts come from samples/")
    return []


def run_tables(run_dir: str | Path, arm: str | None = None, notes: list[str] | None = None) -> dict[str, list[dict]]:
    """The four tables of one run folder, as lists of rows (``arm`` and ``seed`` columns added when ``arm``);
    ``notes`` collects what could not be read."""
    run_dir = Path(run_dir)
    if not (run_dir / "config.yaml").exists():
        raise ExportError(f"{run_dir}: not a run folder (no config.yaml)")
    config = run_config_dict(run_dir)
    domain, seed = config["domain"]["name"], int(config.get("seed", 0))
    tags = {"arm": arm, "seed": seed} if arm is not None else {}

    tasks: list[dict] = []
    for event in _pool_events(run_dir, [] if notes is None else notes):
        if "add" in event:
            task = event["add"]
            tasks.append({**tags, "index": len(tasks), "text": task["text"], "prompt": task["prompt"],
                          "answer": task["answer"], "level": int(task["level"]), "source": event["source"],
                          "epoch": int(event["epoch"]), "p_hat_history": [],
                          "meta": json.dumps(task.get("meta") or {}, sort_keys=True)})
        else:
            tasks[event["index"]]["p_hat_history"].append(float(event["p_hat"]))
    prompts = {row["text"]: row["prompt"] for row in tasks}

    generations, rollouts = [], []
    files = sorted((run_dir / "samples").glob("epoch_*.jsonl"), key=lambda p: int(p.stem.split("_")[1]))
    for path in files:
        epoch = int(path.stem.split("_")[1])
        for number, sample in enumerate(read_jsonl(path)):
            row = {**tags, "epoch": epoch, "number": number,
                   **{name: sample.get("seed" if name == "seed_task" else name) for name in GENERATION_FIELDS}}
            row["batch"] = None if row["batch"] is None else int(row["batch"])
            row["seed_task"] = None if row["seed_task"] is None else str(row["seed_task"])
            generations.append(row)
            for rollout in sample.get("rollouts") or []:
                rollouts.append({**tags, "epoch": epoch, "generation": number, "task": sample.get("task"),
                                 "prompt": prompts.get(sample.get("task")), "answer": sample.get("answer"),
                                 "response": rollout.get("response"), "reward": float(rollout.get("reward", 0.0)),
                                 "terminated": rollout.get("terminated"), "truncated": rollout.get("truncated")})

    verl = [{"data_source": f"genenv/{domain}", "prompt": [{"role": "user", "content": row["prompt"]}],
             "ability": domain, "reward_model": {"style": "rule", "ground_truth": row["answer"]},
             "extra_info": {"split": "train", "index": row["index"], "level": row["level"], "source": row["source"],
                            "epoch": row["epoch"], "text": row["text"], **tags}}
            for row in tasks]
    return {"tasks": tasks, "generations": generations, "rollouts": rollouts, "verl": verl}


def folder_tables(path: str | Path, notes: list[str] | None = None) -> dict[str, list[dict]]:
    """A run folder's tables, or every run of a comparison folder (``compare.json``) with its arm and seed."""
    path = Path(path)
    if (path / "config.yaml").exists():
        return run_tables(path, notes=notes)
    if not (path / "compare.json").exists():
        raise ExportError(f"{path}: neither a run folder (config.yaml) nor a comparison (compare.json)")
    tables: dict[str, list[dict]] = {name: [] for name in TABLES}
    runs = run_folders(path)
    if not runs:
        raise ExportError(f"{path}: a comparison with no runs yet (nothing under {path / 'runs'})")
    for run_dir in runs:
        for name, rows in run_tables(run_dir, arm=run_dir.parent.name, notes=notes).items():
            tables[name].extend(rows)
    return tables


def export(path: str | Path, to: str, out: str | Path, notes: list[str] | None = None) -> dict[str, int]:
    """Write ``path``'s tables to ``out`` as parquet files or a Hugging Face datasets folder; returns the rows
    of each table (``notes``: what a run folder lacked, one line each)."""
    if to not in ("parquet", "hf"):
        raise ExportError(f"--to: {to!r} is not one of parquet, hf")
    try:
        import pyarrow as pa  # noqa: PLC0415 (optional: the export extra)
        import pyarrow.parquet as pq  # noqa: PLC0415
    except ImportError:
        raise ExportError("export needs pyarrow (and datasets for --to hf): "
                          "pip install 'genenv-coevolve[export]'") from None
    out = Path(out)
    if out.exists():
        raise ExportError(f"{out}: already exists; export writes a new folder (remove it or choose another)")
    tables = folder_tables(path, notes)
    arrow = {name: pa.Table.from_pylist(rows) for name, rows in tables.items()}
    if to == "parquet":
        def write(build: Path) -> None:
            for name, table in arrow.items():
                pq.write_table(table, build / f"{name}.parquet")
    else:
        try:
            import datasets  # noqa: PLC0415 (optional: the export extra)
        except ImportError:
            raise ExportError("--to hf needs datasets: pip install 'genenv-coevolve[export]'") from None
        datasets.disable_progress_bars()

        def write(build: Path) -> None:
            build.rmdir()   # save_to_disk makes its own folder
            datasets.DatasetDict({name: datasets.Dataset(table) for name, table in arrow.items()}).save_to_disk(
                str(build))
    out.parent.mkdir(parents=True, exist_ok=True)
    publish_dir(out, write)   # built beside it, then renamed: a stopped export leaves no half folder
    return {name: len(rows) for name, rows in tables.items()}

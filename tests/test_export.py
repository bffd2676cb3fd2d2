"""Issue 43, item 2: `genenv export` writes what a run generated as parquet and as a Hugging Face datasets folder
(tasks also in veRL's schema); round-trips with pyarrow and datasets."""

import subprocess
import sys

import pytest

from genenv.io import read_jsonl

pq = pytest.importorskip("pyarrow.parquet")
datasets = pytest.importorskip("datasets")


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    from genenv.coevolve import run
    from genenv.config import load_config
    return run(load_config("smoke", []), tmp_path_factory.mktemp("run") / "smoke", log=lambda _: None)


def test_parquet_tables_hold_the_runs_pool_generations_and_rollouts(smoke_run, tmp_path):
    from genenv.export import export
    counts = export(smoke_run, "parquet", tmp_path / "out")
    tables = {name: pq.read_table(tmp_path / "out" / f"{name}.parquet").to_pylist() for name in counts}
    assert {name: len(rows) for name, rows in tables.items()} == counts

    events = read_jsonl(smoke_run / "checkpoints" / "task_pool.log.jsonl")
    added = [e for e in events if "add" in e]
    assert [row["text"] for row in tables["tasks"]] == [e["add"]["text"] for e in added]
    history = [[] for _ in added]
    for event in events:
        if "p_hat" in event:
            history[event["index"]].append(event["p_hat"])
    assert [row["p_hat_history"] for row in tables["tasks"]] == history and any(history)
    assert {row["source"] for row in tables["tasks"]} == {"seed", "generated"}

    samples = [s for epoch in range(3) for s in read_jsonl(smoke_run / "samples" / f"epoch_{epoch}.jsonl")]
    assert [(row["generated"], row["valid"], row["reason"], row["r_env"]) for row in tables["generations"]] == \
        [(s["generated"], s["valid"], s["reason"], s["r_env"]) for s in samples]
    assert any(row["reason"] for row in tables["generations"])          # the rejected ones, with their reason
    kept = [(s["task"], r["response"], r["reward"]) for s in samples for r in s.get("rollouts") or []]
    assert [(row["task"], row["response"], row["reward"]) for row in tables["rollouts"]] == kept and kept
    assert all(row["prompt"] for row in tables["rollouts"] if row["task"] in {t["text"] for t in tables["tasks"]})

    first = tables["verl"][0]
    task = tables["tasks"][0]
    assert first["data_source"] == "genenv/addition" and first["ability"] == "addition"
    assert first["prompt"] == [{"role": "user", "content": task["prompt"]}]
    assert first["reward_model"] == {"style": "rule", "ground_truth": task["answer"]}
    assert first["extra_info"]["level"] == task["level"] and first["extra_info"]["split"] == "train"


def test_hf_folder_reads_back_with_datasets_as_the_parquet_tables(smoke_run, tmp_path):
    from genenv.export import export
    export(smoke_run, "parquet", tmp_path / "parquet")
    export(smoke_run, "hf", tmp_path / "hf")
    loaded = datasets.load_from_disk(str(tmp_path / "hf"))
    assert set(loaded) == {"tasks", "generations", "rollouts", "verl"}
    for name in loaded:
        assert loaded[name].to_list() == pq.read_table(tmp_path / "parquet" / f"{name}.parquet").to_pylist()


def test_a_comparison_exports_every_run_with_its_arm_and_seed(tmp_path):
    from genenv.compare import compare
    from genenv.export import export
    compare(tmp_path / "cmp", preset="smoke", curricula="genenv,random", seeds="0,1", overrides=["epochs=1"],
            log=lambda _: None)
    counts = export(tmp_path / "cmp", "parquet", tmp_path / "out")
    tasks = pq.read_table(tmp_path / "out" / "tasks.parquet").to_pylist()
    assert {(row["arm"], row["seed"]) for row in tasks} == {(a, s) for a in ("genenv", "random") for s in (0, 1)}
    verl = pq.read_table(tmp_path / "out" / "verl.parquet").to_pylist()
    assert len(verl) == counts["tasks"] and {row["extra_info"]["arm"] for row in verl} == {"genenv", "random"}


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "genenv.cli", *args], capture_output=True, text=True, timeout=300)


def test_export_cli_writes_a_new_folder_and_names_what_is_wrong(smoke_run, tmp_path):
    done = _cli("export", str(smoke_run), "--to", "parquet", str(tmp_path / "out"))
    assert done.returncode == 0 and "tasks" in done.stdout and (tmp_path / "out" / "verl.parquet").exists()
    again = _cli("export", str(smoke_run), "--to", "parquet", str(tmp_path / "out"))
    assert again.returncode == 2 and "already exists" in again.stderr
    elsewhere = _cli("export", str(tmp_path), "--to", "hf", str(tmp_path / "x"))
    assert elsewhere.returncode == 2 and "neither a run folder" in elsewhere.stderr and "Traceback" not in \
        elsewhere.stderr
    assert not (tmp_path / "x").exists()
    assert len(done.stdout.splitlines()) == 1


def test_a_finished_run_without_its_checkpoint_still_exports_its_pool_and_says_when_it_cannot(smoke_run, tmp_path):
    """Removing checkpoints/latest to free disk leaves the pool log: a finished run's last checkpoint covered all of
    it, so the same tasks export. With the pool log gone too the tasks table is empty and a note says why (it
    used to read as an empty pool)."""
    import shutil

    from genenv.export import export
    whole = export(smoke_run, "parquet", tmp_path / "whole")
    copy = tmp_path / "run"
    shutil.copytree(smoke_run, copy)
    shutil.rmtree(copy / "checkpoints" / "latest")
    notes: list[str] = []
    assert export(copy, "parquet", tmp_path / "no-latest", notes) == whole and notes == []
    assert pq.read_table(tmp_path / "no-latest" / "tasks.parquet").to_pylist() == \
        pq.read_table(tmp_path / "whole" / "tasks.parquet").to_pylist()
    shutil.rmtree(copy / "checkpoints")
    done = _cli("export", str(copy), "--to", "parquet", str(tmp_path / "no-pool"))
    assert done.returncode == 0 and done.stdout.startswith("tasks 0 rows, generations ")
    assert "note: " in done.stderr and "its pool log (checkpoints/task_pool.log.jsonl) was removed" in done.stderr

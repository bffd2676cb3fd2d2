"""Issue 43, item 1: trackers mirror the run; metrics.jsonl stays the record and a failing tracker never stops a
run."""

import sys
import types
from pathlib import Path

import pytest

from genenv.coevolve import run, run_summary
from genenv.config import ConfigError, load_config
from genenv.io import read_jsonl
from genenv.trackers import flatten, run_identity


def test_flatten_keeps_numeric_scalars_and_nests_mappings():
    row = {"epoch": 3, "valid": True, "p_hat_mean": 0.25, "heldout_by_level": {"1": 0.5, "2": None},
           "curriculum": "genenv", "p_hat_histogram": [1, 2], "agent_loss": None, "nan": float("nan")}
    assert flatten(row) == {"epoch": 3.0, "valid": 1.0, "p_hat_mean": 0.25, "heldout_by_level/1": 0.5}


def test_tracker_names_are_checked():
    assert load_config("smoke", ["trackers=tensorboard,wandb"]).trackers == ["tensorboard", "wandb"]
    with pytest.raises(ConfigError, match="trackers: 'mlflow' is not allowed"):
        load_config("smoke", ["trackers=[mlflow]"])


def test_tensorboard_events_read_back_as_the_metrics(tmp_path):
    event_accumulator = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    run_dir = run(load_config("smoke", ["trackers=[tensorboard]"]), tmp_path / "run", log=lambda _: None)
    events = event_accumulator.EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"scalars": 0})
    events.Reload()
    rows = read_jsonl(run_dir / "metrics.jsonl")
    expected = {}
    for row in rows:
        for key, value in flatten(row).items():
            expected.setdefault(key, []).append((row["epoch"], value))
    for key in ("p_hat_mean", "valid", "rollouts", "dev_success", "heldout_by_level/2", "agent_loss"):
        got = [(event.step, event.value) for event in events.Scalars(key)]
        assert [step for step, _ in got] == [step for step, _ in expected[key]], key
        assert [value for _, value in got] == pytest.approx([value for _, value in expected[key]], rel=1e-6), key
    assert set(events.Tags()["scalars"]) >= set(expected)
    final = events.Scalars("summary/final_heldout_success")
    assert [e.value for e in final] == pytest.approx([rows[-1]["heldout_success"]])


class _FakeRun:
    def __init__(self, calls, **kwargs):
        self.calls, self.summary = calls, {}
        calls.append(("init", kwargs))

    def log(self, values, step):
        self.calls.append(("log", step, values))

    def finish(self):
        self.calls.append(("finish",))


FAKE_WANDB = """
import json, os

def _record(*call):
    with open(os.environ["FAKE_WANDB_CALLS"], "a") as handle:
        handle.write(json.dumps(call) + "\\n")

class _Run:
    def __init__(self, **kwargs):
        self.summary = {}
        _record("init", {k: v for k, v in kwargs.items() if k != "config"}, kwargs["config"]["arm"])
    def log(self, values, step):
        _record("log", step, values)
    def finish(self):
        _record("finish")

def init(**kwargs):
    return _Run(**kwargs)
"""


def test_a_comparisons_runs_go_to_wandb_grouped_with_arm_and_seed(tmp_path, monkeypatch):
    """wandb's own calls (a stand-in package on the runs' path records them): one run per arm and seed, grouped
    under the comparison, offline unless WANDB_MODE says otherwise, every metrics row logged at its epoch."""
    import json
    import os

    from genenv.compare import compare
    (tmp_path / "fake" / "wandb").mkdir(parents=True)
    (tmp_path / "fake" / "wandb" / "__init__.py").write_text(FAKE_WANDB)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path / "fake"), os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("FAKE_WANDB_CALLS", str(tmp_path / "calls.jsonl"))
    monkeypatch.delenv("WANDB_MODE", raising=False)
    compare(tmp_path / "cmp", preset="smoke", curricula="genenv,random", seeds="1", overrides=["epochs=2",
            "trackers=[wandb]"], log=lambda _: None)
    calls = [json.loads(line) for line in (tmp_path / "calls.jsonl").read_text().splitlines()]
    inits = [(c[1], c[2]) for c in calls if c[0] == "init"]
    assert sorted(i["name"] for i, _ in inits) == ["genenv-seed0", "random-seed0"]
    assert {i["group"] for i, _ in inits} == {"cmp"} and all(i["mode"] == "offline" for i, _ in inits)
    assert {arm for _, arm in inits} == {"genenv", "random"} and inits[0][0]["project"] == "genenv"
    logged = [(c[1], c[2]) for c in calls if c[0] == "log"]
    rows = read_jsonl(tmp_path / "cmp" / "runs" / "genenv" / "seed0" / "metrics.jsonl") + \
        read_jsonl(tmp_path / "cmp" / "runs" / "random" / "seed0" / "metrics.jsonl")
    assert sorted((step, values["valid"]) for step, values in logged) == sorted((r["epoch"], r["valid"]) for r in rows)
    assert sum(c[0] == "finish" for c in calls) == 2


def test_a_tracker_that_fails_warns_once_and_the_run_goes_on(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)                 # not installed: ImportError
    broken = types.SimpleNamespace(init=lambda **kw: (_ for _ in ()).throw(RuntimeError("server down")),
                                   log=None, finish=None)
    monkeypatch.setitem(sys.modules, "trackio", broken)
    lines = []
    run_dir = run(load_config("smoke", ["trackers=wandb,trackio"]), tmp_path / "run", log=lines.append)
    warnings = [line for line in lines if line.startswith("warning: tracker")]
    assert len(warnings) == 2
    assert "tracker wandb failed to start" in warnings[0] and "pip install wandb" in warnings[0]
    assert "tracker trackio failed to start: server down; the run goes on without it" == warnings[1][9:]
    assert len(read_jsonl(run_dir / "metrics.jsonl")) == 3


def test_a_tracker_that_fails_mid_run_is_dropped(tmp_path, monkeypatch):
    calls = []

    class Flaky(_FakeRun):
        def log(self, values, step):
            raise ConnectionError("lost")
    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(init=lambda **kw: Flaky(calls, **kw)))
    lines = []
    run_dir = run(load_config("smoke", ["trackers=[wandb]"]), tmp_path / "run", log=lines.append)
    assert [line for line in lines if "tracker" in line] == [
        "warning: tracker wandb failed to log: lost; the run goes on without it"]
    assert len(read_jsonl(run_dir / "metrics.jsonl")) == 3 and ("finish",) not in calls


def test_run_identity_of_a_comparisons_run(tmp_path):
    (tmp_path / "cmp").mkdir()
    (tmp_path / "cmp" / "compare.json").write_text("{}")
    assert run_identity(tmp_path / "cmp" / "runs" / "static" / "seed3") == {
        "name": "static-seed3", "group": "cmp", "arm": "static", "tags": ["static", "seed3"]}
    assert run_identity(tmp_path / "solo")["group"] is None


@pytest.mark.slow
def test_real_wandb_offline_log_reads_back_as_the_metrics(tmp_path, monkeypatch):
    """The wandb package itself, offline (no account): the run's .wandb transaction log, read back by wandb's
    own reader (`wandb leet inspect --json`), holds one history record per metrics row with the same values, at
    the row's epoch, and the run's config."""
    pytest.importorskip("wandb", reason="wandb is an optional extra (pip install 'genenv-coevolve[wandb]')")
    import json
    import shutil
    import subprocess

    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    run_dir = run(load_config("smoke", ["epochs=2", "trackers=[wandb]"]), tmp_path / "run", log=lambda _: None)
    [log_file] = list((run_dir / "wandb").glob("offline-run-*/run-*.wandb"))
    wandb_cli = shutil.which("wandb", path=str(Path(sys.executable).parent))
    out = subprocess.run([wandb_cli, "leet", "inspect", "--json", str(log_file)], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    history = [r["history"]["item"] for r in records if r["type"] == "history"]
    rows = read_jsonl(run_dir / "metrics.jsonl")
    assert [h["_step"] for h in history] == [r["epoch"] for r in rows] == [0, 1]
    for item, row in zip(history, rows):
        for key in ("valid", "generated", "dev_success", "heldout_success", "p_hat_mean"):
            assert item[key] == pytest.approx(row[key]), key
    [config] = [r["run"]["config"]["update"] for r in records if r["type"] == "run"]
    assert config["curriculum"] == "genenv" and config["domain"]["options"]["width"] == 4


READ_TRACKIO = """
import json, sys
import trackio
from trackio.sqlite_storage import SQLiteStorage
[run] = trackio.Api().runs("genenv")
print(json.dumps({"name": run.name, "config": run.config, "logs": SQLiteStorage.get_logs("genenv", run.name)},
                 default=str))
"""


@pytest.mark.slow
def test_real_trackio_database_reads_back_as_the_metrics(tmp_path):
    """The trackio package itself, in its local database (TRACKIO_DIR, no Space, no server): the run logged
    and read back by trackio's own API gives the metrics rows at their epochs, the final summary, and the
    config. Run in subprocesses: trackio fixes its folder when imported."""
    pytest.importorskip("trackio", reason="trackio is an optional extra (pip install 'genenv-coevolve[trackio]')")
    import json
    import os
    import subprocess

    env = {**os.environ, "TRACKIO_DIR": str(tmp_path / "trackio")}
    genenv = Path(sys.executable).parent / "genenv"
    subprocess.run([str(genenv), "run", "--preset", "smoke", "--out", str(tmp_path / "run"), "epochs=2",
                    "trackers=[trackio]"], env=env, check=True, capture_output=True, timeout=600)
    read = subprocess.run([sys.executable, "-c", READ_TRACKIO], env=env, check=True, capture_output=True,
                          text=True, timeout=120)
    got = json.loads(read.stdout.strip().splitlines()[-1])
    rows = read_jsonl(tmp_path / "run" / "metrics.jsonl")
    epochs = [log for log in got["logs"] if "valid" in log]
    assert [log["step"] for log in epochs] == [r["epoch"] for r in rows] == [0, 1]
    for log, row in zip(epochs, rows):
        for key in ("valid", "generated", "dev_success", "heldout_success"):
            assert log[key] == pytest.approx(row[key]), key
    summary = run_summary(tmp_path / "run")
    [final] = [log for log in got["logs"] if "summary/final_heldout_success" in log]
    assert final["summary/final_heldout_success"] == pytest.approx(summary["final_heldout_success"])
    assert got["name"] == "run" and got["config"]["curriculum"] == "genenv"

"""Tiny end-to-end runs: the run folder, logged metrics, determinism, resume after SIGKILL, bad input."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from killing import kill_after_checkpoint

from genenv.coevolve import run
from genenv.config import load_config, tiny_model
from genenv.io import read_jsonl
from genenv.metrics import TIMING_KEYS

REQUIRED_KEYS = {"epoch", "generated", "valid", "invalid_rate", "p_hat_mean", "band_hit_rate", "r_env_mean",
                 "difficulty_mean", "heldout_success", "heldout_by_level", "heldout_reward_mean", "agent_loss",
                 "agent_kl",
                 "clip_fraction", "effective_fraction", "env_loss", "env_kl", "response_length_mean",
                 "seconds_by_phase", "generated_tokens_per_second", "p_hat_histogram", "train_success_by_level",
                 "env_kl_to_initial", "peak_rss_mb_by_phase"}


def _stable(rows):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("runs") / "smoke"
    run(load_config("smoke", ["threads=1"]), run_dir=out, log=lambda m: None)
    return out


def test_run_folder_contents(smoke_run):
    assert (smoke_run / "config.yaml").exists()
    rows = read_jsonl(smoke_run / "metrics.jsonl")
    assert [r["epoch"] for r in rows] == [0, 1, 2]
    for row in rows:
        assert REQUIRED_KEYS <= row.keys()
        assert row["generated"] == 8 and 0.0 <= row["invalid_rate"] <= 1.0
        if sys.platform == "linux":  # each phase's own peak resident memory, the checkpoint's too
            assert row["peak_rss_mb_by_phase"].keys() == row["seconds_by_phase"].keys()
            assert all(mb > 50 for mb in row["peak_rss_mb_by_phase"].values())  # torch alone holds more
    assert rows[-1]["heldout_by_level"] is not None and set(rows[-1]["heldout_by_level"]) == {"1", "2", "3", "4"}
    assert rows[-1]["rollouts"] > rows[0]["rollouts"] > 0
    # the smoke preset's wide band lets the simulator update: RWR and GRPO both ran and logged
    assert any(r["env_steps"] > 0 and r["env_loss"] is not None for r in rows)
    assert any(r["agent_updates"] > 0 and r["agent_loss"] is not None for r in rows)
    for epoch in range(3):
        samples = read_jsonl(smoke_run / "samples" / f"epoch_{epoch}.jsonl")
        assert len(samples) == 8
        for s in samples:
            assert s["valid"] or s["reason"]
            if s["valid"]:
                assert {"task", "answer", "p_hat", "r_env", "in_band", "rollouts"} <= s.keys()
    ckpt = smoke_run / "checkpoints" / "latest"
    assert json.loads((ckpt / "state.json").read_text())["epoch"] == 3
    assert (ckpt / "agent.safetensors").exists() and (ckpt / "env.safetensors").exists()
    from genenv.models.policy import Policy
    final = Policy.load(smoke_run / "final" / "agent")  # an ordinary HF folder with the trained weights
    trained = Policy.load(smoke_run / "checkpoints" / "initial" / "agent")
    trained.load_weights(ckpt / "agent.safetensors")
    for a, b in zip(final.model.state_dict().values(), trained.model.state_dict().values()):
        assert a.equal(b)
    assert (ckpt / "optimizers.safetensors").exists()
    warm = json.loads((smoke_run / "warmstart.json").read_text())
    assert "heldout_success" in warm


@pytest.mark.slow
def test_same_seed_same_metrics(smoke_run, tmp_path):
    again = run(load_config("smoke", ["threads=1"]), run_dir=tmp_path / "again", log=lambda m: None)
    assert _stable(read_jsonl(again / "metrics.jsonl")) == _stable(read_jsonl(smoke_run / "metrics.jsonl"))


def test_random_curriculum_never_updates_simulator(tmp_path, monkeypatch):
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    out = run(load_config("smoke", ["threads=1", "curriculum=random", "epochs=2"]), run_dir=tmp_path / "r",
              log=lambda m: None)
    assert all(r["env_steps"] == 0 for r in read_jsonl(out / "metrics.jsonl"))
    # a run's threads are torch's: the tokenizer's own pool is off unless the user set it
    assert os.environ["TOKENIZERS_PARALLELISM"] == "false"
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "true")
    run(load_config("smoke", ["threads=1", "curriculum=random", "epochs=1"]), run_dir=tmp_path / "r2",
        log=lambda m: None)
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true"


def test_epoch_with_nothing_valid_completes(tmp_path):
    # two tokens can never form a 4+4 digit task: every generation is rejected with a reason
    out = run(load_config("smoke", ["threads=1", "epochs=2", "env.max_new_tokens=2"]), run_dir=tmp_path / "bad",
              log=lambda m: None)
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["valid"] for r in rows] == [0, 0]
    assert all(r["invalid_rate"] == 1.0 and r["p_hat_mean"] is None and r["invalid_reasons"] for r in rows)
    assert all(not s["valid"] and s["reason"] for s in read_jsonl(out / "samples" / "epoch_1.jsonl"))


def _cli(*args):
    return [sys.executable, "-m", "genenv.cli", *args]


@pytest.mark.slow
def test_resume_after_sigkill_matches_uninterrupted(tmp_path):
    epochs = "epochs=8"
    reference = tmp_path / "reference"
    subprocess.run(_cli("run", "--preset", "smoke", "--out", str(reference), epochs, "threads=1"), check=True,
                   capture_output=True)
    killed = tmp_path / "killed"  # a checkpoint every epoch (the reference: only after its last)
    proc = subprocess.Popen(_cli("run", "--preset", "smoke", "--out", str(killed), epochs, "threads=1",
                                 "checkpoint_every_s=0"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    done_before = kill_after_checkpoint(proc, killed, 2)
    assert done_before < 8, "the run finished before it could be killed"
    subprocess.run(_cli("run", "--resume", str(killed)), check=True, capture_output=True)
    assert _stable(read_jsonl(killed / "metrics.jsonl")) == _stable(read_jsonl(reference / "metrics.jsonl"))


@pytest.mark.slow
def test_existing_run_is_not_overwritten(smoke_run):
    result = subprocess.run(_cli("run", "--preset", "smoke", "--out", str(smoke_run)), capture_output=True,
                            text=True)
    assert result.returncode == 2 and "--resume" in result.stderr


@pytest.mark.slow
def test_resume_restores_metrics_row_lost_after_checkpoint(smoke_run, tmp_path):
    """A kill between the checkpoint swap and the metrics append loses no row."""
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(smoke_run, copy)
    lines = (copy / "metrics.jsonl").read_text().splitlines(keepends=True)
    (copy / "metrics.jsonl").write_text("".join(lines[:-1]) + lines[-1][:10])  # last row lost, torn tail
    run(load_config("smoke", ["threads=1"]), run_dir=copy, resume=True, log=lambda m: None)
    assert _stable(read_jsonl(copy / "metrics.jsonl")) == _stable(read_jsonl(smoke_run / "metrics.jsonl"))


def test_checkpoints_follow_checkpoint_every_s_and_a_resume_repeats_the_epochs_after_the_last(tmp_path,
                                                                                                monkeypatch):
    """checkpoint_every_s=0 checkpoints every epoch; a long interval only before the first epoch and after the last.
    A run that dies between checkpoints drops the metrics rows after its last one and repeats those epochs: the
    same metrics as a run checkpointed every epoch."""
    from genenv import checkpoint, coevolve
    smoke = ["threads=1", "epochs=4"]
    saved = []

    def recording_job(players, state, run_dir, *args):
        saved.append((run_dir.name, state.epoch))
        return checkpoint_job(players, state, run_dir, *args)
    checkpoint_job = checkpoint._checkpoint_job   # every checkpoint: the first one's and the epochs'
    monkeypatch.setattr(checkpoint, "_checkpoint_job", recording_job)
    reference = run(load_config("smoke", [*smoke, "checkpoint_every_s=0"]), run_dir=tmp_path / "every",
                    log=lambda m: None)
    assert [e for name, e in saved if name == "every"] == [0, 1, 2, 3, 4]

    class Died(Exception):
        pass

    def dies_in_epoch_3(cfg, curriculum, domain, players, state, split, epoch, *args, **kwargs):
        if epoch == 3:
            raise Died
        return run_epoch(cfg, curriculum, domain, players, state, split, epoch, *args, **kwargs)
    run_epoch = coevolve.run_epoch
    monkeypatch.setattr(coevolve, "run_epoch", dies_in_epoch_3)
    rare = tmp_path / "rare"
    with pytest.raises(Died):
        run(load_config("smoke", [*smoke, "checkpoint_every_s=1e9"]), run_dir=rare, log=lambda m: None)
    assert [e for name, e in saved if name == "rare"] == [0]
    assert [r["epoch"] for r in read_jsonl(rare / "metrics.jsonl")] == [0, 1, 2]  # written, not checkpointed
    monkeypatch.setattr(coevolve, "run_epoch", run_epoch)
    run(load_config("smoke", [*smoke, "checkpoint_every_s=1e9"]), run_dir=rare, resume=True, log=lambda m: None)
    assert [e for name, e in saved if name == "rare"] == [0, 4]
    assert _stable(read_jsonl(rare / "metrics.jsonl")) == _stable(read_jsonl(reference / "metrics.jsonl"))


def test_a_checkpoint_written_in_the_background_holds_the_weights_of_its_epoch(tmp_path, monkeypatch):
    """The checkpoint writer runs beside the next epoch, which waits for it before its first update. Here the writer
    is held back until the epoch reaches that wait, so it writes while the epoch would be updating if it did not
    wait: every checkpoint still equals, file for file, the one the same run writes in place (a writer with
    ``background=False``), and so do the metrics."""
    import threading

    from genenv import checkpoint
    from genenv.models.policy import Policy
    epoch_waits = threading.Event()
    wait, save_weights, build_then_swap = (checkpoint.CheckpointWriter.wait, Policy.save_weights,
                                           checkpoint.build_then_swap)

    def signalling_wait(self):
        if self._thread is not None:
            epoch_waits.set()
        return wait(self)

    def held_back_save_weights(self, file):
        if threading.current_thread() is not threading.main_thread() and file.name == "agent.safetensors":
            assert epoch_waits.wait(timeout=60)
            epoch_waits.clear()
        save_weights(self, file)

    written = {}

    def recording_swap(target, write, **kwargs):
        build_then_swap(target, write, **kwargs)
        if target.name != "latest":   # the final export
            return
        state = json.loads((target / "state.json").read_text())
        state["last_metrics"] = _stable([state["last_metrics"]])[0] if state["last_metrics"] else None
        files = {p.name: p.read_bytes() for p in sorted(target.iterdir()) if p.name != "state.json"}
        written.setdefault(target.parent.parent.name, []).append((state, files))
    monkeypatch.setattr(checkpoint.CheckpointWriter, "wait", signalling_wait)
    monkeypatch.setattr(Policy, "save_weights", held_back_save_weights)
    monkeypatch.setattr(checkpoint, "build_then_swap", recording_swap)
    smoke = ["threads=1", "epochs=3", "checkpoint_every_s=0"]
    background = run(load_config("smoke", smoke), run_dir=tmp_path / "background", log=lambda m: None)
    writer_init = checkpoint.CheckpointWriter.__init__
    monkeypatch.setattr(checkpoint.CheckpointWriter, "__init__", lambda self: writer_init(self, background=False))
    in_place = run(load_config("smoke", smoke), run_dir=tmp_path / "in_place", log=lambda m: None)
    assert len(written["background"]) == 4 and written["background"] == written["in_place"]
    assert _stable(read_jsonl(background / "metrics.jsonl")) == _stable(read_jsonl(in_place / "metrics.jsonl"))
    waits = [r["seconds_by_phase"]["checkpoint_wait"] for r in read_jsonl(background / "metrics.jsonl")]
    assert len(waits) == 3


def test_an_error_writing_a_checkpoint_in_the_background_stops_the_run(tmp_path, monkeypatch):
    """A full disk in the writer thread is not lost: the epoch's wait raises it and the run stops, its last
    complete checkpoint intact."""
    from genenv.models.policy import Policy
    save_weights, calls = Policy.save_weights, []

    def fails_the_third_time(self, file):
        calls.append(file)
        if len(calls) == 5:   # the first checkpoint (2 files), the next, then the third's agent
            raise OSError(28, "No space left on device")
        save_weights(self, file)
    monkeypatch.setattr(Policy, "save_weights", fails_the_third_time)
    with pytest.raises(OSError, match="(?i)no space left"):
        run(load_config("smoke", ["threads=1", "epochs=3", "checkpoint_every_s=0"]), run_dir=tmp_path / "run",
            log=lambda m: None)
    state = json.loads((tmp_path / "run" / "checkpoints" / "latest" / "state.json").read_text())
    assert state["epoch"] == 1


def test_epoch_logs_reach_the_disk_before_the_checkpoint_that_covers_them(tmp_path, monkeypatch):
    """Metrics rows, samples files, pool logs and the new checkpoint's files are fsynced in one batch just
    before the checkpoint's swap (not every epoch), and the swap's folder after it: a checkpoint on disk never
    points past rows or pool events that a power cut could take."""
    from genenv import io
    run_dir = tmp_path / "run"
    events = []

    def latest_epoch():
        state = run_dir / "checkpoints" / "latest" / "state.json"
        return json.loads(state.read_text())["epoch"] if state.exists() else None

    def recording_sync(paths, include_parents=True):
        paths = list(paths)
        events.append((sorted(Path(p).name for p in paths), include_parents, latest_epoch()))
        sync(paths, include_parents)
    sync = io.fsync_paths
    monkeypatch.setattr(io, "fsync_paths", recording_sync)
    run(load_config("smoke", ["threads=1", "epochs=3", "checkpoint_every_s=1e9"]), run_dir=run_dir,
        log=lambda m: None)
    # the checkpoints' syncs (the final export's and any warm-start cache's come after or before them)
    events = [e for e in events if "state.json" in e[0] or e[0] == ["checkpoints"]]
    build = ["agent.safetensors", "env.safetensors", "env_pool.log.jsonl", "optimizers.safetensors",
             "state.json", "task_pool.log.jsonl"]
    assert events == [(build, True, None), (["checkpoints"], False, 0),
                      (sorted([*build, "epoch_0.jsonl", "epoch_1.jsonl", "epoch_2.jsonl", "metrics.jsonl"]), True, 0),
                      (["checkpoints"], False, 3)]


def test_build_then_swap_syncs_every_file_before_the_swap_and_the_folder_after(tmp_path, monkeypatch):
    """A swapped-in folder (a checkpoint, the final export, a published cache entry) never names files whose
    bytes are not on disk: nested files included, then the parent folder for the renames."""
    from genenv import io
    target = tmp_path / "final" / "agent"
    events, watched = [], [target]

    def recording_sync(paths, include_parents=True):
        events.append((sorted(str(Path(p).relative_to(tmp_path)) for p in paths), include_parents,
                       watched[0].exists()))
    monkeypatch.setattr(io, "fsync_paths", recording_sync)

    def write(build):
        (build / "sub").mkdir()
        (build / "config.json").write_text("{}")
        (build / "sub" / "weights.bin").write_text("w")
    (tmp_path / "rows.jsonl").write_text("{}\n")
    io.build_then_swap(target, write, sync_first=[tmp_path / "rows.jsonl"])
    assert (target / "sub" / "weights.bin").read_text() == "w"
    assert events == [(["final/.agent.build/config.json", "final/.agent.build/sub/weights.bin", "rows.jsonl"], True,
                        False), (["final"], False, True)]
    events.clear()
    cache = watched[0] = tmp_path / "cache" / "entry"
    io.publish_dir(cache, write)
    assert [(e[1], e[2]) for e in events] == [(True, False), (False, True)] and (cache / "config.json").exists()
    assert events[1][0] == ["cache"] and len(events[0][0]) == 2
    events.clear()
    io.publish_dir(cache, write)  # already published by someone else: theirs is kept, nothing to sync
    assert events == [] and not list((tmp_path / "cache").glob("*.build*"))


def test_publish_dir_keeps_the_folder_another_process_published_while_this_one_wrote(tmp_path, monkeypatch):
    """Two test workers (or compare's warm-start processes) convert the same model at once: the one whose rename
    comes second finds the folder there, keeps it and drops its own build, rather than failing."""
    from genenv import io
    target = tmp_path / "models" / "smollm2"

    def rival_publishes_during_sync(paths, include_parents=True):
        if not target.exists():
            target.mkdir(parents=True)
            (target / "config.json").write_text('{"rival": 1}')
    monkeypatch.setattr(io, "fsync_paths", rival_publishes_during_sync)
    io.publish_dir(target, lambda build: (build / "config.json").write_text('{"mine": 1}'))
    assert (target / "config.json").read_text() == '{"rival": 1}'
    assert not list(target.parent.glob("*.build*"))


def test_fsync_paths_syncs_files_and_their_folders_in_parallel(tmp_path, monkeypatch):
    from genenv import io
    files = [tmp_path / "a" / f"{i}.txt" for i in range(3)] + [tmp_path / "b.txt"]
    for path in files:
        path.parent.mkdir(exist_ok=True)
        path.write_text("x")
    io.fsync_paths(files)  # the real thing, on this file system
    synced = []
    monkeypatch.setattr(io, "_fsync", lambda path: synced.append(path))
    io.fsync_paths([*files, tmp_path / "missing.txt"])
    assert sorted(synced) == sorted([*files, tmp_path / "a", tmp_path])
    synced.clear()
    io.fsync_paths(files[:1], include_parents=False)
    assert synced == files[:1]
    with pytest.raises(FileNotFoundError):  # an error in a worker thread reaches the caller
        monkeypatch.setattr(io, "_fsync", lambda path: (_ for _ in ()).throw(FileNotFoundError(path)))
        io.fsync_paths(files)


@pytest.mark.slow
def test_lora_players_train_adapters_and_resume_exactly(tmp_path, monkeypatch):
    """lora_rank > 0: only adapters train, the export is an ordinary merged folder, a resumed run matches
    (the first run trains its warm start, the second loads it from the cache: the adapters' initialisation
    must not depend on which)."""
    pytest.importorskip("peft", reason="peft is not installed (pip install peft==0.21.2)")
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    from genenv.models.policy import Policy
    lora = ["threads=1", "agent.lora_rank=4", "env.lora_rank=4"]
    whole = run(load_config("smoke", [*lora, "epochs=2"]), run_dir=tmp_path / "whole", log=lambda m: None)
    rows = read_jsonl(whole / "metrics.jsonl")
    assert sum(r["agent_updates"] for r in rows) > 0 and sum(r["env_steps"] for r in rows) > 0
    first = run(load_config("smoke", [*lora, "epochs=1"]), run_dir=tmp_path / "split", log=lambda m: None)
    resumed = run(load_config("smoke", [*lora, "epochs=2"]), run_dir=first, resume=True, log=lambda m: None)
    assert _stable(read_jsonl(resumed / "metrics.jsonl")) == _stable(rows)
    final = Policy.load(whole / "final" / "agent")
    initial = Policy.load(whole / "checkpoints" / "initial" / "agent")
    assert not final.has_lora and final.num_parameters() == initial.num_parameters()
    changed = [not a.equal(b) for a, b in zip(final.model.state_dict().values(), initial.model.state_dict().values())]
    assert any(changed)
    adapted = Policy.load(whole / "checkpoints" / "initial" / "agent")
    adapted.apply_lora(4)
    assert adapted.num_trainable_parameters() < 0.5 * adapted.num_parameters()


def test_warm_start_cache_key_follows_the_tiny_tokenizer():
    """A tiny model's cached warm start is keyed by its tokenizer: other words (or alphabet) train a new one;
    a model folder path is keyed without it."""
    from genenv.domains import make_domain
    from genenv.warmstart import _cache_key
    cfg = load_config("household-smoke")
    domain = make_domain("household", **cfg.domain.options)
    key = _cache_key("agent", cfg, cfg.agent, domain)
    assert key == _cache_key("agent", cfg, cfg.agent, make_domain("household", **cfg.domain.options))
    domain.tiny_words = domain.tiny_words[:-1]
    assert _cache_key("agent", cfg, cfg.agent, domain) != key
    real = load_config("household-smoke", ["agent.model=/some/folder"])
    assert _cache_key("agent", real, real.agent, domain) == _cache_key("agent", real, real.agent, make_domain(
        "household", **cfg.domain.options))


@pytest.mark.slow
def test_progress_is_plain_lines_when_not_a_terminal(tmp_path):
    """`make run > log 2>&1` got hundreds of carriage-return refreshes; off a terminal, progress is plain lines."""
    env = {**os.environ, "GENENV_CACHE": str(tmp_path / "cache")}  # a warm start to show progress of
    result = subprocess.run(_cli("run", "--preset", "smoke", "--out", str(tmp_path / "r"), "epochs=2", "threads=1",
                                 "progress=true"), capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    assert "\r" not in output
    lines = output.splitlines()
    assert any(line.startswith("warm start: agent: 150/150 (100%)") for line in lines)
    assert any(line.startswith("epochs: 2/2 (100%)") for line in lines)
    assert sum(line.startswith("epoch ") for line in lines) == 2  # the per-epoch summary lines


def test_plain_progress_prints_every_interval():
    import io

    from genenv.progress import PlainProgress
    stream = io.StringIO()
    bar = PlainProgress(4, "steps", interval=0.0, stream=stream)
    for _ in range(4):
        bar.update()
    bar.close()
    assert stream.getvalue().splitlines()[:2] == ["steps: 1/4 (25%), 0 s, ~0 s left",
                                                  "steps: 2/4 (50%), 0 s, ~0 s left"]
    assert stream.getvalue().splitlines()[-1] == "steps: 4/4 (100%), 0 s"


def test_a_warm_start_shows_progress_every_30_s_even_with_progress_off(monkeypatch, tmp_path, capsys):
    """progress: false (smoke) still prints a line every 30 s of a long warm start (a real model's took minutes with
    nothing on the console), and none for a short one."""
    from genenv import progress
    from genenv.domains import make_domain
    from genenv.warmstart import warm_start_agent
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    cfg = load_config("smoke", ["threads=1", "agent.warmstart.steps=6"])
    assert cfg.progress is False
    domain = make_domain(cfg.domain.name, **cfg.domain.options)
    ticks = iter(range(0, 10_000, 31))   # every reading of the clock 31 s after the last: a long warm start
    monkeypatch.setattr(progress.time, "monotonic", lambda: float(next(ticks)))
    warm_start_agent(cfg, domain, log=lambda m: None)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warm start: agent: ")]
    assert [line.split(",")[0] for line in lines] == [f"warm start: agent: {n}/6 (" + f"{100 * n / 6:.0f}%)"
                                                      for n in range(1, 7)] + ["warm start: agent: 6/6 (100%)"]
    monkeypatch.setattr(progress.time, "monotonic", lambda: 0.0)   # a short one: no line
    warm_start_agent(load_config("smoke", ["threads=1", "agent.warmstart.steps=5"]), domain, log=lambda m: None)
    assert "warm start" not in capsys.readouterr().out


def test_skipped_steps_count_as_done_but_not_in_the_time_left(monkeypatch):
    """A resumed warm start skips the steps it had done: shown as done, and the time left comes from the steps
    done since (2 steps in 10 s, 6 left: ~30 s; counting the 2 skipped ones would say ~15 s)."""
    import io

    from genenv import progress
    clock = iter([0.0, 10.0, 10.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    stream = io.StringIO()
    bar = progress.PlainProgress(10, "steps", interval=5.0, stream=stream)
    progress.skip(bar, 2)
    bar.update(2)
    assert stream.getvalue().splitlines() == ["steps: 4/10 (40%), 10 s, ~30 s left"]


@pytest.mark.slow
def test_resume_after_a_kill_between_the_checkpoint_renames_twice(tmp_path, monkeypatch):
    """Killed between the two renames of a checkpoint swap (latest -> latest.old done, build -> latest not), a
    run resumes from latest.old; its next checkpoints must keep the pool logs whole, so that a second kill and
    resume still match an uninterrupted run (the second resume failed with IndexError in TaskPool.apply)."""
    from genenv import io
    from genenv.io import atomic_replace_dir
    smoke = ["threads=1", "checkpoint_every_s=0"]
    reference = run(load_config("smoke", [*smoke, "epochs=4"]), run_dir=tmp_path / "reference", log=lambda m: None)

    class Killed(Exception):
        pass

    def killed_between_renames(build, target):
        if build.name == ".build-2":
            os.replace(target, target.with_name(target.name + ".old"))
            raise Killed
        atomic_replace_dir(build, target)

    killed = tmp_path / "killed"
    monkeypatch.setattr(io, "atomic_replace_dir", killed_between_renames)
    with pytest.raises(Killed):
        run(load_config("smoke", [*smoke, "epochs=4"]), run_dir=killed, log=lambda m: None)
    monkeypatch.undo()
    ckpts = killed / "checkpoints"
    assert not (ckpts / "latest").exists() and (ckpts / "latest.old").exists()
    run(load_config("smoke", [*smoke, "epochs=3"]), run_dir=killed, resume=True, log=lambda m: None)  # then "killed"
    assert json.loads((ckpts / "latest" / "state.json").read_text())["epoch"] == 3
    from genenv.run_config import run_config_dict
    assert run_config_dict(killed)["epochs"] == 3      # the config the run last ran under
    messages = []
    run(load_config("smoke", [*smoke, "epochs=4"]), run_dir=killed, resume=True, log=messages.append)
    assert "config changed on resume: epochs 3 -> 4" in messages
    assert run_config_dict(killed)["epochs"] == 4
    assert yaml.safe_load((killed / "config.yaml").read_text())["epochs"] == 4   # what it started with, untouched
    history = read_jsonl(killed / "config_changes.jsonl")
    assert [row["changes"] for row in history] == [{"epochs": [4, 3]}, {"epochs": [3, 4]}]
    assert _stable(read_jsonl(killed / "metrics.jsonl")) == _stable(read_jsonl(reference / "metrics.jsonl"))


def test_both_optimisers_take_their_weight_decay_from_the_config():
    from genenv.models.tiny import build_tiny_policy
    from genenv.players import make_players
    cfg = load_config("smoke", ["agent.weight_decay=0.02", "env.weight_decay=0.0"])
    agent = build_tiny_policy(tiny_model(cfg, cfg.agent), "0123456789+", seed=0)
    env = build_tiny_policy(tiny_model(cfg, cfg.env), "0123456789+", seed=1)
    players = make_players(cfg, agent, env)
    assert [g["weight_decay"] for g in players.agent_opt.param_groups] == [0.02]
    assert [g["weight_decay"] for g in players.env_opt.param_groups] == [0.0]
    assert load_config("smoke").env.weight_decay == 0.01  # the value every run so far used (torch's default)


@pytest.mark.parametrize("overrides,reason", [
    (["agent.temperature=0"], "no group of rollouts had mixed rewards"),   # greedy rollouts: identical groups
    (["agent.min_informative_groups=100000"], "fewer than agent.min_informative_groups=100000"),
])
def test_a_run_without_agent_updates_says_why(tmp_path, overrides, reason):
    messages = []
    run(load_config("smoke", ["threads=1", "epochs=10", "eval_every=10", *overrides]), run_dir=tmp_path / "r",
        log=messages.append)
    warnings = [m for m in messages if m.startswith("warning: no agent update in epochs 0-9")]
    assert len(warnings) == 1 and reason in warnings[0]


def test_stall_warning_needs_ten_idle_epochs():
    from genenv.metrics import stall_warning
    row = {"agent_updates": 0, "rollouts_this_epoch": 8, "effective_fraction": 0.0, "train_success_mean": 1.0,
           "buffered_groups": 0}
    rows = [{**row, "epoch": e} for e in range(10)]
    assert stall_warning(rows[:9], 16) is None
    assert "epochs 0-9" in stall_warning(rows, 16) and "80 rollouts" in stall_warning(rows, 16)
    assert stall_warning([*rows[:9], {**row, "epoch": 9, "agent_updates": 1}], 16) is None


def test_simulator_diagnostics_are_logged(smoke_run):
    """Per epoch: where the simulator's tasks sit (p_hat histogram of its valid tasks), the agent's success per
    level on its training rollouts (the frontier), the simulator's KL to its initial policy after updates."""
    from genenv.metrics import p_hat_histogram
    assert p_hat_histogram([0.0, 0.19, 0.2, 0.5, 0.99, 1.0, None]) == [2, 1, 1, 0, 2]
    for row in read_jsonl(smoke_run / "metrics.jsonl"):
        samples = read_jsonl(smoke_run / "samples" / f"epoch_{row['epoch']}.jsonl")
        assert row["p_hat_histogram"] == p_hat_histogram([s["p_hat_task"] for s in samples if s["valid"]])
        assert set(row["train_success_by_level"]) <= {"1", "2", "3", "4"}
        assert all(0.0 <= v <= 1.0 for v in row["train_success_by_level"].values())
        if row["env_steps"]:
            assert row["env_kl_to_initial"] > 0.0


def test_a_lora_players_reference_is_its_own_base_model_not_a_copy():
    """A LoRA player's KL reference is the same model with adapters off: no second copy of the weights, and
    after the adapters train it still gives the initial policy's log-probs (bit for bit: the same base modules
    run on the same inputs); a fully fine-tuned player keeps a frozen copy."""
    from genenv.models.tiny import build_tiny_policy
    from genenv.players import make_players
    cfg = load_config("smoke", ["agent.lora_rank=4"])
    agent = build_tiny_policy(tiny_model(cfg, cfg.agent), "0123456789+=", seed=0)
    env = build_tiny_policy(tiny_model(cfg, cfg.env), "0123456789+=", seed=1)
    initial = agent.frozen_copy()
    players = make_players(cfg, agent, env)
    assert players.agent_ref.model is players.agent.model and players.agent.has_lora
    assert players.env_ref.model is not players.env.model and not players.env.has_lora
    batch = agent.build_batch([[1, 5, 6, 7], [1, 7]], [[8, 2], [9, 10, 2]])
    for param in agent.trainable_parameters():  # as if the adapters had trained
        param.data.normal_(0.0, 0.5)
    with torch.no_grad():
        adapted = agent.token_logprobs(batch)[0]
        reference = players.agent_ref.token_logprobs(batch)[0]
        assert reference.equal(initial.token_logprobs(batch)[0])
    assert not torch.allclose(adapted, reference)


def test_eval_heldout_scores_a_model_exactly_as_the_run_did(smoke_run, tmp_path, capsys):
    """`genenv eval --benchmark heldout --run DIR --model M`: the run's own sets and verdicts, for any model: its
    warm-started agent scores what warmstart.json says, its final agent what the last evaluation logged."""
    from genenv.cli import main
    last = read_jsonl(smoke_run / "metrics.jsonl")[-1]
    warm = json.loads((smoke_run / "warmstart.json").read_text())
    for model, expected in ((smoke_run / "final" / "agent", last),
                            (smoke_run / "checkpoints" / "initial" / "agent", warm)):
        out = tmp_path / model.parent.name
        assert main(["eval", "--benchmark", "heldout", "--run", str(smoke_run), "--model", str(model),
                     "--threads", "1", "--out", str(out)]) == 0
        scores = json.loads((out / "scores.json").read_text())
        for key in ("heldout_success", "heldout_by_level", "dev_success", "dev_by_level"):
            assert scores[key] == expected[key], (model, key)
        rows = read_jsonl(out / "results.jsonl")
        assert len(rows) == scores["dev_tasks"] + scores["heldout_tasks"] > 0
        heldout = [r["success"] for r in rows if r["set"] == "heldout"]
        assert sum(heldout) / len(heldout) == pytest.approx(scores["heldout_success"])
        assert all(r["actions"] and isinstance(r["reward"], float) for r in rows)
    assert "held-out success" in capsys.readouterr().out


def test_a_benchmark_eval_records_the_sampler_auto_chose(smoke_run, tmp_path, capsys):
    """`genenv eval` decodes with --sampler auto unless told: a model llama.cpp cannot decode (a run's weights) goes
    to transformers, said on the terminal and kept in scores.json beside the scores."""
    from genenv.cli import main
    fixture = Path(__file__).parent / "data" / "bamboogle"
    assert main(["eval", "--benchmark", "bamboogle", "--model", str(smoke_run / "final" / "agent"), "--data",
                 str(fixture), "--max-new-tokens", "4", "--threads", "1", "--out", str(tmp_path)]) == 0
    scores = json.loads((tmp_path / "scores.json").read_text())
    assert scores["sampler"] == "transformers" and scores["sampler_dtype"] is None and scores["questions"] > 0
    assert "sampler: transformers (--sampler auto" in capsys.readouterr().out


def test_eval_heldout_rejects_what_it_cannot_use(tmp_path, capsys):
    from genenv.cli import main
    with pytest.raises(SystemExit) as stopped:   # heldout's options are heldout's alone
        main(["eval", "--benchmark", "bamboogle", "--preset", "smoke", "--model", "x"])
    assert stopped.value.code == 2 and "unrecognized arguments: --preset" in capsys.readouterr().err
    assert main(["eval", "--benchmark", "heldout", "--run", str(tmp_path), "--model", "x"]) == 2
    assert "config.yaml: no such config file" in capsys.readouterr().err
    assert main(["eval", "--benchmark", "heldout", "--preset", "smoke", "--model", "x", "agent.lr=abc"]) == 2
    assert "agent.lr" in capsys.readouterr().err


def test_plain_progress_names_the_phase_a_long_step_is_in(monkeypatch):
    """A SmolLM2 epoch can run for many minutes: a phase that starts an interval or more after the last line gets a
    line naming it; one that starts sooner does not; the step's end clears it."""
    import io

    from genenv import progress
    clock = iter([0.0, 40.0, 50.0, 100.0, 130.0])
    monkeypatch.setattr(progress.time, "monotonic", lambda: next(clock))
    stream = io.StringIO()
    bar = progress.PlainProgress(10, "epochs", interval=30.0, stream=stream)
    bar.set_postfix_str("generate")        # 40 s after the start: a line
    bar.set_postfix_str("rollout")         # 10 s later: none
    bar.set_postfix_str("agent_update")    # 50 s later: a line
    bar.update()                           # 30 s later: a line, no phase
    assert stream.getvalue().splitlines() == ["epochs: 0/10 (0%), 40 s [generate]",
                                              "epochs: 0/10 (0%), 100 s [agent_update]",
                                              "epochs: 1/10 (10%), 130 s, ~1170 s left"]


def test_run_outputs_follow_the_umask_not_0600(tmp_path):
    """Issue 39: atomic writes made config.yaml, summary files, samples, checkpoints 0600 under umask 022, so
    collaborators could not read a run. Every file of a run and its report is group- and world-readable."""
    import stat
    import subprocess
    import sys
    out = tmp_path / "shared-run"
    for args in (["run", "--preset", "smoke", "--out", str(out), "threads=1", "epochs=1"], ["report", str(out)]):
        done = subprocess.run([sys.executable, "-m", "genenv.cli", *args], capture_output=True, text=True,
                              preexec_fn=lambda: os.umask(0o022), timeout=600)
        assert done.returncode == 0, done.stderr
    files = [p for p in out.rglob("*") if p.is_file()]
    assert len(files) > 10 and (out / "config.yaml") in files and (out / "report.html") in files
    unreadable = [str(p.relative_to(out)) for p in files if stat.S_IMODE(p.stat().st_mode) & 0o044 != 0o044]
    assert not unreadable


def test_a_resume_refuses_what_would_change_the_runs_meaning(smoke_run, tmp_path, capsys):
    """Issue 39: `--resume RUN curriculum=random` ran the rest as random and rewrote config.yaml to say so. Now a
    resume may change only epochs, the cadences, threads, progress and the engine; anything else exits 2 naming
    the field, and config.yaml is never rewritten (accepted changes go to config_changes.jsonl)."""
    import shutil

    from genenv.cli import main
    run_dir = tmp_path / "copy"
    shutil.copytree(smoke_run, run_dir)
    before = (run_dir / "config.yaml").read_text()
    refused = (("curriculum=random", "curriculum"), ("seed=9", "seed"), ("env.pg.gate=levels", "env.pg.gate"),
               ("tiny.hidden_size=64", "tiny.hidden_size"))
    for override, field in refused:
        assert main(["run", "--resume", str(run_dir), override]) == 2
        err = capsys.readouterr().err
        assert f"{field}: a resume cannot change it" in err and "Start a new run" in err
    assert (run_dir / "config.yaml").read_text() == before and not (run_dir / "config_changes.jsonl").exists()
    assert main(["run", "--resume", str(run_dir), "epochs=4", "eval_every=2", "progress=false"]) == 0
    assert (run_dir / "config.yaml").read_text() == before
    assert read_jsonl(run_dir / "config_changes.jsonl")[0]["changes"] == {"epochs": [3, 4], "eval_every": [1, 2]}
    assert len(read_jsonl(run_dir / "metrics.jsonl")) == 4


def test_a_run_piped_into_head_stops_quietly_and_its_epoch_lines_fit_100_columns(tmp_path):
    """Issue 39: `genenv run ... | head` ended with a BrokenPipeError traceback; epoch lines were 147 characters."""
    import subprocess
    import sys
    out = tmp_path / "piped"
    command = (f"{sys.executable} -m genenv.cli run --preset smoke --out {out} threads=1 epochs=2 2>{tmp_path}/err | "
               "head -c 1")
    subprocess.run(["bash", "-c", command], timeout=600)
    assert "Traceback" not in (tmp_path / "err").read_text()
    full = subprocess.run([sys.executable, "-m", "genenv.cli", "run", "--preset", "smoke", "--out",
                           str(tmp_path / "whole"), "threads=1", "epochs=2"], capture_output=True, text=True,
                          timeout=600)
    lines = [line for line in full.stdout.splitlines() if line.startswith("epoch ")]
    assert len(lines) == 2 and all(len(line) <= 100 for line in lines) and "held-out" in lines[-1]


def test_a_run_records_its_code_and_a_resume_with_other_code_says_so(smoke_run, tmp_path, monkeypatch):
    """code.json holds the code that started the run; a resume with other code logs which keys changed and appends
    them to code_changes.jsonl (the epochs after it need not equal an uninterrupted run's); the same code resumes
    silently, and a second resume with the new code finds nothing new."""
    import shutil

    from genenv import provenance
    recorded = json.loads((smoke_run / "code.json").read_text())
    assert recorded["source"] == provenance.source_fingerprint() and recorded["torch"] == torch.__version__
    run_dir = tmp_path / "copy"
    shutil.copytree(smoke_run, run_dir)
    messages = []
    run(load_config("smoke", ["threads=1", "epochs=4"]), run_dir=run_dir, resume=True, log=messages.append)
    assert not (run_dir / "code_changes.jsonl").exists() and not any("other code" in m for m in messages)

    edited = {**provenance.code_version(), "source": "0123456789abcdef"}
    edited["files"] = {**edited["files"], "reward.py": "0" * 12}   # one package file edited
    monkeypatch.setattr(provenance, "code_version", lambda: edited)
    messages = []
    run(load_config("smoke", ["threads=1", "epochs=5"]), run_dir=run_dir, resume=True, log=messages.append)
    warning = [m for m in messages if "other code" in m]
    assert len(warning) == 1 and f"source {recorded['source']!r} -> '0123456789abcdef'" in warning[0]
    assert "files that differ: reward.py)" in warning[0]
    history = read_jsonl(run_dir / "code_changes.jsonl")
    assert history[0]["resumed_at_epoch"] == 4 and history[0]["changes"] == {
        "source": [recorded["source"], "0123456789abcdef"]}
    assert history[0]["files_that_differ"] == ["reward.py"] and history[0]["files"] == edited["files"]
    assert provenance.last_code(run_dir)["files"] == edited["files"]   # the files that last ran it
    run(load_config("smoke", ["threads=1", "epochs=6"]), run_dir=run_dir, resume=True, log=messages.append)
    assert len(read_jsonl(run_dir / "code_changes.jsonl")) == 1   # the code that last ran it is the new one
    assert json.loads((run_dir / "code.json").read_text()) == recorded   # what started the run is kept


def test_a_resume_from_another_commit_with_the_same_source_is_a_note_not_a_warning(smoke_run, tmp_path, monkeypatch):
    """Another git commit whose package source and libraries are the same (a docs-only commit) cannot change the
    arithmetic: the resume records it and says so as a note, without the warning that the epochs may differ."""
    import shutil

    from genenv import provenance
    run_dir = tmp_path / "copy"
    shutil.copytree(smoke_run, run_dir)
    moved = {**provenance.code_version(), "git": {"commit": "f" * 40, "dirty": False}}
    monkeypatch.setattr(provenance, "code_version", lambda: moved)
    messages = []
    run(load_config("smoke", ["threads=1", "epochs=4"]), run_dir=run_dir, resume=True, log=messages.append)
    assert not any("other code" in m or m.startswith("warning") for m in messages)
    note = [m for m in messages if "another git state" in m]
    assert len(note) == 1 and f"same package source (fingerprint {moved['source']})" in note[0]
    assert list(read_jsonl(run_dir / "code_changes.jsonl")[0]["changes"]) == ["git"]

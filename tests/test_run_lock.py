"""One process writes a run folder (or runs a comparison folder) at a time: a second one stops at once, naming
the first, instead of interleaving one run's checkpoints and metrics with another's."""
import subprocess
import sys

import pytest

from genenv.checkpoint import LOCK_FILE, RunInUse, run_in_use, run_lock
from genenv.cli import main


def test_a_second_holder_is_refused_with_the_first_ones_name_and_the_lock_returns_after(tmp_path):
    with run_lock(tmp_path / "run"):
        assert "genenv pid" in (tmp_path / "run" / LOCK_FILE).read_text()
        with pytest.raises(RunInUse, match=r"run is in use by genenv pid \d+ on .* \(running it\)"):
            with run_lock(tmp_path / "run", "pruning it"):
                pass
        assert run_in_use(tmp_path / "run").startswith(f"{tmp_path / 'run'} is in use by genenv pid")
    assert run_in_use(tmp_path / "run") is None
    with run_lock(tmp_path / "run"):   # free again
        pass
    assert run_in_use(tmp_path / "never") is None and not (tmp_path / "never").exists()


def test_a_killed_holder_leaves_no_stale_lock(tmp_path):
    """The kernel drops a flock when its process dies, kill -9 included: nothing to clean up by hand."""
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys, time; from genenv.checkpoint import run_lock\n"
        f"with run_lock({str(tmp_path)!r}):\n    print('held', flush=True); time.sleep(120)")],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert f"pid {holder.pid}" in run_in_use(tmp_path)
        holder.kill()
        holder.wait(timeout=30)
        assert run_in_use(tmp_path) is None
    finally:
        holder.kill()
        holder.stdout.close()


@pytest.mark.slow
def test_a_resume_a_comparison_and_a_prune_each_stop_on_a_folder_in_use(tmp_path, capsys):
    from genenv.compare import Arm, compare, run_dir_of
    from genenv.config import ConfigError
    from genenv.io import read_jsonl
    compare(tmp_path, preset="smoke", curricula="static", seeds="1", overrides=["epochs=1"], log=lambda m: None)
    run_dir = run_dir_of(tmp_path, Arm("static", ()), 0)
    metrics = (run_dir / "metrics.jsonl").read_text()
    capsys.readouterr()
    with run_lock(run_dir):   # as a `genenv run --resume` in another terminal would
        assert main(["run", "--resume", str(run_dir), "epochs=2"]) == 2
        assert "is in use by genenv pid" in capsys.readouterr().err
        with pytest.raises(ConfigError, match=r"static seed 0: .* is in use .*running elsewhere"):
            compare(tmp_path, preset="smoke", curricula="static", seeds="1", overrides=["epochs=2"],
                    log=lambda m: None)
        assert main(["prune", str(tmp_path), "--yes"]) == 0
        assert "kept: " in capsys.readouterr().out and (run_dir / "checkpoints" / "latest").exists()
    with run_lock(tmp_path, "comparing it"):   # the same comparison started twice
        with pytest.raises(RunInUse, match=r"comparing it"):
            compare(tmp_path, preset="smoke", curricula="static", seeds="1", overrides=["epochs=2"],
                    log=lambda m: None)
        assert main(["prune", str(run_dir), "--yes"]) == 0
        assert "(comparing it)" in capsys.readouterr().out and (run_dir / "checkpoints" / "latest").exists()
        from genenv.checkpoint import prune_run
        with pytest.raises(RunInUse, match="comparing it"):   # the function checks too, under the run's lock
            prune_run(run_dir)
        assert (run_dir / "checkpoints" / "latest").exists()
    assert (run_dir / "metrics.jsonl").read_text() == metrics
    compare(tmp_path, preset="smoke", curricula="static", seeds="1", overrides=["epochs=2"], log=lambda m: None)
    assert len(read_jsonl(run_dir / "metrics.jsonl")) == 2      # and once free, the extension runs

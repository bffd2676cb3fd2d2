"""`genenv prune`: a finished run's checkpoint states go (a SmolLM2 run holds 5 GB), what reports and exports
read stays, and nothing unfinished is touched."""
import shutil

import pytest

from genenv.checkpoint import has_checkpoint, prunable, prune_run, run_finished
from genenv.cli import main
from genenv.config import ConfigError
from genenv.io import read_jsonl


@pytest.fixture
def comparison_like(tmp_path):
    """A comparison folder with a finished run and one killed after its last checkpoint (no final players)."""
    from genenv.coevolve import run
    from genenv.config import load_config
    finished = run(load_config("smoke", ["epochs=1", "progress=false"]), tmp_path / "runs" / "static" / "seed0",
                   log=lambda _: None)
    killed = tmp_path / "runs" / "static" / "seed1"
    shutil.copytree(finished, killed)
    shutil.rmtree(killed / "final")
    return tmp_path, finished, killed


def test_prune_is_a_dry_run_until_told_and_then_keeps_what_reports_and_exports_read(comparison_like, capsys):
    root, finished, killed = comparison_like
    sizes = prunable(finished)
    assert set(sizes) == {"latest", "initial"} and all(size > 0 for size in sizes.values())
    assert run_finished(finished) and not run_finished(killed)

    assert main(["prune", str(root)]) == 0
    out = capsys.readouterr().out
    assert f"{finished}: finished, would remove checkpoints/{{latest,initial}}" in out
    assert f"{killed}: not finished: kept" in out and "a dry run: add --yes" in out
    assert has_checkpoint(finished) and (finished / "checkpoints" / "initial").exists()

    pool_log = (finished / "checkpoints" / "task_pool.log.jsonl").read_text()
    metrics = (finished / "metrics.jsonl").read_text()
    assert main(["prune", str(root), "--yes"]) == 0
    out = capsys.readouterr().out
    assert f"freed {sum(sizes.values()) / 1e9:.2f} GB" in out
    assert not has_checkpoint(finished) and not (finished / "checkpoints" / "initial").exists()
    assert (finished / "checkpoints" / "task_pool.log.jsonl").read_text() == pool_log
    assert (finished / "metrics.jsonl").read_text() == metrics and (finished / "final" / "agent").exists()
    assert has_checkpoint(killed) and (killed / "checkpoints" / "initial").exists()   # it can still resume
    assert prunable(finished) == {} and main(["prune", str(finished)]) == 0
    assert "finished, nothing to prune" in capsys.readouterr().out

    # what a pruned run can no longer do is refused, naming it; its metrics are untouched
    assert main(["run", "--resume", str(finished), "epochs=2"]) == 2
    assert "holds 1 epochs of metrics but no checkpoint" in capsys.readouterr().err
    assert (finished / "metrics.jsonl").read_text() == metrics
    with pytest.raises(ConfigError, match="not a finished run"):
        prune_run(killed)


def test_a_prune_stopped_midway_leaves_whole_checkpoints_or_none_and_a_later_one_finishes(comparison_like):
    _, finished, _ = comparison_like
    root = finished / "checkpoints"
    (root / "latest").rename(root / ".latest.pruning")     # stopped after its first rename
    assert not has_checkpoint(finished) and set(prunable(finished)) == {"initial", ".latest.pruning"}
    assert prune_run(finished) > 0
    assert sorted(p.name for p in root.iterdir()) == ["env_pool.log.jsonl", "task_pool.log.jsonl"]
    assert len(read_jsonl(finished / "metrics.jsonl")) == 1


def test_prune_names_a_folder_that_holds_no_run(tmp_path, capsys):
    assert main(["prune", str(tmp_path)]) == 2
    assert "neither a run folder" in capsys.readouterr().err

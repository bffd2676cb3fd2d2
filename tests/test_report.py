"""genenv compare (resumable), the summary numbers and the HTML report."""

import base64
import html
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from genenv.analysis import RunRecord, area_under_curve, rollouts_to_reach, summarize
from genenv.cli import main
from genenv.compare import Arm, compare, parse_arms, parse_extra_arm, parse_seeds, report_comparison, run_dir_of
from genenv.config import ConfigError, load_config
from genenv.io import read_jsonl
from genenv.report import PLOTS, report_run, smooth

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _record(label, seed, finals, warm=0.1):
    rows = [{"epoch": i, "rollouts": 100 * (i + 1), "heldout_success": v, "heldout_by_level": {"1": v},
             "task_pool_size": 10, "total_agent_updates": i, "p_hat_mean": 0.5, "band_hit_rate": 1.0}
            for i, v in enumerate(finals)]
    return RunRecord(Path("."), label, seed, {"epochs": len(finals)}, rows, {"heldout_success": warm})


def test_rollouts_to_reach_and_auc_hand_values():
    record = _record("a", 0, [0.2, 0.4, 0.3])
    assert rollouts_to_reach(record, 0.35) == 200
    assert rollouts_to_reach(record, 0.1) == 0  # the warm-started agent already had it
    assert rollouts_to_reach(record, 0.5) is None
    # curve (0, .1) (100, .2) (200, .4) (300, .3): trapezoids 15 + 30 + 35 = 80 over 300 rollouts
    assert area_under_curve(record) == pytest.approx(80 / 300)


def test_summarize_means_stds_and_target():
    groups = {"genenv": [_record("genenv", 0, [0.3, 0.5]), _record("genenv", 1, [0.3, 0.3])],
              "static": [_record("static", 0, [0.2, 0.4]), _record("static", 1, [0.1, 0.2])]}
    summary = summarize(groups)
    assert summary["target_success"] == pytest.approx(0.4)  # genenv's mean final
    g, s = summary["curricula"]["genenv"], summary["curricula"]["static"]
    assert g["heldout_final"]["mean"] == pytest.approx(0.4)
    assert g["heldout_final"]["std"] == pytest.approx(np.std([0.5, 0.3], ddof=1))
    assert g["heldout_final"]["per_seed"] == [0.5, 0.3]
    assert g["rollouts_to_target"] == {"per_seed": [200, None], "reached": 1, "of": 2, "mean_where_reached": 200}
    assert s["rollouts_to_target"]["per_seed"] == [200, None]
    assert s["heldout_by_level"] == {"1": pytest.approx(0.3)}


def test_smooth_is_a_trailing_mean():
    np.testing.assert_allclose(smooth(np.array([1.0, 3.0, 5.0, 7.0]), 2), [1, 2, 4, 6])


def test_parse_arms_and_seeds():
    arms = parse_arms("genenv,offline,learnability", "1.8,3.3")
    assert [a.label for a in arms] == ["genenv", "offline-1.8x", "offline-3.3x", "learnability"]
    assert arms[2].overrides == ("curriculum=offline", "baseline.offline_multiplier=3.3")
    assert parse_seeds("3") == [0, 1, 2] and parse_seeds("0,4") == [0, 4]
    with pytest.raises(ConfigError, match="--curricula"):
        parse_arms("genenv,bogus")
    with pytest.raises(ConfigError, match="--seeds"):
        parse_seeds("x")


def test_parse_extra_arm():
    arm = parse_extra_arm("genenv-pg:curriculum=genenv env.update=pg")
    assert arm == Arm("genenv-pg", ("curriculum=genenv", "env.update=pg"))
    for bad in ("genenv-pg", "x:", ":curriculum=genenv", "a/b:seed=1", "x:notanoverride"):
        with pytest.raises(ConfigError, match="--arm"):
            parse_extra_arm(bad)


def test_compare_cli_bad_arm_or_reference_exits_2(capsys, tmp_path):
    assert main(["compare", "--preset", "smoke", "--arm", "pg:env.update=pg", "--arm", "pg:env.update=rwr",
                 "--out", str(tmp_path)]) == 2
    assert "each label once" in capsys.readouterr().err
    assert main(["compare", "--preset", "smoke", "--curricula", "genenv", "--reference", "oracle",
                 "--out", str(tmp_path)]) == 2
    assert "--reference" in capsys.readouterr().err


def test_compare_cli_bad_curriculum_exits_2(capsys, tmp_path):
    assert main(["compare", "--preset", "smoke", "--curricula", "genenv,nope", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--curricula" in err[0]


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    out = tmp_path_factory.mktemp("compare")
    logs = []
    summary = compare(out, preset="smoke", curricula="genenv,static", seeds="2", overrides=["epochs=2"],
                      log=logs.append)
    return out, summary, logs


@pytest.mark.slow
def test_compare_runs_every_pair_and_summarises(comparison):
    out, summary, logs = comparison
    assert set(summary["curricula"]) == {"genenv", "static"}
    for label in ("genenv", "static"):
        s = summary["curricula"][label]
        assert s["seeds"] == [0, 1] and s["epochs"] == [2, 2]
        finals = [read_jsonl(out / "runs" / label / f"seed{k}" / "metrics.jsonl")[-1]["heldout_success"]
                  for k in (0, 1)]
        assert s["heldout_final"]["per_seed"] == finals
        assert s["rollouts"]["mean"] == 2 * 48
    assert json.loads((out / "summary.json").read_text())["curricula"].keys() == summary["curricula"].keys()
    assert sum("[start]" in line for line in logs) == 4
    assert "4 runs: 0 finished, 0 to resume, 4 new; 8 of 8 epochs to go" in logs
    from genenv.provenance import source_fingerprint
    assert summary["code"] == {"sources": {source_fingerprint(): ["genenv/seed0", "genenv/seed1", "static/seed0",
                                                                  "static/seed1"]},
                               "unrecorded": [], "resumed_with_other_code": []}
    assert f"Every run was made by the same code (source fingerprint {source_fingerprint()})" in (
        out / "report.html").read_text()


@pytest.mark.slow
def test_compare_skips_finished_pairs_and_resumes_unfinished(comparison):
    out, _, _ = comparison
    finished = run_dir_of(out, Arm("genenv", ()), 0)
    before = (finished / "metrics.jsonl").read_text()
    stamp = (finished / "metrics.jsonl").stat().st_mtime_ns
    unfinished = run_dir_of(out, Arm("static", ()), 1)
    import shutil
    shutil.rmtree(unfinished / "final")  # as if killed after its last checkpoint, before the export
    logs = []
    compare(out, preset="smoke", curricula="genenv,static", seeds="2", overrides=["epochs=2"], log=logs.append)
    assert sum("[skip]" in line for line in logs) == 3
    assert "4 runs: 3 finished, 1 to resume, 0 new; 0 of 8 epochs to go" in logs
    assert "[resume] static seed 1 at epoch 2 of 2" in logs   # its checkpoint holds both epochs: only the export
    assert (unfinished / "final" / "agent").exists()
    assert (finished / "metrics.jsonl").read_text() == before
    assert (finished / "metrics.jsonl").stat().st_mtime_ns == stamp


@pytest.mark.slow
def test_compare_restarts_a_run_stopped_before_its_first_checkpoint(tmp_path):
    """A run killed after it wrote its config and metrics file but before its first checkpoint (during the warm
    start's evaluation, say) is resumed from epoch 0 in its own folder, not refused as a folder that holds a run,
    and ends with the metrics of an uninterrupted run of the same seed; such a folder's resume may change any
    setting (nothing is trained yet)."""
    from genenv.checkpoint import load_run_config
    from genenv.metrics import TIMING_KEYS
    compare(tmp_path, preset="smoke", curricula="static", seeds="1", overrides=["epochs=1"], log=lambda m: None)
    run_dir = run_dir_of(tmp_path, Arm("static", ()), 0)
    uninterrupted = read_jsonl(run_dir / "metrics.jsonl")
    shutil.rmtree(run_dir / "checkpoints" / "latest")
    shutil.rmtree(run_dir / "final")
    (run_dir / "metrics.jsonl").write_text("")
    logs = []
    compare(tmp_path, preset="smoke", curricula="static", seeds="1", overrides=["epochs=1"], log=logs.append)
    assert "1 runs: 0 finished, 1 to resume, 0 new; 1 of 1 epochs to go" in logs
    assert "[resume] static seed 0 from epoch 0 of 1 (stopped before its first checkpoint)" in logs
    assert not any("FAILED" in line for line in logs)
    assert (run_dir / "final" / "agent").exists()
    again = read_jsonl(run_dir / "metrics.jsonl")
    assert [{k: v for k, v in row.items() if k not in TIMING_KEYS} for row in again] == [
        {k: v for k, v in row.items() if k not in TIMING_KEYS} for row in uninterrupted]

    # stopped before its first checkpoint again: nothing is trained, so a resume may change what resumes refuse
    shutil.rmtree(run_dir / "checkpoints" / "latest")
    shutil.rmtree(run_dir / "final")
    (run_dir / "metrics.jsonl").write_text("")
    assert main(["run", "--resume", str(run_dir), "agent.lr=0.002"]) == 0
    assert load_run_config(run_dir).agent.lr == 0.002 and len(read_jsonl(run_dir / "metrics.jsonl")) == 1


@pytest.mark.slow
def test_compare_with_more_epochs_extends_finished_runs_and_refuses_other_settings(tmp_path, capsys):
    """The same command with more epochs extends each finished run (its resume is given ``epochs``; before, the
    resume found the run finished, did nothing, and compare logged it done), and matches an uninterrupted run of
    that length; a setting a resume cannot change is one ConfigError naming it, before anything runs."""
    from genenv.metrics import TIMING_KEYS
    compare(tmp_path / "short", preset="smoke", curricula="static", seeds="1", overrides=["epochs=1"],
            log=lambda m: None)
    run_dir = run_dir_of(tmp_path / "short", Arm("static", ()), 0)
    logs = []
    with pytest.MonkeyPatch.context() as patch:   # on a machine without the warm-start cache: none is rebuilt
        patch.setenv("GENENV_CACHE", str(tmp_path / "empty-cache"))
        compare(tmp_path / "short", preset="smoke", curricula="static", seeds="1", overrides=["epochs=2"],
                log=logs.append)
    assert not any(line.startswith("seed 0:") for line in logs), logs
    assert not (tmp_path / "empty-cache" / "models").exists()
    assert "1 runs: 0 finished, 1 to resume, 0 new; 1 of 2 epochs to go" in logs
    assert "[resume] static seed 0 at epoch 1 of 2" in logs and not any("FAILED" in line for line in logs)
    assert [row["epoch"] for row in read_jsonl(run_dir / "metrics.jsonl")] == [0, 1]
    assert read_jsonl(run_dir / "config_changes.jsonl")[0]["changes"] == {"epochs": [1, 2]}
    compare(tmp_path / "long", preset="smoke", curricula="static", seeds="1", overrides=["epochs=2"],
            log=lambda m: None)
    straight = read_jsonl(run_dir_of(tmp_path / "long", Arm("static", ()), 0) / "metrics.jsonl")
    assert [{k: v for k, v in row.items() if k not in TIMING_KEYS} for row in read_jsonl(run_dir / "metrics.jsonl")
            ] == [{k: v for k, v in row.items() if k not in TIMING_KEYS} for row in straight]

    before = (run_dir / "metrics.jsonl").read_text()
    with pytest.raises(ConfigError, match=r"static seed 0 .*\(agent\.lr .* -> 0\.002\); a resume cannot change them"):
        compare(tmp_path / "short", preset="smoke", curricula="static", seeds="1",
                overrides=["epochs=3", "agent.lr=0.002"], log=lambda m: None)
    assert (run_dir / "metrics.jsonl").read_text() == before

    # its checkpoints removed to free disk: the run is read as finished, but no command starts it over
    shutil.rmtree(run_dir / "checkpoints" / "latest")
    assert compare(tmp_path / "short", preset="smoke", curricula="static", seeds="1", overrides=["epochs=2"],
                   log=lambda m: None)["curricula"]["static"]["epochs"] == [2]
    with pytest.raises(ConfigError, match=r"static seed 0: .* holds 2 epochs of metrics but no checkpoint .*"
                                          r"ask for the epochs it holds \(epochs=2\)"):
        compare(tmp_path / "short", preset="smoke", curricula="static", seeds="1", overrides=["epochs=3"],
                log=lambda m: None)
    capsys.readouterr()
    assert main(["run", "--resume", str(run_dir), "epochs=3"]) == 2
    assert "holds 2 epochs of metrics but no checkpoint" in capsys.readouterr().err
    assert main(["run", "--resume", str(run_dir)]) == 0      # finished: nothing to do
    assert "nothing to resume (its checkpoint was removed" in capsys.readouterr().out
    assert (run_dir / "metrics.jsonl").read_text() == before


def test_only_seeds_with_a_run_to_start_are_warm_started():
    """A seed is warmed when one of its runs is new or stopped before its first checkpoint; finished runs and
    checkpointed ones (which resume from their own folder's weights) need no warm start."""
    from genenv.compare import seeds_to_warm
    a, b = Arm("genenv", ()), Arm("random", ())
    statuses = {(a, 0): "finished", (b, 0): "partial", (a, 1): "finished", (b, 1): "partial",
                (a, 2): "finished", (b, 2): "new", (a, 3): "finished", (b, 3): "finished"}
    resumes = {(b, 0): ["epochs=20"]}   # seed 1's partial run has no checkpoint: it starts over
    assert seeds_to_warm(statuses, resumes, [0, 1, 2, 3]) == [1, 2]
    assert seeds_to_warm(statuses, resumes, [0, 3]) == []


def test_compare_never_logs_done_for_a_run_that_did_not_finish(tmp_path, monkeypatch):
    """A run process that exits 0 without finishing its epochs (as `genenv run --resume` of a finished run did
    when compare asked for more epochs) is logged INCOMPLETE and counted failed, not "done"."""
    from genenv import compare as compare_module
    # exits 0, runs nothing
    monkeypatch.setattr(compare_module, "_run_pair", lambda command, log_file, side_by_side=False: 0)
    logs = []
    with pytest.raises(ConfigError, match=r"every run failed \(1\)"):
        compare(tmp_path, preset="smoke", curricula="static", seeds="1", overrides=["epochs=1"], log=logs.append)
    assert any(line.startswith("[INCOMPLETE] static seed 0: its run ended without error but holds 0 of 1 epochs")
               for line in logs)
    assert not any(line.startswith("[done]") for line in logs)


@pytest.mark.slow
def test_compare_extra_arm_runs_with_its_overrides_and_can_be_the_reference(tmp_path):
    summary = compare(tmp_path, preset="smoke", curricula="static", seeds="1", overrides=["epochs=1"],
                      extra_arms=["static-b3:curriculum=static curriculum_reward.beta=3"], reference="static-b3",
                      log=lambda m: None)
    assert set(summary["curricula"]) == {"static", "static-b3"} and summary["reference"] == "static-b3"
    config = (tmp_path / "runs" / "static-b3" / "seed0" / "config.yaml").read_text()
    assert "beta: 3" in config and "curriculum: static" in config
    assert json.loads((tmp_path / "compare.json").read_text())["reference"] == "static-b3"
    assert report_comparison(tmp_path).exists()
    assert json.loads((tmp_path / "summary.json").read_text())["reference"] == "static-b3"


def _images(html_text):
    return re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html_text)


@pytest.mark.slow
def test_comparison_report_has_every_plot(comparison):
    out, _, _ = comparison
    html_text = (out / "report.html").read_text()
    images = _images(html_text)
    assert len(images) == len(PLOTS)
    assert all(base64.b64decode(img).startswith(PNG_MAGIC) for img in images)
    for name, caption in PLOTS.items():
        assert f"id='{name}'" in html_text and html.escape(caption) in html_text
        assert (out / "plots" / f"{name}.png").read_bytes().startswith(PNG_MAGIC)
    assert "genenv" in html_text and "static" in html_text and "http" not in html_text.replace(
        "http-equiv", "")  # self-contained: nothing fetched


@pytest.mark.slow
def test_report_of_one_recorded_run(comparison, tmp_path):
    out, _, _ = comparison
    import shutil
    run_dir = tmp_path / "one"
    shutil.copytree(run_dir_of(out, Arm("genenv", ()), 0), run_dir)
    result = subprocess.run([sys.executable, "-m", "genenv.cli", "report", str(run_dir)], capture_output=True,
                            text=True)
    assert result.returncode == 0, result.stderr
    html_text = (run_dir / "report.html").read_text()
    assert len(_images(html_text)) == len(PLOTS)
    # the smoke preset's held-out and dev sets take a share of addition's 100 level-1 tasks: the report says so
    assert "id='data-split'" in html_text and "Levels too small to split: level 1 has 100 distinct tasks" in html_text
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["curricula"]["genenv"]["heldout_final"]["per_seed"] == [
        read_jsonl(run_dir / "metrics.jsonl")[-1]["heldout_success"]]


@pytest.mark.slow
def test_report_rebuilds_a_comparison(comparison):
    out, _, _ = comparison
    (out / "report.html").unlink()
    assert main(["report", str(out)]) == 0
    assert len(_images((out / "report.html").read_text())) == len(PLOTS)


@pytest.mark.slow
def test_report_re_pairs_a_subset_of_a_comparison_elsewhere(comparison, tmp_path, capsys):
    out, summary, _ = comparison
    own = (out / "summary.json").read_text()
    dest = tmp_path / "view"
    assert main(["report", str(out), "--reference", "static", "--arms", "ours=genenv,static", "--out", str(dest)]) == 0
    view = json.loads((dest / "summary.json").read_text())
    assert view["reference"] == "static" and set(view["curricula"]) == {"ours", "static"}
    # the relabelled arm is the comparison's genenv runs, paired against static seed by seed
    ours, static = view["curricula"]["ours"], view["curricula"]["static"]
    assert ours["heldout_final"]["per_seed"] == summary["curricula"]["genenv"]["heldout_final"]["per_seed"]
    differences = [d["difference"] for d in ours["reference_minus_this"]["final"]["per_seed"]]
    assert differences == pytest.approx([s - g for s, g in zip(static["heldout_final"]["per_seed"],
                                                               ours["heldout_final"]["per_seed"])])
    assert json.loads((dest / "view.json").read_text())["arms"][0] == {
        "label": "ours", "runs": "genenv", "overrides": ["curriculum=genenv"]}
    assert (dest / "report.html").exists() and (out / "summary.json").read_text() == own  # the original stays
    assert "ours" in capsys.readouterr().out  # the text table


@pytest.mark.slow
def test_report_flags_name_what_is_wrong(comparison, tmp_path, capsys):
    out, _, _ = comparison
    assert main(["report", str(out), "--arms", "genenv,nope", "--out", str(tmp_path / "v")]) == 2
    assert "--arms: 'nope' is not an arm" in capsys.readouterr().err
    assert main(["report", str(out), "--arms", "static", "--reference", "genenv", "--out", str(tmp_path / "v")]) == 2
    assert "--reference: 'genenv' is not one of the arms (static)" in capsys.readouterr().err
    assert main(["report", str(out), "--arms", "a=genenv,a=static", "--out", str(tmp_path / "v")]) == 2
    assert "used twice" in capsys.readouterr().err
    run_dir = run_dir_of(out, Arm("genenv", ()), 0)
    assert main(["report", str(run_dir), "--reference", "static"]) == 2
    assert "apply to a comparison folder" in capsys.readouterr().err


def test_report_of_a_non_run_exits_2(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "run folder" in capsys.readouterr().err


def test_paired_rollouts_hand_values():
    from genenv.analysis import paired_rollouts
    genenv = [_record("genenv", 0, [0.2, 0.4, 0.4]), _record("genenv", 1, [0.3, 0.3])]
    static = [_record("static", 0, [0.1, 0.2, 0.3, 0.4]), _record("static", 1, [0.2, 0.25])]
    result = paired_rollouts(genenv, static)
    # seed 0: target 0.4, genenv first reaches it at 200 rollouts, static at 400 -> 2x; seed 1: never
    assert result["per_seed"][0] == {"seed": 0, "target": 0.4, "rollouts": 400, "reference_rollouts": 200,
                                     "ratio": 2.0}
    assert result["per_seed"][1]["rollouts"] is None and result["per_seed"][1]["ratio"] is None
    assert result["reached"] == 1 and result["of"] == 2 and result["ratio_mean_where_reached"] == 2.0


def test_summary_reports_single_step_accuracy_where_the_domain_has_it():
    """Household-style runs log heldout_step_accuracy: the summary, text table and HTML table show it per seed;
    runs without it (addition) keep the table as it was."""
    from genenv.report import results_table
    from genenv.report import text_table as summary_table
    with_steps = [_record("genenv", k, [0.2, v]) for k, v in enumerate([0.3, 0.5])]
    for record, accuracy in zip(with_steps, [0.7, 0.8]):
        record.rows[-1]["heldout_step_accuracy"] = accuracy
        record.warm["heldout_step_accuracy"] = 0.6
    summary = summarize({"genenv": with_steps})
    g = summary["curricula"]["genenv"]
    assert g["heldout_step_accuracy_final"]["per_seed"] == [0.7, 0.8]
    assert g["heldout_step_accuracy_final"]["mean"] == pytest.approx(0.75)
    assert g["heldout_step_accuracy_warmstart"]["mean"] == pytest.approx(0.6)
    assert "single-step" in summary_table(summary) and "0.750 +- 0.071" in summary_table(summary)
    assert "<td>0.700 0.800</td>" in results_table(summary) and "<td>0.750 +- 0.071</td>" in results_table(summary)
    plain = summarize({"genenv": [_record("genenv", 0, [0.2, 0.4])]})
    assert plain["curricula"]["genenv"]["heldout_step_accuracy_final"]["n"] == 0
    assert "single-step" not in summary_table(plain) and "single-step" not in results_table(plain)


@pytest.mark.slow
def test_compare_warms_seeds_in_parallel_processes_into_the_shared_cache(tmp_path, monkeypatch):
    """With two workers the seeds' warm starts run in two processes; each fills the cache the runs then read
    (a second pass finds every seed cached and trains nothing), and the lines come back per seed, in order."""
    from genenv.compare import _warm_start_each_seed
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    arms = [Arm("genenv", ("curriculum=genenv",))]
    configs = {(arms[0], seed): load_config("smoke", ["threads=1", f"seed={seed}"]) for seed in (0, 1)}
    first: list[str] = []
    _warm_start_each_seed(configs, arms, [0, 1], 2, first.append)
    cached = sorted(p.name.split("-")[1] for p in (tmp_path / "cache" / "models").iterdir())
    assert cached == ["agent", "agent", "env", "env"]
    seed_lines = [line for line in first if line.startswith("seed ")]
    assert seed_lines and seed_lines[0].startswith("seed 0:") and seed_lines[-1].startswith("seed 1:")
    again: list[str] = []
    _warm_start_each_seed(configs, arms, [0, 1], 2, again.append)
    assert len(list((tmp_path / "cache" / "models").iterdir())) == 4
    assert not any(line.startswith("seed ") for line in again), again  # loaded from the cache: nothing trained


def test_where_tasks_sit_counts_informative_tasks_by_level(tmp_path):
    """benchmarks/where_tasks_sit.py on a hand-made arm folder: invalid tasks and early epochs are left out, a
    task is informative when its rollouts mixed (0 < p_hat < 1)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from where_tasks_sit import shares, where_tasks_sit
    rows = {0: [{"valid": True, "p_hat_task": 0.5, "level": 9}],                     # before from_epoch
            20: [{"valid": True, "p_hat_task": 0.875, "level": 2}, {"valid": True, "p_hat_task": 1.0, "level": 2},
                 {"valid": True, "p_hat_task": 0.125, "level": 3}, {"valid": False, "p_hat_task": None, "level": 3},
                 {"valid": True, "p_hat_task": 0.0, "level": 8}]}
    for seed in (0, 1):
        samples = tmp_path / "genenv" / f"seed{seed}" / "samples"
        samples.mkdir(parents=True)
        for epoch, epoch_rows in rows.items():
            (samples / f"epoch_{epoch}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in epoch_rows))
    counts = where_tasks_sit(tmp_path / "genenv", from_epoch=20)
    assert counts == {"seeds": 2, "tasks": 8, "by_level": {"2": 4, "3": 2, "8": 2}, "informative": 4,
                      "informative_by_level": {"2": 2, "3": 2}, "informative_below_half": 2,
                      "informative_above_half": 2}
    assert shares(counts["by_level"]) == "2:0.50 3:0.25 8:0.25"


def test_simulator_steering_table_by_hand():
    """benchmarks/simulator_validity.py --by-seed-level: per seed level, the written tasks' mean level, the share
    within one level of the seed and the histogram."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from simulator_validity import steering
    assert steering([1, 2, 3, 4], 2, [1, 3, 3, 4]) == {"valid": 4, "mean_level": 2.75, "within_1": 0.75,
                                                       "histogram": [1, 0, 2, 1]}
    assert steering([1, 2], 1, []) == {"valid": 0, "mean_level": None, "within_1": None, "histogram": [0, 0]}


def test_budget_to_match_measures_the_baseline_against_the_references_final(tmp_path):
    """benchmarks/budget_to_match.py on hand-made records: per seed the first evaluation of the (longer) baseline
    at or above the reference's final success, as a multiple of the reference's budget; then on mean curves."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from budget_to_match import budget_to_match
    # reference: 2 epochs (budget 200 rollouts); baseline: 4 epochs (400)
    reference = {0: _record("genenv", 0, [0.3, 0.5]), 1: _record("genenv", 1, [0.2, 0.2])}
    baseline = {0: _record("random", 0, [0.2, 0.3, 0.4, 0.6]), 1: _record("random", 1, [0.1, 0.1, 0.1, 0.1]),
                2: _record("random", 2, [0.9, 0.9, 0.9, 0.9])}  # no reference seed 2: left out
    result = budget_to_match(reference, baseline)
    assert [(r["seed"], r["target"], r["at_budget"], r["at_end"], r["rollouts"], r["multiple"])
            for r in result["per_seed"]] == [(0, 0.5, 0.3, 0.6, 400.0, 2.0), (1, 0.2, 0.1, 0.1, None, None)]
    # mean curves: baseline (0, .1) (100, .15) (200, .2) (300, .25) (400, .35); target (0.5 + 0.2) / 2 = 0.35
    assert result["mean_curve"] == pytest.approx({"target": 0.35, "at_budget": 0.2, "at_end": 0.35,
                                                  "rollouts": 400.0, "multiple": 2.0})
    assert result["left_out"] == []
    baseline[1] = _record("random", 1, [0.1, 0.1, 0.1])          # still running: one evaluation short
    partial = budget_to_match(reference, baseline)
    assert partial["left_out"] == [1] and [r["seed"] for r in partial["per_seed"]] == [0]
    assert partial["mean_curve"]["rollouts"] == 400.0                # seed 0's own curve reaches 0.5 at 400


def test_report_axes_show_rates_on_zero_to_one_short_series_with_markers_and_whole_epochs():
    """Issue 39: a one-point series was invisible, constant rates got ranges like -0.04..0.04, held-out success
    zoomed to 0.236-0.244, epochs had fractional ticks, one seed showed +- 0.000 and the reference was paired
    with itself."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from genenv.report import plot_heldout, plot_metric, results_columns
    runs = [_record("genenv", 0, [0.236, 0.244, 0.240])]
    for row in runs[0].rows:
        row["invalid_rate"] = 0.0
    runs[0].rows[-1]["env_kl_to_initial"] = 0.3           # one point only
    fig, axes = plt.subplots(1, 3)
    plot_heldout({"genenv": runs}, axes[0])
    plot_metric({"genenv": runs}, axes[1], "invalid_rate", "share")
    plot_metric({"genenv": runs}, axes[2], "env_kl_to_initial", "KL")
    assert axes[0].get_ylim() == (-0.02, 1.02) and axes[1].get_ylim() == (-0.02, 1.02)
    assert axes[2].lines[0].get_marker() == "o" and axes[0].lines[0].get_marker() == "o"
    ticks = axes[1].xaxis.get_major_locator().tick_values(0, 2)
    assert all(float(t).is_integer() for t in ticks)
    # the one KL point sits at its epoch on the run's whole epoch axis, on a KL axis from 0 with room above it
    low, high = axes[2].get_xlim()
    assert low < 0 and 2 < high < 3
    assert axes[2].get_ylim()[0] == 0 and 0.3 < axes[2].get_ylim()[1] < 0.4
    plt.close(fig)
    summary = summarize({"genenv": runs, "random": [_record("random", 0, [0.2, 0.2, 0.2])]}, reference="genenv")
    cells = {key: cells for key, _, cells in results_columns(summary)}
    assert cells["difference"][0] == "(the reference)" and cells["difference"][1].startswith("+0.040")
    assert cells["final"][0].endswith("(1 seed)") and "+-" not in cells["final"][0]


def _render_in_chromium(page: Path, screenshot: Path) -> dict:
    """Open ``page`` in headless Chromium (Debian's, driven by playwright): what the console said, what the page
    asked the network for, each image's load state, the page's width and a full-page screenshot."""
    chromium = Path(shutil.which("chromium") or "/usr/bin/chromium")
    if not chromium.exists():
        print("skipped: no Chromium here (.ci/run installs Debian's chromium; `apt-get install chromium`)")
        pytest.skip("no Chromium (.ci/run installs Debian's chromium)")
    sync_api = pytest.importorskip("playwright.sync_api")
    found: dict = {"console": [], "requests": []}
    with sync_api.sync_playwright() as driver:
        browser = driver.chromium.launch(executable_path=str(chromium), args=[
            "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync"])
        tab = browser.new_page(viewport={"width": 1280, "height": 900})
        tab.on("console", lambda message: found["console"].append(f"{message.type}: {message.text}"))
        tab.on("pageerror", lambda error: found["console"].append(f"pageerror: {error}"))
        tab.on("request", lambda request: found["requests"].append(request.url))
        tab.goto(page.resolve().as_uri(), wait_until="load")
        found["images"] = tab.evaluate("Array.from(document.images).map(i => "
                                       "({alt: i.alt, complete: i.complete, width: i.naturalWidth}))")
        found["page_width"], found["window_width"] = tab.evaluate(
            "[document.documentElement.scrollWidth, window.innerWidth]")
        tab.screenshot(path=str(screenshot), full_page=True)
        browser.close()
    return found


@pytest.mark.slow
def test_reports_render_in_a_real_browser(comparison, tmp_path):
    """Issue 39, item 5: the comparison's and one run's report.html, opened in headless Chromium: no console
    message, nothing fetched beyond the file itself (self-contained), every plot decoded, no sideways scroll,
    and a screenshot of the whole page."""
    out, summary, _ = comparison
    one_run = next(p.parent for p in out.rglob("config.yaml"))
    report_run(one_run)
    for page in (out / "report.html", one_run / "report.html"):
        shot = tmp_path / f"{page.parent.name}.png"
        found = _render_in_chromium(page, shot)
        assert found["console"] == [], found["console"]
        assert found["requests"] == [page.resolve().as_uri()], found["requests"]
        assert len(found["images"]) >= 8
        assert all(image["complete"] and image["width"] > 0 for image in found["images"]), found["images"]
        assert found["page_width"] <= found["window_width"]
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 50_000


def test_the_text_table_fits_a_100_column_terminal():
    """Issue 39, item 9: the table genenv compare prints (6 arms, long labels) wraps in no 100-column terminal."""
    from genenv.report import text_table
    groups = {label: [_record(label, seed, [0.2, 0.3 + 0.01 * seed]) for seed in range(3)]
              for label in ("genenv-predicted", "random", "genenv-levels", "random-frontier", "genenv-none",
                            "oracle")}
    table = text_table(summarize(groups, reference="genenv-predicted"))
    assert all(len(line) <= 100 for line in table.splitlines()), max(table.splitlines(), key=len)
    assert "minus it [95% CI] wins" in table and "(the reference)" in table


def test_same_metrics_names_each_value_that_differs_and_ignores_clocks():
    """benchmarks/same_metrics.py: two runs' metrics rows compared key by key; wall-clock and memory keys are not
    compared, a changed value or a missing row is named with its epoch."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from same_metrics import differences
    before = [{"epoch": 0, "heldout_success": 0.5, "seconds_total": 3.0, "peak_rss_mb_by_phase": {"rollout": 9}},
              {"epoch": 1, "heldout_success": 0.6, "env_update_kl": 0.01}]
    same = [{"epoch": 0, "heldout_success": 0.5, "seconds_total": 4.5, "peak_rss_mb_by_phase": {"rollout": 12}},
            {"epoch": 1, "heldout_success": 0.6, "env_update_kl": 0.01}]
    assert differences(before, same) == []
    changed = [same[0], {"epoch": 1, "heldout_success": 0.6, "env_update_kl": 0.02}]
    assert differences(before, changed) == ["epoch 1: env_update_kl: 0.01 -> 0.02"]
    assert differences(before, same[:1]) == ["rows: 2 before, 1 after"]


def test_the_report_says_when_runs_were_made_by_different_code():
    from genenv.analysis import code_sentence
    same = {"sources": {"aaaa": ["genenv/seed0", "random/seed0"]}, "unrecorded": [], "resumed_with_other_code": []}
    assert code_sentence(same) == "Every run was made by the same code (source fingerprint aaaa)."
    mixed = {"sources": {"aaaa": ["genenv/seed0"], "bbbb": ["random/seed0"]}, "unrecorded": ["static/seed0"],
             "resumed_with_other_code": ["genenv/seed0"]}
    sentence = code_sentence(mixed)
    assert sentence.startswith("Not every run was made by the same code: 1 by source aaaa; 1 by source bbbb; 1 made "
                               "before runs recorded their code; 1 resumed with other code than they started with "
                               "(genenv/seed0)")


def test_the_report_names_the_files_in_which_two_sources_differ(tmp_path):
    """code.json holds each source file's hash; with runs made by two sources the summary names the files that
    differ from the source of most runs, and the report's sentence lists them."""
    from genenv.analysis import code_sentence, code_versions
    from genenv.provenance import code_version, files_that_differ, source_files
    assert files_that_differ({"a.py": "1", "b.py": "2"}, {"a.py": "1", "b.py": "3", "c.py": "4"}) == ["b.py", "c.py"]
    files = source_files()
    assert "coevolve.py" in files and "configs/default.yaml" in files and code_version()["files"] == files
    edited = {**files, "compare.py": "0" * 12}
    groups = {}
    for label, seed, source, made in (("genenv", 0, "aaaa", files), ("random", 0, "aaaa", files),
                                      ("static", 0, "bbbb", edited)):
        run_dir = tmp_path / label / f"seed{seed}"
        run_dir.mkdir(parents=True)
        (run_dir / "code.json").write_text(json.dumps({"source": source, "files": made}))
        groups.setdefault(label, []).append(RunRecord(path=run_dir, label=label, seed=seed, config={}, rows=[]))
    code = code_versions(groups)
    assert code["most_runs_source"] == "aaaa" and code["files_that_differ"] == {"bbbb": ["compare.py"]}
    assert code_sentence(code).startswith("Not every run was made by the same code: 2 by source aaaa; 1 by source "
                                          "bbbb (differs from aaaa in compare.py)")


def test_run_windows_sums_each_window_by_hand():
    """benchmarks/run_windows.py: per window of epochs, the simulator's valid generations, its steps and the steps
    the KL cap undid, in-band tasks, GRPO steps and the valid tasks' p_hat histogram, summed; the last window short."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from run_windows import line, windows
    rows = [{"epoch": e, "generated": 16, "valid": e, "env_steps": 4 if e < 2 else 0, "env_kl_capped": int(e == 2),
             "in_band_tasks": int(e == 1), "rollouts_this_epoch": 96, "agent_updates": e % 2,
             "p_hat_histogram": [1, 0, 0, 0, e]} for e in range(3)]
    first, last = windows(rows, 2)
    assert first == {"first": 0, "last": 1, "generated": 32, "valid": 1, "env_steps": 8, "env_kl_capped": 0,
                     "in_band_tasks": 1, "rollouts_this_epoch": 192, "agent_updates": 1,
                     "p_hat_histogram": [2, 0, 0, 0, 1]}
    assert (last["first"], last["last"], last["valid"], last["env_kl_capped"]) == (2, 2, 2, 1)
    assert line(first).startswith("epochs 0-1: valid 1/32 (3%), simulator steps 8 (+0 undone by the KL cap), "
                                  "in-band 1, GRPO steps 1 (5.2 per 1000 rollouts)")


def test_group_signal_counts_groups_by_agreement():
    """benchmarks/group_signal.py: a level's groups split into all failed, mixed and all solved by the success
    threshold, with the mean sampled success over tasks and the greedy success, by hand."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from group_signal import group_signal

    from genenv.rollout import Episode

    def group(*rewards):
        return [Episode(None, [], reward) for reward in rewards]

    sampled = [group(0.0, 0.0, 0.0, 0.0), group(1.0, 0.0, 0.4, 1.0), group(1.0, 1.0, 0.5, 1.0)]
    greedy = [group(0.0), group(1.0), group(0.49)]
    row = group_signal(sampled, greedy, threshold=0.5)
    assert row == {"tasks": 3, "sampled_success": round((0 + 0.5 + 1.0) / 3, 3), "greedy_success": 0.333,
                   "all_failed": 1, "mixed": 1, "all_solved": 1}
    assert group_signal([], [], 0.5)["mixed"] == 0


def test_arm_profile_by_hand(tmp_path):
    """benchmarks/arm_profile.py: band hit and mixed groups averaged over every epoch of every seed, the p_hat
    histogram summed per window of epochs as shares, the teacher's calls per epoch, the pooled valid share and the
    rejection reasons (most first), the first and last epoch's valid tasks."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from arm_profile import first_and_last_tasks, profile

    from genenv.io import atomic_write_jsonl
    for seed, band in ((0, 0.1), (1, 0.3)):
        rows = [{"epoch": e, "band_hit_rate": band, "effective_fraction": 0.2 * e, "teacher_backward_passes": 3,
                 "teacher_forward_sequences": 10 * e, "p_hat_histogram": [4, 0, 0, 0, 0] if e < 2 else [0, 0, 0, 0, 2],
                 "generated": 8, "valid": 2 * seed + e % 2,
                 "invalid_reasons": {"malformed": 8 - 2 * seed - e % 2} if seed == 0 else {"equals a dev task": 1}}
                for e in range(4)]
        atomic_write_jsonl(tmp_path / f"seed{seed}" / "metrics.jsonl", rows)
    result = profile(tmp_path, windows=2)
    assert result["seeds"] == 2
    assert result["band_hit_rate"] == pytest.approx(0.2) and result["mixed_groups"] == pytest.approx(0.3)
    assert result["p_hat_shares_by_window"] == [[1.0, 0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0, 1.0]]
    assert result["teacher_backward_passes_per_epoch"] == 3 and result["teacher_forward_sequences_per_epoch"] == 15
    assert result["generated"] == 64 and result["valid_share"] == pytest.approx((2 + 10) / 64)
    assert result["rejections"] == {"malformed": 30, "equals a dev task": 4}   # most first
    samples = tmp_path / "seed0" / "samples"
    atomic_write_jsonl(samples / "epoch_0.jsonl", [{"valid": False}, {"valid": True, "task": "a", "level": 1,
                                                                        "p_hat_task": 0.5}])
    atomic_write_jsonl(samples / "epoch_10.jsonl", [{"valid": True, "task": "b", "level": 3, "p_hat_task": 0.0}])
    atomic_write_jsonl(samples / "epoch_9.jsonl", [{"valid": True, "task": "c", "level": 2, "p_hat_task": 1.0}])
    tasks = first_and_last_tasks(tmp_path / "seed0", n=5)
    assert tasks == {"first (epoch_0)": [{"task": "a", "level": 1, "p_hat": 0.5}],
                     "last (epoch_10)": [{"task": "b", "level": 3, "p_hat": 0.0}]}


def test_paired_arms_reads_a_longer_run_at_an_earlier_epoch(tmp_path):
    """benchmarks/paired_arms.py --epoch: each run's success evaluated at that epoch (a run that has not reached it
    is left out); without it, the final row of finished runs only (seed 1 stopped at epoch 2 of 4)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from paired_arms import finals

    from genenv.io import atomic_write_jsonl
    for seed, epochs in ((0, 4), (1, 2)):
        run = tmp_path / f"seed{seed}"
        (run / "config.yaml").parent.mkdir(parents=True)
        (run / "config.yaml").write_text(f"seed: {seed}\nepochs: 4\n")
        atomic_write_jsonl(run / "metrics.jsonl", [{"epoch": e, "dev_success": 0.1 * e + seed if e % 2 else None}
                                                   for e in range(epochs)])
        if epochs == 4:
            (run / "final" / "agent").mkdir(parents=True)   # what marks a run finished
    assert finals(tmp_path, "dev", epoch=1) == {0: pytest.approx(0.1), 1: pytest.approx(1.1)}
    assert finals(tmp_path, "dev", epoch=3) == {0: pytest.approx(0.3)}
    assert finals(tmp_path, "dev") == {0: pytest.approx(0.3)}
    assert finals(tmp_path, "dev", last=2) == {0: pytest.approx((0.1 + 0.3) / 2)}   # --last: the evaluated rows only
    assert finals(tmp_path, "dev", epoch=3, last=2) == {0: pytest.approx(0.2)}
    assert finals(tmp_path, "dev", epoch=1, last=2) == {}   # one evaluation by then: too few


def test_paired_arms_reads_the_runs_an_eval_curves_file_kept(tmp_path):
    """``FILE.json:ARM``: a committed eval_curves file stands in for run folders of another machine; a run shorter
    than the arm's longest counts only when read at an epoch it reached."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from paired_arms import finals_from_curves
    path = tmp_path / "curves.json"
    path.write_text(json.dumps({"a": {"0": {"epochs": 4, "evaluations": {"1": [0.2, 0.3], "3": [0.4, 0.5]}},
                                      "1": {"epochs": 2, "evaluations": {"1": [0.6, 0.7]}}}}))
    assert finals_from_curves(path, "a", "dev") == {0: pytest.approx(0.4)}
    assert finals_from_curves(path, "a", "heldout", epoch=1) == {0: pytest.approx(0.3), 1: pytest.approx(0.7)}
    assert finals_from_curves(path, "a", "dev", last=2) == {0: pytest.approx(0.3)}
    assert finals_from_curves(path, "a", "dev", epoch=3, last=2) == {0: pytest.approx(0.3)}
    assert finals_from_curves(path, "a", "dev", epoch=2) == {}   # never evaluated at epoch 2
    with pytest.raises(ValueError, match="no arm 'b'"):
        finals_from_curves(path, "b", "dev")


def test_paired_arms_valid_share_is_the_mean_over_epochs_of_valid_over_generated(tmp_path):
    """--metric valid_share (issue 57's rule): the mean of the per-epoch shares, not the pooled share; epochs that
    generated nothing are left out; with --epoch, only runs that reached it, read up to it."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from paired_arms import finals

    from genenv.io import atomic_write_jsonl
    run = tmp_path / "seed3"
    (run / "final" / "agent").mkdir(parents=True)
    (run / "config.yaml").write_text("seed: 3\nepochs: 3\n")
    atomic_write_jsonl(run / "metrics.jsonl", [{"epoch": 0, "generated": 4, "valid": 1},
                                               {"epoch": 1, "generated": 0, "valid": 0},
                                               {"epoch": 2, "generated": 12, "valid": 9}])
    assert finals(tmp_path, "valid_share") == {3: pytest.approx((0.25 + 0.75) / 2)}   # pooled would be 10/16
    assert finals(tmp_path, "valid_share", epoch=0) == {3: pytest.approx(0.25)}
    assert finals(tmp_path, "valid_share", epoch=1) == {3: pytest.approx(0.25)}   # reached, though it wrote nothing
    assert finals(tmp_path, "valid_share", epoch=5) == {}


def test_eval_curves_keeps_each_runs_evaluations_compactly(tmp_path):
    """benchmarks/eval_curves.py: per seed the dev and held-out success at every evaluated epoch, the epochs run,
    and the mean band hit and mixed groups."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    from eval_curves import curves

    from genenv.io import atomic_write_jsonl
    rows = [{"epoch": e, "band_hit_rate": 0.1 * e, "effective_fraction": 0.5,
             "dev_success": 0.2 if e == 1 else None, "heldout_success": 0.3 if e == 1 else None} for e in range(3)]
    atomic_write_jsonl(tmp_path / "seed10" / "metrics.jsonl", rows)
    atomic_write_jsonl(tmp_path / "seed2" / "metrics.jsonl", rows[:1])
    result = curves(tmp_path)
    assert list(result) == ["2", "10"]
    assert result["10"] == {"epochs": 3, "evaluations": {"1": [0.2, 0.3]}, "band_hit_rate": 0.1, "mixed_groups": 0.5}
    assert result["2"]["evaluations"] == {} and result["2"]["epochs"] == 1


def test_runs_side_by_side_wait_passively_unless_the_user_says_otherwise(tmp_path, monkeypatch):
    """compare --workers N > 1: each run's torch threads wait passively (OMP_WAIT_POLICY=PASSIVE), a value the user
    set stays, and one run at a time gets the environment as it is."""
    import sys

    from genenv.compare import _run_pair
    command = [sys.executable, "-c", "import os; print('policy', os.environ.get('OMP_WAIT_POLICY'))"]

    def policy(side_by_side, name):
        assert _run_pair(command, tmp_path / name, side_by_side=side_by_side) == 0
        return (tmp_path / name).read_text().split("policy ")[-1].strip()
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    assert (policy(True, "a.log"), policy(False, "b.log")) == ("PASSIVE", "None")
    monkeypatch.setenv("OMP_WAIT_POLICY", "ACTIVE")
    assert policy(True, "c.log") == "ACTIVE"

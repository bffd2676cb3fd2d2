"""Issue 39, item 10: the CLI's error paths as a user meets them (subprocess, exit codes, one clear line)."""

import json
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _cli(*args, env_path=None, **env_vars):
    import os
    env = {**os.environ, "PYTHONPATH": str(env_path or EXAMPLES), **env_vars}
    return subprocess.run([sys.executable, "-m", "genenv.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600)


def test_out_naming_a_file_is_one_clear_line(tmp_path):
    (tmp_path / "afile").write_text("x")
    done = _cli("run", "--preset", "smoke", "--out", str(tmp_path / "afile"))
    assert done.returncode == 2 and "a file is there; a run needs a folder" in done.stderr
    assert "Errno" not in done.stderr and "Traceback" not in done.stderr


def test_a_missing_resume_folder_says_so():
    done = _cli("run", "--resume", "/nonexistent/run")
    assert done.returncode == 2 and "no such folder" in done.stderr


def test_a_wrong_class_name_names_the_modules_domains():
    done = _cli("check-domain", "sorting_domain:SortingDomian")
    assert done.returncode == 2
    assert "has no 'SortingDomian'; did you mean sorting_domain:SortingDomain?" in done.stderr


def test_eval_without_a_benchmark_asks_for_one():
    done = _cli("eval", "--model", "smollm2")
    assert done.returncode == 2 and "--benchmark" in done.stderr


def test_every_option_has_help():
    """Every command's options, and each benchmark's own (added to `genenv eval` when it names the benchmark)."""
    from genenv.cli import build_parser
    from genenv.domains import benchmark_modules
    missing = []
    for benchmark in [None, *benchmark_modules()]:
        parser = build_parser(benchmark)
        sub = next(a for a in parser._actions if a.dest == "command")
        missing += [f"{name} {action.option_strings or action.dest}" for name, command in sub.choices.items()
                    for action in command._actions if action.help is None and action.dest != "help"]
    assert not missing


def test_each_benchmark_declares_its_own_options_and_the_cli_names_none():
    """Issue 76, item 4: a benchmark's options come from its module's add_arguments, only when it is named; cli.py
    declares no benchmark's flag."""
    from pathlib import Path

    from genenv.cli import build_parser, parse_command_line

    def eval_options(benchmark):
        sub = next(a for a in build_parser(benchmark)._actions if a.dest == "command")
        return {o for a in sub.choices["eval"]._actions for o in a.option_strings}
    common = eval_options(None)
    assert {"--model", "--benchmark", "--out", "--limit"} <= common
    own = {"bfcl": {"--categories", "--max-steps"}, "api-bank": {"--data", "--levels", "--whole-answers"},
           "alfworld": {"--games", "--alfworld-max-steps"}, "bamboogle": {"--data", "--corpus", "--max-steps"},
           "travelplanner": {"--data", "--queries"}, "heldout": {"--preset", "--config", "--run"}}
    for name, flags in own.items():
        assert eval_options(name) - common == flags, name
    cli = (Path(__file__).resolve().parents[1] / "src" / "genenv" / "cli.py").read_text()
    for flag in set().union(*(flags for name, flags in own.items() if name != "heldout")):   # (run has --preset)
        assert f'"{flag}"' not in cli, flag
    args = parse_command_line(["eval", "--benchmark", "api-bank", "--model", "m", "--levels", "1,2"])
    assert args.levels == "1,2" and args.data is None
    done = _cli("eval", "--benchmark", "bfcl", "--model", "m", "--levels", "1")   # another benchmark's flag
    assert done.returncode == 2 and "unrecognized arguments: --levels" in done.stderr


def test_a_plugin_domain_brings_its_benchmark_through_an_entry_point(tmp_path):
    """An installed package's `genenv.benchmarks` entry point makes its module a benchmark of `genenv eval`, with
    the options it declares: the sorting example, made a distribution on the path (its .dist-info), evaluated on a
    tiny random model folder."""
    import json

    from genenv.config import TinyModelConfig
    from genenv.models.tiny import build_tiny_policy
    info = tmp_path / "sorting_example-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sorting-example\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[genenv.benchmarks]\nsorting = sorting_domain\n")
    sys.path.insert(0, str(EXAMPLES))
    from sorting_domain import SortingDomain
    model = tmp_path / "model"
    policy = build_tiny_policy(TinyModelConfig(hidden_size=16, intermediate_size=32, num_layers=1, num_heads=2),
                               SortingDomain.alphabet, seed=0)
    policy.model.save_pretrained(model)
    policy.tokenizer.save_pretrained(model)
    path = f"{tmp_path}:{EXAMPLES}"
    assert "--lengths" in _cli("eval", "--benchmark", "sorting", "--model", "m", "--help", env_path=path).stdout
    done = _cli("eval", "--benchmark", "sorting", "--model", str(model), "--lengths", "2,3", "--tasks", "4",
                "--threads", "1", "--sampler", "transformers", "--out", str(tmp_path / "out"), env_path=path)
    assert done.returncode == 0, done.stderr[-2000:]
    scores = json.loads((tmp_path / "out" / "scores.json").read_text())
    assert scores["tasks"] == 8 and set(scores["by_length"]) == {"2", "3"} and 0.0 <= scores["accuracy"] <= 1.0
    listed = _cli("domains", env_path=path)
    assert listed.returncode == 0
    without = _cli("eval", "--benchmark", "sorting", "--model", "m")   # not installed: not a benchmark
    assert without.returncode == 2 and "'sorting' is not a benchmark" in without.stderr


def test_resuming_a_finished_run_says_it_is_finished(tmp_path):
    run_dir = tmp_path / "done"
    assert _cli("run", "--preset", "smoke", "--out", str(run_dir), "threads=1", "epochs=1").returncode == 0
    done = _cli("run", "--resume", str(run_dir))
    assert done.returncode == 0 and "has finished its 1 epochs: nothing to resume" in done.stdout + done.stderr


def test_a_compare_whose_runs_all_fail_is_one_message(tmp_path):
    (tmp_path / "failing.py").write_text("import sys\nfrom sorting_domain import SortingDomain\n\n"
                                         "class Fails(SortingDomain):   # fails in a run, not in the warm start\n"
                                         "    def score(self, task, response):\n"
                                         "        if 'run' in sys.argv:\n"
                                         "            raise SystemExit(3)\n"
                                         "        return super().score(task, response)\n")
    import os
    done = _cli("compare", "--preset", "smoke", "--curricula", "random", "--seeds", "1", "--out",
                str(tmp_path / "cmp"), "domain.name=failing:Fails", "domain.num_seed_tasks=100", "epochs=1",
                env_path=os.pathsep.join([str(tmp_path), str(EXAMPLES)]))
    assert done.returncode == 2 and "every run failed (1); nothing to compare" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_compare_refuses_an_arm_its_domain_cannot_run_before_training_anything(tmp_path):
    done = _cli("compare", "--preset", "smoke", "--curricula", "genenv", "--seeds", "1", "--out", str(tmp_path / "c"),
                "domain.name=sorting_domain:SortingDomain", "env.pg.gate=levels")
    assert done.returncode == 2 and "env.pg.gate: 'levels'" in done.stderr and "ordered_levels" in done.stderr
    assert not (tmp_path / "c" / "runs").exists()


def test_a_runs_log_lines_and_its_progress_share_one_stream(tmp_path):
    """Issue 39, item 9: warm-start lines, epoch lines and progress all on stdout, in order; stderr keeps
    warnings and errors only."""
    done = _cli("run", "--preset", "smoke", "--out", str(tmp_path / "run"), "progress=true",
                GENENV_CACHE=str(tmp_path / "cache"))   # an empty cache: the warm start runs and logs
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    warm = next(i for i, line in enumerate(out) if line.startswith("agent warm start round 1"))
    first_epoch = next(i for i, line in enumerate(out) if line.startswith("epoch 0 "))
    finished = next(i for i, line in enumerate(out) if line.startswith("epochs: 3/3 (100%)"))
    assert warm < first_epoch < finished
    assert not [line for line in done.stderr.splitlines() if "warm start" in line or line.startswith("epoch")]


def test_a_run_killed_in_its_warm_start_resumes(tmp_path):
    """Issue 39, item 10: a run killed before its first checkpoint leaves a folder with config.yaml only (the warm
    start's own progress lives in the cache); `--resume` finishes it with the uninterrupted run's metrics."""
    whole = _cli("run", "--preset", "smoke", "--out", str(tmp_path / "whole"), GENENV_CACHE=str(tmp_path / "c"))
    assert whole.returncode == 0, whole.stderr
    killed = tmp_path / "killed"
    killed.mkdir()
    (killed / "config.yaml").write_text((tmp_path / "whole" / "config.yaml").read_text())
    resumed = _cli("run", "--resume", str(killed), GENENV_CACHE=str(tmp_path / "c"))
    assert resumed.returncode == 0, resumed.stderr
    from genenv.io import read_jsonl
    from genenv.metrics import TIMING_KEYS
    whole_rows, resumed_rows = ([{k: v for k, v in row.items() if k not in TIMING_KEYS}
                                 for row in read_jsonl(folder / "metrics.jsonl")]
                                for folder in (tmp_path / "whole", killed))
    assert len(whole_rows) == 3 and resumed_rows == whole_rows


def test_a_full_disk_at_a_checkpoint_is_one_clear_line_and_the_run_resumes(tmp_path, monkeypatch, capsys):
    """The disk fills while a checkpoint is written (safetensors reports it in its own error type): the half-written
    build is removed, the previous checkpoint stays whole, the CLI says what to do in one line, and the resume
    finishes the run."""
    import genenv.checkpoint
    from genenv.cli import main
    from genenv.io import read_jsonl
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    real_save, calls = genenv.checkpoint.save_optimizers, []

    def filling_disk(path, *args, **kwargs):
        calls.extend([path] if "checkpoints" in path.parts else [])
        if len(calls) == 2 and "checkpoints" in path.parts:   # the run's second checkpoint
            path.write_bytes(b"\0" * 1000)   # part of a file, then the disk is full
            raise RuntimeError("Error while serializing: I/O error: No space left on device (os error 28)")
        return real_save(path, *args, **kwargs)

    monkeypatch.setattr(genenv.checkpoint, "save_optimizers", filling_disk)
    run_dir = tmp_path / "run"
    overrides = ["epochs=3", "checkpoint_every_s=0", "eval_every=3", "threads=1", "progress=false"]
    assert main(["run", "--preset", "smoke", "--out", str(run_dir), *overrides]) == 1
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("genenv: no space left on device while writing") and "Traceback" not in err
    assert f"`genenv run --resume {run_dir}` continues from its last complete checkpoint" in err
    checkpoints = run_dir / "checkpoints"
    assert not [p for p in checkpoints.iterdir() if p.name.startswith(".build")]
    # the checkpoint before any epoch is whole; epoch 0's, the one the disk stopped, never became latest
    assert json.loads((checkpoints / "latest" / "state.json").read_text())["epoch"] == 0
    monkeypatch.setattr(genenv.checkpoint, "save_optimizers", real_save)
    assert main(["run", "--resume", str(run_dir)]) == 0
    assert [row["epoch"] for row in read_jsonl(run_dir / "metrics.jsonl")] == [0, 1, 2]


def test_overrides_may_stand_before_and_after_the_options(tmp_path):
    """Issue 58: `genenv run --preset smoke key=value --out DIR threads=1` stopped on "unrecognized arguments:
    threads=1"; now every KEY=VALUE counts, in order (the last setting of a key wins)."""
    import yaml
    run_dir = tmp_path / "mixed"
    done = _cli("run", "--preset", "smoke", "epochs=3", "threads=2", "--out", str(run_dir), "threads=1", "epochs=1")
    assert done.returncode == 0, done.stderr
    # a finished run ends on its result, not only its folder (issue 56)
    last = done.stdout.strip().splitlines()[-3:]
    assert last[0].startswith("held-out success ") and " -> " in last[0] and "agent rollouts" in last[0]
    assert last[1] == f"run folder: {run_dir}" and last[2] == f"report: genenv report {run_dir}"
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["epochs"] == 1 and saved["threads"] == 1
    wrong = _cli("run", "--preset", "smoke", "--out", str(tmp_path / "x"), "--bogus", "epochs=1")
    assert wrong.returncode == 2 and "unrecognized arguments: --bogus" in wrong.stderr
    assert not (tmp_path / "x").exists()

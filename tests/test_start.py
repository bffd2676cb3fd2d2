"""Issue 87: what can be known at a run's start is refused there, in one line naming the field, before a run folder
is made or a warm start paid for; `genenv models check` reports the same; a run says which engine decodes each
player; `genenv models random` writes a test folder (with a released template: what TRL's multi-turn needs)."""

import json
import subprocess
import sys

import pytest
import torch

from genenv.config import ConfigError, load_config
from genenv.models.architectures import random_folder

SMOKE = ["threads=1", "epochs=1"]


def _cli(*args, cwd):
    return subprocess.run([sys.executable, "-m", "genenv.cli", *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd)


def _in_process(*args, capsys):
    """The CLI's exit status, stdout and stderr, run in this process (a Python start and torch's import saved)."""
    from types import SimpleNamespace

    from genenv.cli import main
    capsys.readouterr()
    code = main(list(args))
    out, err = capsys.readouterr()
    return SimpleNamespace(returncode=code, stdout=out, stderr=err)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return random_folder("qwen2", tmp_path_factory.mktemp("models") / "qwen2", ["1+2=3", "hello world"] * 10,
                         head_dim=32)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the refusal is for one without")
def test_a_device_torch_cannot_use_is_one_line_before_any_folder(tmp_path, folder):
    """docs/models.md's own-model command on a machine without CUDA: one line naming `device` (it was a 60-line
    traceback after 4 s, leaving a half-made run folder); `models check` with that preset reports it, exit 1."""
    done = _cli("run", "--preset", "own-model", f"agent.model={folder}", f"env.model={folder}", "epochs=2",
                cwd=tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith(f"genenv: config error: device: 'cuda', and torch {torch.__version__} here ")
    assert lines[0].endswith("; set device=cpu (own-model on a CPU: docs/models.md)")
    assert not (tmp_path / "runs").exists()
    check = _cli("models", "check", str(folder), "--preset", "own-model", cwd=tmp_path)
    assert check.returncode == 1 and "problem" in check.stdout and "device: 'cuda'" in check.stdout


def test_a_missing_or_broken_model_folder_is_refused_before_the_run_folder(tmp_path, folder):
    from genenv.coevolve import run
    for model, words in ((str(tmp_path / "nope"), "no such folder"), (str(tmp_path), "not a Hugging Face model")):
        with pytest.raises(ConfigError, match=f"agent.model: .*{words}"):
            run(load_config("smoke", [*SMOKE, f"agent.model={model}"]), run_dir=tmp_path / "run", log=print)
        assert not (tmp_path / "run").exists()
    broken = tmp_path / "broken"   # a folder models check finds a problem in: the run refuses it, naming the field
    broken.mkdir()
    for item in folder.iterdir():
        (broken / item.name).write_bytes(item.read_bytes())
    config = json.loads((broken / "config.json").read_text())
    (broken / "config.json").write_text(json.dumps({**config, "vocab_size": 100}))
    with pytest.raises(ConfigError, match="env.model: the tokenizer has .* a token past them cannot be embedded"):
        run(load_config("smoke", [*SMOKE, f"env.model={broken}"]), run_dir=tmp_path / "run", log=print)
    assert not (tmp_path / "run").exists()


def test_a_start_that_fails_after_making_its_folder_removes_it_and_keeps_one_it_did_not_make(tmp_path, monkeypatch):
    """Whatever fails between the folder's making and the first checkpoint (here the seed round trip) leaves no
    half-made folder; a folder that was there before (a user's --out) stays."""
    from genenv import run_folder
    from genenv.coevolve import run

    def failing(*args, **kwargs):
        raise ConfigError("domain.name: a refusal found after the folder was made")
    monkeypatch.setattr(run_folder, "check_seed_round_trip", failing)
    with pytest.raises(ConfigError, match="after the folder was made"):
        run(load_config("smoke", SMOKE), run_dir=tmp_path / "made", log=print)
    assert not (tmp_path / "made").exists()
    (tmp_path / "mine").mkdir()
    with pytest.raises(ConfigError):
        run(load_config("smoke", SMOKE), run_dir=tmp_path / "mine", log=print)
    assert (tmp_path / "mine").is_dir()


def test_a_run_names_each_players_engine_first_and_config_yaml_records_it(tmp_path):
    from genenv.coevolve import run
    lines = []
    run(load_config("smoke", SMOKE), run_dir=tmp_path / "run", log=lines.append)
    assert lines[0] == ("samplers: agent: transformers on cpu (agent.sampler=transformers); simulator: transformers on "
                        "cpu (env.sampler=transformers)")
    assert lines[1] == ("band: the share of tasks with 0.00 <= p_hat <= 1.00 (curriculum_reward.alpha 0.5 +- k_min "
                        "0.5) (every task: a wide band, for checking the plumbing)")
    text = (tmp_path / "run" / "config.yaml").read_text()
    assert text.splitlines()[-2:] == ["# sampler of the agent: transformers on cpu (agent.sampler=transformers)",
                                      "# sampler of the simulator: transformers on cpu (env.sampler=transformers)"]


def test_models_random_writes_a_test_folder_and_its_template_decides_trl_multi_turn(tmp_path, capsys):
    """`genenv models random qwen2 --chat-template qwen2_5`: a folder whose template TRL takes tool calls through
    (models check says yes); the family's plain ChatML: a `TRL problem` line naming agent.model."""
    pytest.importorskip("trl", reason="trl is not installed (the trl extra)")
    for template, expected in (("qwen2_5", "yes: multihop's actions as tool calls"), (None, "no (its chat template "
                                                                                        "drops tool calls")):
        out = tmp_path / f"q-{template}"
        done = _in_process("models", "random", "qwen2", "--out", str(out), "--preset", "multihop-smoke",
                           *(["--chat-template", template] if template else []), capsys=capsys)
        assert done.returncode == 0 and done.stdout.startswith(f"{out}: a random qwen2 model"), done.stderr
        check = _in_process("models", "check", str(out), "--preset", "multihop-smoke", capsys=capsys)
        rows = {line[:16].strip(): line[16:] for line in check.stdout.splitlines()}
        assert rows["TRL tool calls"].startswith(expected), check.stdout
        assert ("TRL problem" in rows) == (template is None)
    again = _in_process("models", "random", "qwen2", "--out", str(tmp_path / "q-qwen2_5"), capsys=capsys)
    assert again.returncode == 2 and "already there" in again.stderr
    unknown = _in_process("models", "random", "qwen2", "--out", str(tmp_path / "x"), "--chat-template", "qwen9",
                          capsys=capsys)
    assert unknown.returncode == 2 and "'qwen9' is not a template TRL ships; choose one of" in unknown.stderr

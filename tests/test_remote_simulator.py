"""Issue 43, item 3: an OpenAI-compatible endpoint as a frozen simulator, against a fake server on the loopback
address (what vLLM, SGLang and llama.cpp's server answer), its error paths included."""

import json

import pytest
from fake_endpoint import Endpoint

from genenv.coevolve import run
from genenv.config import ConfigError, load_config
from genenv.io import read_jsonl

pytest.importorskip("openai")


def _config(url, *more):
    return load_config("smoke", ["curriculum=random", "env.backend=openai", f"env.openai.base_url={url}",
                                 "env.openai.model=fake-large", *more])


def test_a_frozen_endpoint_writes_the_tasks(endpoint, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    lines = []
    run_dir = run(_config(endpoint), tmp_path / "run", log=lines.append)
    rows = read_jsonl(run_dir / "metrics.jsonl")
    assert len(rows) == 3 and sum(r["valid"] for r in rows) > 0
    requests = Endpoint.requests
    assert len(requests) == sum(r["generated"] for r in rows)
    assert {r["path"] for r in requests} == {"/v1/chat/completions"} and {r["model"] for r in requests} == \
        {"fake-large"}
    assert requests[0]["auth"] == "Bearer sk-secret-value" and len({r["seed"] for r in requests}) > 1
    samples = read_jsonl(run_dir / "samples" / "epoch_0.jsonl")
    assert all(s["generated"] == "+".join(reversed(s["seed"].split("+"))) for s in samples)
    assert json.loads((run_dir / "checkpoints" / "initial" / "env" / "remote.json").read_text())["model"] == \
        "fake-large"
    written = "".join(p.read_text(errors="ignore") for p in run_dir.rglob("*") if p.is_file())
    assert "sk-secret-value" not in written
    assert any("fake-large at" in line for line in lines)


def test_a_resumed_run_goes_on_with_the_endpoint(endpoint, tmp_path):
    run_dir = run(_config(endpoint, "epochs=2"), tmp_path / "run", log=lambda _: None)
    cfg = _config(endpoint, "epochs=3")
    run(cfg, run_dir, resume=True, log=lambda _: None)
    assert [r["epoch"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [0, 1, 2]


@pytest.mark.parametrize("mode, reason", [("error", "simulator request failed: InternalServerError"),
                                          ("slow", "simulator request failed: APITimeoutError")])
def test_a_failing_endpoint_gives_invalid_generations_not_a_crash(endpoint, tmp_path, mode, reason):
    Endpoint.mode = mode
    lines = []
    cfg = _config(endpoint, "epochs=1", "env.openai.retries=0", "env.openai.timeout_s=0.3")
    run_dir = run(cfg, tmp_path / "run", log=lines.append)
    row = read_jsonl(run_dir / "metrics.jsonl")[0]
    assert row["valid"] == 0 and row["generated"] > 0
    assert list(row["invalid_reasons"]) and all(k.startswith(reason) for k in row["invalid_reasons"])
    assert any(line.startswith("warning:") and "simulator request failed" in line for line in lines)


def test_text_no_domain_parses_is_counted_like_any_malformed_task(endpoint, tmp_path):
    Endpoint.mode = "garbage"
    row = read_jsonl(run(_config(endpoint, "epochs=1"), tmp_path / "run", log=lambda _: None) /
                     "metrics.jsonl")[0]
    assert row["valid"] == 0 and not any("request failed" in k for k in row["invalid_reasons"])


def test_a_curriculum_that_trains_the_simulator_is_refused(tmp_path):
    cfg = load_config("smoke", ["env.backend=openai", "env.openai.model=x"])
    with pytest.raises(ConfigError, match="env.backend: 'openai' is a frozen simulator"):
        run(cfg, tmp_path / "run", log=lambda _: None)
    with pytest.raises(ConfigError, match="env.openai.model: name the model"):
        run(load_config("smoke", ["curriculum=random", "env.backend=openai"]), tmp_path / "run2",
            log=lambda _: None)

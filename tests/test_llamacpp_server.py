"""Issue 43, item 3 end to end: llama.cpp's own OpenAI-compatible server (llama-cpp-python's server extra)
serves SmolLM2 on the loopback address and writes a run's tasks as its frozen simulator. The fake server of
test_remote_simulator.py covers the error paths; this one checks the real protocol: every generation is a real
request answered by the model, counted valid or invalid with its reason, and the same seed writes the same tasks."""

import pytest
from llama_server import SERVED_NAME

from genenv.coevolve import run
from genenv.config import load_config
from genenv.io import read_jsonl

pytestmark = pytest.mark.slow
pytest.importorskip("openai")


def _config(url, *more):
    return load_config("smoke", ["curriculum=random", "env.backend=openai", f"env.openai.base_url={url}",
                                 f"env.openai.model={SERVED_NAME}", "epochs=2", "seeds_per_epoch=4",
                                 "env.openai.timeout_s=60", *more])


def test_llama_cpp_server_writes_a_runs_tasks(llama_server, tmp_path):
    url, log = llama_server
    before = log.read_text().count("POST /v1/chat/completions")
    run_dir = run(_config(url), tmp_path / "a", log=lambda _: None)
    rows = read_jsonl(run_dir / "metrics.jsonl")
    assert [r["epoch"] for r in rows] == [0, 1]
    assert [r["generated"] for r in rows] == [8, 8]   # seeds_per_epoch 4 x the smoke preset's 2 variations
    generated = 16
    # every generation was a request the server answered (200), none failed
    answered = log.read_text().count('"POST /v1/chat/completions HTTP/1.1" 200')
    assert answered - before == generated
    for row in rows:
        assert row["valid"] + sum(row["invalid_reasons"].values()) == row["generated"]
        assert not any("request failed" in reason for reason in row["invalid_reasons"])
    samples = read_jsonl(run_dir / "samples" / "epoch_0.jsonl")
    assert len(samples) == 8 and all(isinstance(s["generated"], str) for s in samples)
    print("SmolLM2 wrote:", [s["generated"] for s in samples], "valid:", [r["valid"] for r in rows])
    # the same seed writes the same tasks: the request seeds come from the run's seed
    again = run(_config(url), tmp_path / "b", log=lambda _: None)
    assert [s["generated"] for s in read_jsonl(again / "samples" / "epoch_0.jsonl")] == \
        [s["generated"] for s in samples]

"""Issue 94, item 3: a Hugging Face Hub id wherever a model is named (``agent.model``, ``env.model``, ``--model``),
resolved through huggingface_hub's own cache: downloaded where the Hub answers, read from the cache with
``HF_HUB_OFFLINE=1``, refused by the preflight naming the id when neither. The Hub is tests/fake_hub.py on
127.0.0.1 serving a random folder, so the cache is laid out by ``huggingface_hub.snapshot_download`` itself."""

import json
import os
import subprocess
import sys

import pytest
import yaml
from fake_hub import FakeHub

from genenv.config import load_config
from genenv.models.architectures import random_folder

REPO = "acme/tiny-llama"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """(the fake Hub serving a random Llama folder as REPO, the Hugging Face cache folder the tests fill)."""
    root = tmp_path_factory.mktemp("hub")
    texts = [f"{a}+{b}={a + b}" for a in range(40) for b in range(10)]
    folder = random_folder("llama", root / "llama", texts, hidden_size=64, heads=2)
    hub = FakeHub(folder, REPO, COMMIT)
    yield hub, root / "hf-cache"
    hub.close()


def _genenv(served, *args, offline=False):
    hub, cache = served
    env = {**os.environ, "HF_HUB_CACHE": str(cache), "HF_ENDPOINT": hub.url, "HF_HUB_DISABLE_TELEMETRY": "1"}
    env.pop("HF_HUB_OFFLINE", None)
    if offline:
        env["HF_HUB_OFFLINE"] = "1"
    return subprocess.run([sys.executable, "-m", "genenv.cli", *args], capture_output=True, text=True, env=env,
                          timeout=600)


def test_a_hub_id_is_downloaded_once_then_read_offline_and_an_absent_one_is_refused_naming_it(served, tmp_path):
    eval_args = ["eval", "--benchmark", "heldout", "--model", REPO, "--preset", "smoke", "domain.heldout_per_level=2"]
    online = _genenv(served, *eval_args, "--out", str(tmp_path / "online"))
    assert online.returncode == 0, online.stderr
    hub, cache = served
    snapshot = cache / "models--acme--tiny-llama" / "snapshots" / COMMIT
    assert (snapshot / "config.json").is_file() and (snapshot / "model.safetensors").is_file()
    assert (cache / "models--acme--tiny-llama" / "refs" / "main").read_text() == COMMIT
    downloads = [path for method, path in hub.requests if method == "GET" and "/resolve/" in path]
    offline = _genenv(served, *eval_args, "--out", str(tmp_path / "offline"), offline=True)
    assert offline.returncode == 0, offline.stderr
    assert [path for method, path in hub.requests if method == "GET" and "/resolve/" in path] == downloads
    scores = [json.loads((tmp_path / side / "scores.json").read_text()) for side in ("online", "offline")]
    assert scores[0]["heldout_success"] == scores[1]["heldout_success"] and scores[0]["model"] == REPO
    # neither in the cache nor downloadable: refused at the preflight, naming the id and the field
    for offline, why in ((True, "HF_HUB_OFFLINE is set"), (False, "the Hub cannot give it")):
        out = tmp_path / f"absent-{offline}"
        refused = _genenv(served, "run", "--preset", "smoke", "epochs=1", "agent.model=acme/absent", "--out",
                          str(out), offline=offline)
        assert refused.returncode == 2
        assert ("genenv: config error: agent.model: acme/absent: not a folder here nor in the Hugging Face cache"
                in refused.stderr)
        assert why in refused.stderr and not out.exists()


def test_the_warm_start_key_and_the_run_folder_record_the_resolved_revision(served, tmp_path, monkeypatch):
    """With HF_HUB_OFFLINE=1 and the cache the test above filled (huggingface_hub's layout), the id resolves to
    its commit: the warm start's cache key holds it and config.yaml names it."""
    from huggingface_hub import constants

    from genenv.checkpoint import save_config
    from genenv.domains import make_domain
    from genenv.models.registry import hub_revision, resolve_model
    from genenv.preflight import survey
    from genenv.warmstart import _cache_key
    hub, cache = served
    if not (cache / "models--acme--tiny-llama").exists():   # (run alone: fill the cache as the test above does)
        assert _genenv(served, "models", "check", REPO, "--preset", "smoke").returncode == 0
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    assert resolve_model(REPO) == cache / "models--acme--tiny-llama" / "snapshots" / COMMIT
    assert hub_revision(REPO) == COMMIT and hub_revision(f"{REPO}@main") == COMMIT
    cfg = load_config("smoke", [f"agent.model={REPO}"])
    assert survey(cfg).problems == []
    domain = make_domain("addition")
    by_path = load_config("smoke", [f"agent.model={resolve_model(REPO)}"])
    assert _cache_key("agent", cfg, cfg.agent, domain) != _cache_key("agent", by_path, by_path.agent, domain)
    save_config(cfg, tmp_path)
    text = (tmp_path / "config.yaml").read_text()
    assert yaml.safe_load(text)["agent"]["model"] == REPO
    assert f"# model of the agent: {REPO} at revision {COMMIT}" in text.splitlines()


def test_the_warm_start_key_of_an_id_not_in_the_cache_asks_the_hub_its_commit_and_downloads_nothing(
        served, tmp_path, monkeypatch):
    """The key needs the commit a branch resolves to, not the weights: with an empty cache it is asked of the Hub
    (its metadata), the same key as with the model cached, and no file is fetched; offline it is a
    ModelNotAvailable naming the id."""
    from huggingface_hub import constants

    from genenv.domains import make_domain
    from genenv.models.registry import ModelNotAvailable
    from genenv.warmstart import _cache_key
    hub, cache = served
    if not (cache / "models--acme--tiny-llama").exists():   # (run alone: fill the cache as the first test does)
        assert _genenv(served, "models", "check", REPO, "--preset", "smoke").returncode == 0
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", hub.url)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    cfg, domain = load_config("smoke", [f"agent.model={REPO}"]), make_domain("addition")
    cached = _cache_key("agent", cfg, cfg.agent, domain)
    empty = tmp_path / "empty-cache"
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(empty))
    asked = len(hub.requests)
    assert _cache_key("agent", cfg, cfg.agent, domain) == cached
    assert hub.requests[asked:] and not [path for _, path in hub.requests[asked:] if "/resolve/" in path]
    assert not list(empty.rglob("*.safetensors"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(ModelNotAvailable, match=REPO):
        _cache_key("agent", cfg, cfg.agent, domain)

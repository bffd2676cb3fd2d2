import os
import shutil

# (before torch starts its OpenMP threads: `make test`'s two processes on two cores; the Makefile says why)
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

os.environ.setdefault("GENENV_CACHE", os.path.join(os.path.dirname(__file__), "..", ".pytest_cache", "genenv"))
torch.set_num_threads(1)

# the fake OpenAI-compatible endpoint (fixture `endpoint`) of the remote-simulator and TRL tests; llama.cpp's real
# server on SmolLM2 (fixture `llama_server`) of the frozen-simulator and verifiers tests
pytest_plugins = ["fake_endpoint", "llama_server"]


@pytest.fixture
def tiny_policy():
    """A small untrained char-level policy over the addition alphabet."""
    from genenv.config import TinyModelConfig
    from genenv.models.tiny import build_tiny_policy
    cfg = TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, max_positions=48)
    return build_tiny_policy(cfg, "0123456789+=|>s? ", seed=0)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


@pytest.fixture
def disposable_dir(tmp_path):
    """tmp_path, deleted when the test ends: for tests that write hundreds of MB (a SmolLM2 checkpoint, a GGUF).
    pytest keeps the last three sessions' tmp_path folders; three sessions of these files took 6 GB and a full
    disk failed a CI run."""
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


LOW_DISK_BYTES = 6 << 30   # the SmolLM2 checkpoint and GGUF tests write about 2 GB at once


def _free_disk(path: str) -> int:
    return shutil.disk_usage(path).free


def pytest_report_header(config):
    import tempfile
    where = tempfile.gettempdir()
    return f"free disk where tests write ({where}): {_free_disk(where) / (1 << 30):.1f} GB"


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """A failed session on a nearly full disk says so last, where a CI log's tail is read: its errors
    ('No space left on device', 'could not create numbered dir') otherwise look like test failures."""
    import tempfile
    where = tempfile.gettempdir()
    free = _free_disk(where)
    if exitstatus != 0 and free < LOW_DISK_BYTES:
        terminalreporter.write_line(f"note: only {free / (1 << 30):.1f} GB free in {where}; tests that write model "
                                    "files fail on a full disk. Free space (old run folders, caches) and re-run.",
                                    yellow=True)

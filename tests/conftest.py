import os
import shutil

import numpy as np
import pytest
import torch

os.environ.setdefault("GENENV_CACHE", os.path.join(os.path.dirname(__file__), "..", ".pytest_cache", "genenv"))
torch.set_num_threads(1)


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

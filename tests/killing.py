"""Killing a run mid-way for the resume tests."""

import json
import os
import signal
import time
from pathlib import Path


def kill_after_checkpoint(proc, run_dir: Path, epochs: int, timeout: float = 120, group: bool = False) -> int:
    """Wait until ``run_dir``'s latest checkpoint holds ``epochs`` epochs, SIGKILL the run (with ``group``, its
    whole process group: the driver and a local Ray it started) and return the epochs its checkpoint holds."""
    state_file = run_dir / "checkpoints" / "latest" / "state.json"
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if json.loads(state_file.read_text())["epoch"] >= epochs:
                break
        except (FileNotFoundError, json.JSONDecodeError, KeyError):
            pass
        time.sleep(0.01)
    if group:
        os.killpg(proc.pid, signal.SIGKILL)
    else:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    done = state_file if state_file.exists() else run_dir / "checkpoints" / "latest.old" / "state.json"
    return json.loads(done.read_text())["epoch"]

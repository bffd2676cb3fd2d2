"""Per-phase peak resident memory (Linux's resettable VmHWM)."""

import sys

import pytest

MB = 2**20


PEAK_FOLLOWS_AND_RESETS = """
import numpy as np
from genenv.memory import current_rss_bytes, peak_rss_bytes, reset_peak_rss
MB = 2**20
assert reset_peak_rss()
base = peak_rss_bytes()
block = np.ones(300 * MB // 8)  # 300 MB, every page touched
high = peak_rss_bytes()
assert high - base > 250 * MB and current_rss_bytes() > base + 250 * MB, (base, high)
del block
assert peak_rss_bytes() > high - 8 * MB  # the peak remembers (to within the kernel's per-thread batching)
assert reset_peak_rss()
assert peak_rss_bytes() < high - 200 * MB  # and forgets once reset
print("ok")
"""


@pytest.mark.skipif(sys.platform != "linux", reason="the peak resets through /proc/self/clear_refs (Linux only)")
def test_the_peak_follows_an_allocation_and_resets():
    """In a fresh interpreter: in the test process, memory earlier tests freed but the allocator kept resident
    can take the allocation without the resident set growing (seen after the SmolLM2 GGUF tests)."""
    import subprocess
    done = subprocess.run([sys.executable, "-c", PEAK_FOLLOWS_AND_RESETS], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def _in_a_forked_child(measure) -> int:
    """Run ``measure()`` (returning an int) in a forked child and return its result to the parent."""
    import os
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.write(write, str(measure()).encode())
        finally:
            os._exit(0)
    os.close(write)
    result = int(os.read(read, 64))
    os.waitpid(pid, 0)
    return result


def _in_a_fresh_interpreter(body: str) -> str:
    """Run ``body`` (after the fork helper above and numpy) in a new interpreter; its last line printed. The
    suite's own process may hold memory earlier tests freed but the allocator kept resident, which a forked
    child's allocation can reuse without its resident set growing (seen after the SmolLM2 GGUF tests)."""
    import inspect
    import subprocess
    code = "\n".join(["import os, numpy as np", "from genenv.memory import current_rss_bytes, peak_rss_bytes, "
                      "reset_peak_rss", "MB = 2**20", inspect.getsource(_in_a_forked_child), body])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/status and fork (Linux only)")
def test_a_forked_child_reads_its_own_status_not_its_parents():
    body = """
current_rss_bytes()  # the parent's descriptor is open now

def growth():  # the child grows by 200 MB: its own status shows it, the parent's would not
    before = current_rss_bytes()
    block = np.ones(200 * MB // 8)
    grown = current_rss_bytes() - before
    del block
    return grown
print(_in_a_forked_child(growth))
"""
    assert int(_in_a_fresh_interpreter(body)) > 150 * MB


@pytest.mark.skipif(sys.platform != "linux", reason="/proc/self/clear_refs and fork (Linux only)")
def test_a_forked_child_resets_its_own_peak_not_its_parents():
    body = """
assert reset_peak_rss()  # the parent's clear_refs descriptor is open now

def drop():  # the child peaks 300 MB above its start, frees it and resets: its own peak must drop
    block = np.ones(300 * MB // 8)
    high = peak_rss_bytes()
    del block
    reset_peak_rss()
    return high - peak_rss_bytes()
print(_in_a_forked_child(drop))
"""
    assert int(_in_a_fresh_interpreter(body)) > 200 * MB

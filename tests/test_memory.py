"""Per-phase peak resident memory (Linux's resettable VmHWM)."""

import sys

import numpy as np
import pytest

from genenv.memory import current_rss_bytes, peak_rss_bytes, reset_peak_rss

MB = 2**20


@pytest.mark.skipif(sys.platform != "linux", reason="the peak resets through /proc/self/clear_refs (Linux only)")
def test_the_peak_follows_an_allocation_and_resets():
    assert reset_peak_rss()
    base = peak_rss_bytes()
    block = np.ones(300 * MB // 8)  # 300 MB, every page touched
    high = peak_rss_bytes()
    assert high - base > 250 * MB and current_rss_bytes() > base + 250 * MB
    del block
    assert peak_rss_bytes() > high - 8 * MB  # the peak remembers (to within the kernel's per-thread batching)
    assert reset_peak_rss()
    assert peak_rss_bytes() < high - 200 * MB  # and forgets once reset

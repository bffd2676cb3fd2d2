"""The test suite's own harness (tests/conftest.py)."""
import conftest


class _Reporter:
    def __init__(self):
        self.lines = []

    def write_line(self, line, **markup):
        self.lines.append(line)


def test_a_failed_session_on_a_nearly_full_disk_says_so_last(monkeypatch):
    """Session 48's CI failed with 'No space left on device' in five tests and nothing naming the disk."""
    monkeypatch.setattr(conftest, "_free_disk", lambda path: 3 << 30)
    failed, passed = _Reporter(), _Reporter()
    conftest.pytest_terminal_summary(failed, 1, None)
    conftest.pytest_terminal_summary(passed, 0, None)
    assert len(failed.lines) == 1 and failed.lines[0].startswith("note: only 3.0 GB free in ")
    assert passed.lines == []
    monkeypatch.setattr(conftest, "_free_disk", lambda path: 40 << 30)
    roomy = _Reporter()
    conftest.pytest_terminal_summary(roomy, 1, None)
    assert roomy.lines == []

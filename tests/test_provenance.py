"""What code made a run (genenv.provenance): the source fingerprint and the git state."""

import shutil
import subprocess

import pytest

from genenv.provenance import code_changes, git_state, source_fingerprint


def test_the_source_fingerprint_changes_with_any_source_file_and_ignores_caches(tmp_path):
    (tmp_path / "pkg" / "configs").mkdir(parents=True)
    (tmp_path / "pkg" / "a.py").write_text("x = 1\n")
    (tmp_path / "pkg" / "configs" / "p.yaml").write_text("epochs: 3\n")
    first = source_fingerprint(tmp_path / "pkg")
    (tmp_path / "pkg" / "__pycache__").mkdir()
    (tmp_path / "pkg" / "__pycache__" / "a.cpython-311.py").write_text("compiled")
    (tmp_path / "pkg" / "notes.txt").write_text("not code")
    assert source_fingerprint(tmp_path / "pkg") == first
    (tmp_path / "pkg" / "configs" / "p.yaml").write_text("epochs: 4\n")
    second = source_fingerprint(tmp_path / "pkg")
    assert second != first and len(second) == 16
    (tmp_path / "pkg" / "configs" / "p.yaml").rename(tmp_path / "pkg" / "configs" / "q.yaml")   # a rename counts
    assert source_fingerprint(tmp_path / "pkg") not in (first, second)


@pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
def test_git_state_names_the_commit_and_uncommitted_changes(tmp_path):
    assert git_state(tmp_path) is None   # not a checkout
    def git(*args):
        return subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True,
                              text=True).stdout.strip()
    git("init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    git("add", "a.py")
    git("-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "one")
    head = git("rev-parse", "HEAD")
    assert git_state(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "untracked.py").write_text("y = 2\n")
    assert git_state(tmp_path) == {"commit": head, "dirty": False}   # untracked files are not the code that ran
    (tmp_path / "a.py").write_text("x = 2\n")
    assert git_state(tmp_path) == {"commit": head, "dirty": True}


def test_code_changes_lists_each_key_that_differs():
    before = {"source": "a", "torch": "2.13.0", "git": {"commit": "c1", "dirty": False}}
    now = {"source": "b", "torch": "2.13.0", "git": {"commit": "c1", "dirty": True}, "numpy": "2.4"}
    assert code_changes(before, now) == {"git": ({"commit": "c1", "dirty": False}, {"commit": "c1", "dirty": True}),
                                         "numpy": (None, "2.4"), "source": ("a", "b")}
    assert code_changes(before, dict(before)) == {}

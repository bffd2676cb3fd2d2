"""Which code made a run: ``code.json`` in the run folder, and what a resume with other code changed.

A run's numbers are reproducible for the same seed *and the same code*. The run folder records, when the run
starts, genenv's version, a fingerprint of its source (every ``.py`` and ``.yaml`` file of the installed package:
any edit changes it, also outside a git checkout) and a hash of each of those files, the git commit and whether
the checkout had uncommitted changes (when the package sits in one), and the versions of Python and of the
libraries whose arithmetic the metrics depend on. A resume compares the code it runs with the code that last ran
the folder; where they differ it says so in the log and appends the change, with the epoch it resumed at, to
``code_changes.jsonl``: the epochs after that come from other code, and need not equal what an uninterrupted run
would have given.
"""

from __future__ import annotations

import hashlib
import json
import platform
import subprocess
import time
from importlib import metadata
from pathlib import Path

import genenv
from genenv.io import append_jsonl, atomic_write_json, read_jsonl

CODE_FILE = "code.json"
CODE_HISTORY = "code_changes.jsonl"
PACKAGE_ROOT = Path(genenv.__file__).resolve().parent
# the libraries whose arithmetic (or tokenisation) the metrics depend on
LIBRARIES = ("torch", "numpy", "transformers", "tokenizers")


def _source_paths(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.suffix in (".py", ".yaml") and "__pycache__" not in p.parts)


def source_fingerprint(root: Path = PACKAGE_ROOT) -> str:
    """sha256 (first 16 hex digits) over every ``.py`` and ``.yaml`` file under ``root``: relative path and
    bytes, in sorted order."""
    digest = hashlib.sha256()
    for path in _source_paths(root):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def source_files(root: Path = PACKAGE_ROOT) -> dict[str, str]:
    """Each file :func:`source_fingerprint` covers, by relative path: the first 12 hex digits of its sha256 (what
    lets a report name the files in which two fingerprints differ)."""
    return {path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()[:12]
            for path in _source_paths(root)}


def files_that_differ(files: dict[str, str], other: dict[str, str]) -> list[str]:
    """The paths present in only one of two :func:`source_files` maps or with different contents, sorted."""
    return sorted(path for path in set(files) | set(other) if files.get(path) != other.get(path))


def name_files(paths: list[str], shown: int = 6) -> str:
    """The first ``shown`` of ``paths`` for a sentence, ``, ...`` when there are more."""
    return ", ".join(paths[:shown]) + (", ..." if len(paths) > shown else "")


def git_state(root: Path = PACKAGE_ROOT) -> dict | None:
    """The commit of the git checkout holding ``root`` and whether its tracked files there have uncommitted
    changes; None when ``root`` is not in a checkout (an installed wheel) or git is not available."""
    try:
        def git(*args: str) -> str:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10,
                                  check=True).stdout.strip()
        commit = git("rev-parse", "HEAD")
        dirty = bool(git("status", "--porcelain", "--untracked-files=no", "--", "."))
    except (OSError, subprocess.SubprocessError):
        return None
    return {"commit": commit, "dirty": dirty}


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def code_version() -> dict:
    """What :data:`CODE_FILE` records: genenv's version, its source fingerprint, its git state, Python's and the
    :data:`LIBRARIES`' versions, and each source file's hash (``files``)."""
    return {"genenv": genenv.__version__, "source": source_fingerprint(), "git": git_state(),
            "python": platform.python_version(), **{name: _version(name) for name in LIBRARIES},
            "files": source_files()}


def record_code(run_dir: Path) -> None:
    """Write the code that starts a run (``code.json``)."""
    atomic_write_json(Path(run_dir) / CODE_FILE, code_version())


def code_history(run_dir: Path) -> tuple[dict | None, list[dict]]:
    """The code that started ``run_dir`` (``code.json``; None for a folder made before genenv recorded it) and the
    changes its resumes recorded (``code_changes.jsonl`` rows, oldest first)."""
    run_dir = Path(run_dir)
    if not (run_dir / CODE_FILE).exists():
        return None, []
    history = run_dir / CODE_HISTORY
    return json.loads((run_dir / CODE_FILE).read_text()), read_jsonl(history) if history.exists() else []


def last_code(run_dir: Path) -> dict | None:
    """The code that last ran ``run_dir``: the code that started it updated by the changes its resumes recorded
    (None for a folder made before genenv recorded it)."""
    code, changes = code_history(run_dir)
    for row in changes:
        code.update({key: new for key, (_, new) in row["changes"].items()})
        if "files" in row:
            code["files"] = row["files"]
    return code


def code_changes(before: dict, now: dict) -> dict[str, tuple]:
    """The keys whose value differs, ``key: (before, now)``; the git state compares by commit and dirtiness. The
    per-file hashes (``files``) are left out: ``source`` already says whether any file changed."""
    return {key: (before.get(key), now.get(key)) for key in sorted((set(before) | set(now)) - {"files"})
            if before.get(key) != now.get(key)}


def check_code_on_resume(run_dir: Path, epoch: int, log) -> dict[str, tuple]:
    """On resume: the code now against the code that last ran ``run_dir``; a difference is logged and appended
    to ``code_changes.jsonl`` with ``epoch`` (a source change also with the package files that differ and the new
    per-file hashes). Returns the changes (empty: the same code)."""
    now = code_version()
    before = last_code(run_dir)
    if before is None:
        log(f"note: {run_dir} does not record the code that started it (made before code.json); recording the "
            "code that resumes it")
        record_code(run_dir)
        return {}
    changes = code_changes(before, now)
    if not changes:
        return changes
    row = {"resumed_at_epoch": epoch, "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
           "changes": {key: list(pair) for key, pair in changes.items()}}
    listed = ", ".join(f"{key} {old!r} -> {new!r}" for key, (old, new) in changes.items())
    if "source" in changes and before.get("files") and now.get("files"):
        row["files_that_differ"] = paths = files_that_differ(before["files"], now["files"])
        row["files"] = now["files"]
        listed += f"; files that differ: {name_files(paths)}"
    if set(changes) == {"git"}:   # another commit, the same package source and libraries: the same arithmetic
        log(f"note: {run_dir} resumes at epoch {epoch} from another git state ({listed}) with the same package "
            f"source (fingerprint {now['source']}) and libraries (code_changes.jsonl)")
    else:
        log(f"warning: {run_dir} resumes at epoch {epoch} with other code than ran it ({listed}): the epochs from "
            "here on need not equal an uninterrupted run's (code_changes.jsonl)")
    append_jsonl(Path(run_dir) / CODE_HISTORY, row)
    return changes

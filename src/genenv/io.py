"""Atomic file writes (temp file + rename) and small JSON helpers."""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

import numpy as np

try:
    import fcntl
except ImportError:   # Windows: cache entries are not locked
    fcntl = None


def cache_root() -> Path:
    """Where genenv caches warm starts and prepared models: ``$GENENV_CACHE``, else ``~/.cache/genenv``."""
    return Path(os.environ.get("GENENV_CACHE", Path.home() / ".cache" / "genenv"))


@contextmanager
def cache_entry_lock(folder: Path):
    """Hold an exclusive ``flock`` on ``<cache>/locks/<entry>.lock`` (waited for; kept apart from the entries, which
    callers list) while the cache entry ``folder`` (``<cache>/models/<entry>``) is looked up and built: two processes
    that need it (the ranks of ``torchrun --nproc_per_node 2``, two runs started together) build it once, the second
    loading what the first saved, instead of writing one journal and one folder at the same time. The kernel drops
    the lock when its process dies, so a killed build never blocks the next; the file stays (a few bytes). Without
    ``fcntl`` (Windows) nothing is locked."""
    if fcntl is None:
        yield
        return
    locks = folder.parent.parent / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with open(locks / f"{folder.name}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield   # (closing the descriptor releases the lock)


def atomic_write_text(path: str | Path, text: str, durable: bool = True) -> None:
    """Write ``text`` to a temp file beside ``path``, then rename it over ``path``: a reader (or a killed
    process) sees the old file or the new one, never half of it. ``durable``: fsync before the rename, so it
    also survives a power cut; a caller that syncs at its own checkpoints (:func:`fsync_paths`) passes False."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~current_umask())   # mkstemp makes 0600; the file gets the mode open() would give
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


_UMASK_LOCK = threading.Lock()


def current_umask() -> int:
    """The process's umask (read by setting it and back, under a lock: there is no other way to read it)."""
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


def atomic_write_json(path: str | Path, data) -> None:
    atomic_write_text(path, json.dumps(data, indent=1, default=_jsonable))


def _line(row) -> str:
    """One JSON Lines row: ``json.dumps(row, default=_jsonable)``, with one encoder for every row (``json.dumps``
    with an argument builds a new encoder per call; the loop writes hundreds of rows an epoch)."""
    return _LINE_ENCODER.encode(row) + "\n"


def atomic_write_jsonl(path: str | Path, rows, durable: bool = True) -> None:
    atomic_write_text(path, "".join(map(_line, rows)), durable=durable)


def append_jsonl(path: str | Path, row: dict, durable: bool = True) -> None:
    with open(path, "a") as handle:
        handle.write(_line(row))
        handle.flush()
        if durable:
            os.fsync(handle.fileno())


FSYNC_THREADS = 16


def fsync_paths(paths, include_parents: bool = True) -> None:
    """Flush files written with ``durable=False`` (and, with ``include_parents``, the folders holding them, for
    their renames) to disk.

    The fsyncs run in parallel threads (fsync releases the GIL): the file system then commits them in one
    journal transaction instead of one each, so 31 files take ~5 ms instead of ~100 ms on ext4 (measured on
    this project's machines), which was the largest single cost of the tiny default's checkpoints."""
    files = [path for path in map(Path, paths) if path.exists()]
    targets = list(dict.fromkeys([*files, *(path.parent for path in files)] if include_parents else files))
    if len(targets) <= 1:
        for path in targets:
            _fsync(path)
        return
    with ThreadPoolExecutor(max_workers=min(FSYNC_THREADS, len(targets))) as pool:
        list(pool.map(_fsync, targets))  # list(): re-raises the first error


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def read_jsonl(path: str | Path) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            break  # a torn last line from a killed process: everything before it is intact
    return rows


def read_jsonl_rows(path: str | Path):
    """``(line number, object)`` of every non-blank line of a user's JSON Lines file; a line that is not a JSON
    object raises ValueError naming the file and line."""
    path = Path(path)
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: not JSON ({error.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{number}: not a JSON object")
        yield number, row


def atomic_replace_dir(build: Path, target: Path) -> None:
    """Swap a fully written folder ``build`` in as ``target``; a crash leaves target or target.old intact."""
    old = target.with_name(target.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if target.exists():
        os.replace(target, old)
    os.replace(build, target)
    if old.exists():
        shutil.rmtree(old)


def build_then_swap(target: Path, write: Callable[[Path], None], build_name: str | None = None,
                    sync_first=()) -> None:
    """Write a whole folder into a fresh sibling build folder (``write(build)``), then swap it in as ``target``
    (:func:`atomic_replace_dir`): readers see the old folder or the new one, never a half-written one.

    Durable: every file of the build (and the files in ``sync_first``, written unsynced elsewhere and covered
    by this folder) is fsynced in one parallel batch before the swap, the parent folder after it, so a power
    cut never leaves ``target`` naming files whose bytes never reached the disk."""
    build = _write_build(target.with_name(build_name or f".{target.name}.build"), write)
    fsync_paths([*sync_first, *_files_under(build)])
    atomic_replace_dir(build, target)
    fsync_paths([target.parent], include_parents=False)


def publish_dir(target: Path, write: Callable[[Path], None]) -> None:
    """Write a cache folder once: into a build folder of this process (``write(build)``), fsynced, then renamed
    to ``target``, unless another process published ``target`` first (theirs is kept: the same inputs make the
    same folder)."""
    build = _write_build(target.with_name(f"{target.name}.build{os.getpid()}"), write)
    if target.exists():
        shutil.rmtree(build)
        return
    fsync_paths(_files_under(build))
    try:
        os.replace(build, target)
    except OSError:
        if not target.exists():
            raise
        shutil.rmtree(build)          # another process published it between the check above and the rename
        return
    fsync_paths([target.parent], include_parents=False)


def _files_under(folder: Path) -> list[Path]:
    """Every file below ``folder`` (fsync_paths adds the folders holding them)."""
    return sorted(path for path in folder.rglob("*") if path.is_file())


def _write_build(build: Path, write: Callable[[Path], None]) -> Path:
    """An empty ``build`` folder (a leftover of a killed writer is removed first), filled by ``write``."""
    if build.exists():
        shutil.rmtree(build)
    build.mkdir(parents=True)
    try:
        write(build)
    except Exception as error:
        shutil.rmtree(build, ignore_errors=True)   # half a build is never read and holds the space it took
        if no_space_left(error):   # safetensors says so in its own error type
            raise OSError(errno.ENOSPC, f"no space left on device while writing {build.parent}") from error
        raise
    umask_modes(_files_under(build))
    return build


def no_space_left(error: BaseException) -> bool:
    """The disk (or quota) is full: an OSError with ENOSPC/EDQUOT, or a library's error that wraps one."""
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    return "No space left on device" in str(error) or "Disk quota exceeded" in str(error)


def umask_modes(paths) -> None:
    """Give ``paths`` the mode ``open()`` would give a new file under the umask: some writers (safetensors) make
    their files 0600, which a collaborator cannot read."""
    mode = 0o666 & ~current_umask()
    for path in paths:
        os.chmod(path, mode)


def _jsonable(value):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


_LINE_ENCODER = json.JSONEncoder(default=_jsonable)   # what json.dumps(row, default=_jsonable) builds each call


def read_pool_log(path: Path, size: int) -> list[dict]:
    """The events of a pool log (``checkpoints/*_pool.log.jsonl``) in its first ``size`` bytes: what the
    checkpoint that recorded ``size`` covers."""
    if not path.exists():
        return []
    with open(path, "rb") as handle:
        data = handle.read(size)
    return [json.loads(line) for line in data.decode().splitlines() if line]


def run_folders(path: str | Path) -> list[Path]:
    """``path`` itself when it is a run folder (config.yaml), else the runs of a comparison folder
    (``runs/<arm>/seed<k>/``), sorted; [] for anything else."""
    path = Path(path)
    if (path / "config.yaml").exists():
        return [path]
    return sorted(p.parent for p in (path / "runs").glob("*/seed*/config.yaml"))

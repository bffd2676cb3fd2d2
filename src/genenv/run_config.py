"""A run folder's config: what it was started with (config.yaml, never rewritten), what each resume changed
(config_changes.jsonl), and what a resume may change."""

from __future__ import annotations

import warnings
from pathlib import Path

from genenv.config import RunConfig, deep_merge, dotted_dict, from_dict, holds_other_names, read_yaml

# What a resume may change: nothing that changes what the run is (its curriculum, models, seed, rewards), only how
# long it runs, how often it evaluates and checkpoints, and where and how fast it computes
RESUMABLE_FIELDS = ("epochs", "eval_every", "threads", "progress", "checkpoint_every_s", "samples_rollouts_shown",
                    "engine.", "trackers", "tracker_project")
CONFIG_HISTORY = "config_changes.jsonl"   # in a run folder: every change a resume made, config.yaml untouched


def run_config(data: dict) -> RunConfig:
    """A run folder's config dict as a RunConfig. A deprecated field in it is read quietly: the run was started with
    it, and its warning was given then; a removed one (:data:`genenv.old_spellings.REMOVED_KNOBS`) is dropped
    whatever its value."""
    if holds_other_names(RunConfig, data):
        from genenv.old_spellings import drop_removed  # noqa: PLC0415 (read only for a config with old names)
        data = drop_removed(data)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return from_dict(RunConfig, data)


def resumable(field_name: str) -> bool:
    return any(field_name == f or (f.endswith(".") and field_name.startswith(f)) for f in RESUMABLE_FIELDS)


def run_config_dict(run_dir: str | Path) -> dict:
    """A run folder's config as it runs now: config.yaml (what it was started with, never rewritten) with the
    changes of every resume (``config_changes.jsonl``) applied in order."""
    from genenv.io import read_jsonl  # noqa: PLC0415 (io imports numpy; this module stays light)
    run_dir = Path(run_dir)
    data = read_yaml(run_dir / "config.yaml")
    history = run_dir / CONFIG_HISTORY
    for row in read_jsonl(history) if history.exists() else []:
        for key, (_, value) in row["changes"].items():
            data = deep_merge(data, dotted_dict(key, value))
    return data


def changed_fields(old: dict, new: dict, prefix: str = "") -> dict[str, tuple]:
    """``{dotted.key: (old value, new value)}`` for every leaf that differs between two nested config dicts
    (a key on one side only counts, with None on the other)."""
    changes = {}
    for key in list(dict.fromkeys([*old, *new])):
        a, b = old.get(key), new.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            changes.update(changed_fields(a, b, f"{prefix}{key}."))
        elif a != b:
            changes[f"{prefix}{key}"] = (a, b)
    return changes

"""Mirror a run to the experiment trackers researchers already watch (issue 43): ``trackers=[tensorboard, wandb,
trackio]``.

Every metrics row (the epoch's scalars, per-level values as ``heldout_by_level/3``), the evaluations in it and,
at the end, the run's summary (warm-start and final held-out/dev success) go to each tracker, one step per
epoch. Runs of a ``genenv compare`` are grouped: the comparison folder's name is the group, ``<arm>-seed<k>``
the run's name, the arm and seed its tags and config. metrics.jsonl stays the record: a tracker is a mirror,
and one that fails to start or to log is one warning, after which the run goes on without it.

- ``tensorboard``: event files in ``RUN_DIR/tensorboard`` (``tensorboard --logdir runs``); a resumed run
  purges the steps it repeats.
- ``wandb``: ``wandb.init`` in offline mode unless ``WANDB_MODE`` says otherwise (no account needed; ``wandb
  sync`` uploads later); a resume continues the same run id.
- ``trackio``: Hugging Face's local tracker (``trackio show``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

from genenv.config import RunConfig, to_dict


def flatten(row: dict, prefix: str = "") -> dict[str, float]:
    """The numeric scalars of a metrics row, nested mappings as ``key/sub`` (lists, text and None left out)."""
    out: dict[str, float] = {}
    for key, value in row.items():
        name = f"{prefix}{key}"
        if isinstance(value, bool):
            out[name] = float(value)
        elif isinstance(value, (int, float)):
            if math.isfinite(value):
                out[name] = float(value)
        elif isinstance(value, dict):
            out.update(flatten(value, f"{name}/"))
    return out


def run_identity(run_dir: Path) -> dict:
    """Name, group and tags of a run: a comparison's run (``CMP/runs/<arm>/seed<k>``) is grouped under CMP."""
    run_dir = Path(run_dir).resolve()
    parts = run_dir.parts
    if len(parts) >= 4 and parts[-3] == "runs" and parts[-1].startswith("seed") and \
            (run_dir.parents[2] / "compare.json").exists():
        arm, seed = parts[-2], parts[-1][len("seed"):]
        return {"name": f"{arm}-seed{seed}", "group": run_dir.parents[2].name, "arm": arm, "tags": [arm, f"seed{seed}"]}
    return {"name": run_dir.name, "group": None, "arm": None, "tags": []}


class TensorBoardTracker:
    def __init__(self, cfg: RunConfig, run_dir: Path, first_epoch: int):
        from torch.utils.tensorboard import SummaryWriter  # noqa: PLC0415 (optional: tensorboard)
        self.writer = SummaryWriter(log_dir=str(run_dir / "tensorboard"), purge_step=first_epoch or None)
        identity = run_identity(run_dir)
        if first_epoch == 0:
            self.writer.add_text("config", "```\n" + json.dumps({**to_dict(cfg), **identity}, indent=1) + "\n```", 0)

    def log(self, values: dict[str, float], step: int) -> None:
        for key, value in values.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()

    def summary(self, values: dict[str, float], step: int) -> None:
        self.log({f"summary/{k}": v for k, v in values.items()}, step)

    def close(self) -> None:
        self.writer.close()


class WandbTracker:
    def __init__(self, cfg: RunConfig, run_dir: Path, first_epoch: int):
        import wandb  # noqa: PLC0415 (optional: wandb)
        identity = run_identity(run_dir)
        run_id = hashlib.sha256(str(Path(run_dir).resolve()).encode()).hexdigest()[:16]  # a resume continues it
        self.wandb = wandb
        self.run = wandb.init(project=cfg.tracker_project, name=identity["name"], group=identity["group"],
                              tags=identity["tags"], config={**to_dict(cfg), "arm": identity["arm"]}, id=run_id,
                              resume="allow", dir=str(run_dir), mode=os.environ.get("WANDB_MODE", "offline"))

    def log(self, values: dict[str, float], step: int) -> None:
        self.run.log(values, step=step)

    def summary(self, values: dict[str, float], step: int) -> None:
        self.run.summary.update(values)

    def close(self) -> None:
        self.run.finish()


class TrackioTracker:
    def __init__(self, cfg: RunConfig, run_dir: Path, first_epoch: int):
        import trackio  # noqa: PLC0415 (optional: trackio)
        identity = run_identity(run_dir)
        self.trackio = trackio
        self.run = trackio.init(project=cfg.tracker_project, name=identity["name"], group=identity["group"],
                                config={**to_dict(cfg), "arm": identity["arm"]}, resume="allow")

    def log(self, values: dict[str, float], step: int) -> None:
        self.trackio.log(values, step=step)

    def summary(self, values: dict[str, float], step: int) -> None:
        self.trackio.log({f"summary/{k}": v for k, v in values.items()}, step=step)

    def close(self) -> None:
        self.trackio.finish()


TRACKERS = {"tensorboard": TensorBoardTracker, "wandb": WandbTracker, "trackio": TrackioTracker}
EXTRAS = {"tensorboard": "tensorboard", "wandb": "wandb", "trackio": "trackio"}


class Trackers:
    """The run's trackers: each call goes to every one still working; a failure is one warning and that tracker
    is dropped (the run and the others go on)."""

    def __init__(self, cfg: RunConfig, run_dir: Path, first_epoch: int, log):
        self.log_line, self.active = log, {}
        for name in cfg.trackers:
            try:
                self.active[name] = TRACKERS[name](cfg, Path(run_dir), first_epoch)
            except Exception as err:  # noqa: BLE001 (any failure of an optional mirror: warn, never stop the run)
                self._warn(name, "failed to start", err)

    def _warn(self, name: str, what: str, err: BaseException) -> None:
        hint = f" (pip install {EXTRAS[name]})" if isinstance(err, ImportError) else ""
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        self.log_line(f"warning: tracker {name} {what}: {first}{hint}; the run goes on without it")

    def _each(self, what: str, call) -> None:
        for name, tracker in list(self.active.items()):
            try:
                call(tracker)
            except Exception as err:  # noqa: BLE001
                self._warn(name, what, err)
                self.active.pop(name, None)

    def log(self, row: dict, step: int) -> None:
        if self.active:
            values = flatten(row)
            self._each("failed to log", lambda tracker: tracker.log(values, step))

    def summary(self, values: dict, step: int) -> None:
        if self.active:
            flat = flatten(values)
            self._each("failed to log the summary", lambda tracker: tracker.summary(flat, step))

    def close(self) -> None:
        self._each("failed to close", lambda tracker: tracker.close())
        self.active = {}

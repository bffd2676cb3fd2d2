"""The numbers of runs and comparisons, read from run folders: final and per-level success, the area under the
held-out curve, rollouts to reach a target, and each arm paired by seed against a reference (differences with
their intervals, rollouts to reach the reference's final). :mod:`genenv.report` draws them; :mod:`genenv.stats`
holds the statistics.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from genenv.io import read_jsonl
from genenv.provenance import code_history, files_that_differ, name_files
from genenv.run_config import run_config_dict
from genenv.stats import gain_recovered, paired_differences


@dataclass
class RunRecord:
    """What a report needs of one run folder."""
    path: Path
    label: str
    seed: int
    config: dict
    rows: list[dict]
    warm: dict = field(default_factory=dict)
    fixed_set: dict | None = None
    data_split: dict | None = None   # data_split.json: the held-out/dev/seed sets per level

    @property
    def epochs_planned(self) -> int:
        return int(self.config.get("epochs", 0))

    @property
    def finished(self) -> bool:
        return bool(self.rows) and len(self.rows) >= self.epochs_planned and (self.path / "final" / "agent").exists()

    def eval_curve(self, key: str = "heldout_success") -> tuple[np.ndarray, np.ndarray]:
        """(agent rollouts, success) at every evaluation, starting with the warm-started agent at 0 rollouts."""
        xs, ys = [], []
        if self.warm.get(key) is not None:
            xs.append(0)
            ys.append(self.warm[key])
        for row in self.rows:
            if row.get(key) is not None:
                xs.append(row["rollouts"])
                ys.append(row[key])
        return np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)

    def series(self, key: str) -> tuple[np.ndarray, np.ndarray]:
        """(epoch, value) for a per-epoch metric, skipping epochs where it is null."""
        pairs = [(r["epoch"], r[key]) for r in self.rows if r.get(key) is not None]
        if not pairs:
            return np.zeros(0), np.zeros(0)
        epochs, values = zip(*pairs)
        return np.asarray(epochs, dtype=float), np.asarray(values, dtype=float)


def load_run(path: str | Path, label: str | None = None) -> RunRecord:
    path = Path(path)
    if not (path / "config.yaml").exists():
        raise FileNotFoundError(f"{path}: not a run folder (no config.yaml)")
    config = run_config_dict(path) or {}   # config.yaml with the changes its resumes made (epochs=400 ...)
    warm = json.loads((path / "warmstart.json").read_text()) if (path / "warmstart.json").exists() else {}
    fixed = json.loads((path / "fixed_set.json").read_text()) if (path / "fixed_set.json").exists() else None
    split = json.loads((path / "data_split.json").read_text()) if (path / "data_split.json").exists() else None
    return RunRecord(path, label or config.get("curriculum", path.name), int(config.get("seed", 0)), config,
                     read_jsonl(path / "metrics.jsonl"), warm, fixed, split)


# ============================================================================ numbers

def rollouts_to_reach(record: RunRecord, target: float) -> float | None:
    """Agent rollouts at the first evaluation whose held-out success is >= target (None: never)."""
    return first_reach(*record.eval_curve(), target)


def first_reach(xs: np.ndarray, ys: np.ndarray, target: float) -> float | None:
    """The first x of a curve whose y is >= target (None: never)."""
    hits = np.nonzero(ys >= target - 1e-12)[0]
    return float(xs[hits[0]]) if hits.size else None


def area_under_curve(record: RunRecord) -> float | None:
    """Mean held-out success over the run (trapezoid area / rollouts): rewards learning early."""
    xs, ys = record.eval_curve()
    if xs.size < 2 or xs[-1] <= xs[0]:
        return None
    return float(np.trapezoid(ys, xs) / (xs[-1] - xs[0]))


def _mean_std(values) -> dict:
    values = [v for v in values if v is not None]
    if not values:
        return {"mean": None, "std": None, "n": 0}
    return {"mean": float(np.mean(values)), "std": float(np.std(values, ddof=1)) if len(values) > 1 else 0.0,
            "n": len(values)}


def summarize(groups: dict[str, list[RunRecord]], reference: str = "genenv", target: float | None = None) -> dict:
    """Per curriculum label: final held-out success (mean, std, every seed) and single-step accuracy where the
    domain has an expert, per-level success, samples used,
    agent rollouts and updates, area under the curve, and rollouts to reach ``target`` (default: the
    reference curriculum's mean final held-out success)."""
    finals = {label: [_final(r) for r in runs if r.rows] for label, runs in groups.items()}
    if target is None and reference in groups:
        target = _mean_std(finals[reference])["mean"]
    out = {"reference": reference, "target_success": target, "code": code_versions(groups), "curricula": {}}
    for label, runs in groups.items():
        step_finals = [r.rows[-1].get("heldout_step_accuracy") for r in runs if r.rows]
        levels: dict[str, list[float]] = {}
        for r in runs:
            for level, value in (r.rows[-1].get("heldout_by_level") or {}).items() if r.rows else ():
                levels.setdefault(level, []).append(value)
        to_target = [rollouts_to_reach(r, target) if target is not None else None for r in runs]
        reached = [v for v in to_target if v is not None]
        out["curricula"][label] = {
            "information": run_information(runs[0]) if runs else None,
            "seeds": [r.seed for r in runs],
            "epochs": [len(r.rows) for r in runs],
            "heldout_final": {**_mean_std(finals[label]), "per_seed": finals[label]},
            "heldout_warmstart": _mean_std([r.warm.get("heldout_success") for r in runs]),
            "dev_final": _mean_std([r.rows[-1].get("dev_success") for r in runs if r.rows]),
            # the single-step protocol, for domains with an expert (None elsewhere)
            "heldout_step_accuracy_final": {**_mean_std(step_finals), "per_seed": step_finals},
            "heldout_step_accuracy_warmstart": _mean_std([r.warm.get("heldout_step_accuracy") for r in runs]),
            "heldout_by_level": {k: float(np.mean(v)) for k, v in sorted(levels.items(), key=lambda kv: int(kv[0])
                                                                         if kv[0].isdigit() else kv[0])},
            "auc": _mean_std([area_under_curve(r) for r in runs]),
            "samples_used": _mean_std([r.rows[-1].get("task_pool_size") for r in runs if r.rows]),
            "generated_total": _mean_std([sum(row.get("generated", 0) for row in r.rows) +
                                          (r.fixed_set or {}).get("generated", 0) for r in runs]),
            "rollouts": _mean_std([r.rows[-1].get("rollouts") for r in runs if r.rows]),
            "agent_updates": _mean_std([r.rows[-1].get("total_agent_updates") for r in runs if r.rows]),
            "rollouts_to_target": {"per_seed": to_target, "reached": len(reached), "of": len(runs),
                                   "mean_where_reached": float(np.mean(reached)) if reached else None},
            "paired_to_reference_final": paired_rollouts(groups.get(reference, []), runs),
            # the reference (genenv) minus this curriculum, paired by seed (same warm start)
            "reference_minus_this": {
                "final": paired_differences(_per_seed(groups.get(reference, []), _final),
                                            _per_seed(runs, _final)),
                "auc": paired_differences(_per_seed(groups.get(reference, []), area_under_curve),
                                          _per_seed(runs, area_under_curve))},
            "p_hat_mean_from_epoch_2": _mean_std([_mean_from(r, "p_hat_mean", 2) for r in runs]),
            "band_hit_rate_from_epoch_2": _mean_std([_mean_from(r, "band_hit_rate", 2) for r in runs]),
            # calibration once the simulator has had time to learn (issue 13 compares it with the oracle's)
            "p_hat_mean_from_epoch_20": _mean_std([_mean_from(r, "p_hat_mean", 20) for r in runs]),
            "band_hit_rate_from_epoch_20": _mean_std([_mean_from(r, "band_hit_rate", 20) for r in runs]),
        }
    if reference in groups and "random" in groups and "oracle" in groups:
        # the share of a perfect teacher's gain over the untrained simulator that the reference recovers
        out["oracle_gain_recovered"] = gain_recovered(*(_per_seed(groups[label], _final)
                                                        for label in (reference, "random", "oracle")))
    return out


def code_versions(groups: dict[str, list[RunRecord]]) -> dict:
    """The code that made a comparison's runs (:mod:`genenv.provenance`): each source fingerprint a run started
    with, and the runs (``label/seed<k>``) it made; the runs made before genenv recorded it, and the runs resumed
    with other source code than they started with. With several sources: the source that made the most runs
    (``most_runs_source``) and, per other source, the package files in which it differs (``files_that_differ``;
    runs recorded before code.json held per-file hashes have none)."""
    sources: dict[str, list[str]] = {}
    files: dict[str, dict[str, str]] = {}
    unrecorded, resumed_with_other_code = [], []
    for label, runs in groups.items():
        for record in runs:
            name = f"{label}/seed{record.seed}"
            started, changes = code_history(record.path)
            if started is None:
                unrecorded.append(name)
                continue
            sources.setdefault(started.get("source"), []).append(name)
            if started.get("files"):
                files.setdefault(started.get("source"), started["files"])
            if any("source" in row["changes"] for row in changes):
                resumed_with_other_code.append(name)
    code = {"sources": sources, "unrecorded": unrecorded, "resumed_with_other_code": resumed_with_other_code}
    most = max(sources, key=lambda source: len(sources[source]), default=None)
    if len(sources) > 1 and most in files:
        code["most_runs_source"] = most
        code["files_that_differ"] = {source: files_that_differ(files[most], files[source])
                                     for source in sources if source != most and source in files}
    return code


def code_sentence(code: dict) -> str:
    """One sentence for a report: whether every run was made by the same code."""
    sources, others = code["sources"], [*code["unrecorded"], *code["resumed_with_other_code"]]
    if len(sources) == 1 and not others:
        return f"Every run was made by the same code (source fingerprint {next(iter(sources))})."
    differ, most = code.get("files_that_differ", {}), code.get("most_runs_source")

    def runs_of(source: str, names: list[str]) -> str:
        if source not in differ:
            return f"{len(names)} by source {source}"
        return f"{len(names)} by source {source} (differs from {most} in {name_files(differ[source])})"
    parts = [runs_of(source, names) for source, names in sources.items()]
    if code["unrecorded"]:
        parts.append(f"{len(code['unrecorded'])} made before runs recorded their code")
    if code["resumed_with_other_code"]:
        parts.append(f"{len(code['resumed_with_other_code'])} resumed with other code than they started with "
                     f"({', '.join(code['resumed_with_other_code'][:4])})")
    return "Not every run was made by the same code: " + "; ".join(parts) + " (summary.json, \"code\")."


def run_information(record: RunRecord) -> str | None:
    """What the run's method knows (:func:`genenv.curricula.information_label`), from its config.yaml; None when
    that config no longer loads (a run of an older version with a field since removed)."""
    from genenv.config import ConfigError  # noqa: PLC0415 (report stays light to import)
    from genenv.curricula import information_label  # noqa: PLC0415
    from genenv.run_config import run_config  # noqa: PLC0415 (report stays light to import)
    try:
        return information_label(run_config(record.config))
    except ConfigError:
        return None


def _final(record: RunRecord) -> float | None:
    return record.rows[-1].get("heldout_success") if record.rows else None


def _per_seed(runs: list[RunRecord], value) -> dict[int, float | None]:
    return {r.seed: value(r) for r in runs}


def paired_rollouts(reference_runs: list[RunRecord], runs: list[RunRecord]) -> dict:
    """Per seed: the agent rollouts a run needs to reach the reference run's final held-out success (same
    seed, same warm start), divided by the rollouts the reference run itself needed to first reach it."""
    by_seed = {r.seed: r for r in reference_runs if r.rows}
    rows = []
    for record in runs:
        ref = by_seed.get(record.seed)
        if ref is None or ref.rows[-1].get("heldout_success") is None:
            continue
        target = ref.rows[-1]["heldout_success"]
        ours, theirs = rollouts_to_reach(ref, target), rollouts_to_reach(record, target)
        ratio = theirs / ours if theirs is not None and ours else None
        rows.append({"seed": record.seed, "target": target, "rollouts": theirs, "reference_rollouts": ours,
                     "ratio": ratio})
    reached = [r["ratio"] for r in rows if r["ratio"] is not None]
    return {"per_seed": rows, "reached": sum(1 for r in rows if r["rollouts"] is not None), "of": len(rows),
            "ratio_mean_where_reached": float(np.mean(reached)) if reached else None}


def _mean_from(record: RunRecord, key: str, first_epoch: int) -> float | None:
    values = [r[key] for r in record.rows if r["epoch"] >= first_epoch and r.get(key) is not None]
    return float(np.mean(values)) if values else None

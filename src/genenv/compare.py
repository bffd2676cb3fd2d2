"""Side-by-side comparison of curricula over seeds: ``genenv compare``.

Every (curriculum, seed) pair is an ordinary run folder under ``DIR/runs/<label>/seed<k>/``, so each can be
inspected, reported or resumed on its own. A re-run of the same command skips finished pairs and resumes
unfinished ones from their last checkpoint. The warm-started players are cached per seed and shared by every
curriculum (paired comparisons). At the end ``DIR/summary.json`` and ``DIR/report.html`` are written.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch
import yaml

from genenv.analysis import RunRecord, code_sentence, load_run, summarize
from genenv.checkpoint import (
    config_changes,
    epochs_without_checkpoint,
    has_checkpoint,
    no_checkpoint_message,
    run_finished,
    run_in_use,
    run_lock,
)
from genenv.config import ConfigError, load_config
from genenv.curricula import curriculum_names
from genenv.domains import make_domain
from genenv.io import atomic_write_json, read_jsonl
from genenv.preflight import survey
from genenv.report import reference_label, write_report
from genenv.run_config import resumable
from genenv.signals import check_config
from genenv.warmstart import warm_start_agent, warm_start_simulator


@dataclass(frozen=True)
class Arm:
    """One curriculum setting of a comparison: a label and the overrides that make it. ``folder`` is the label its
    runs were recorded under when a report shows them under another (``genenv report --arms``)."""
    label: str
    overrides: tuple[str, ...]
    folder: str | None = None


def parse_seeds(text: str | int) -> list[int]:
    """``3`` -> seeds 0, 1, 2; ``0,4,7`` -> those seeds."""
    text = str(text).strip()
    try:
        if "," in text:
            seeds = [int(part) for part in text.split(",") if part.strip()]
        else:
            seeds = list(range(int(text)))
    except ValueError:
        raise ConfigError(f"--seeds: expected a count like 3 or a list like 0,4,7, got {text!r}") from None
    if not seeds or any(s < 0 for s in seeds):
        raise ConfigError(f"--seeds: expected at least one non-negative seed, got {text!r}")
    return seeds


def parse_arms(curricula: str, offline_multipliers: str = "1.8,3.3") -> list[Arm]:
    """Curriculum names to arms; ``offline`` becomes one arm per multiplier (``offline-1.8x`` ...)."""
    arms = []
    names = [c.strip() for c in curricula.split(",") if c.strip()]
    if not names:
        raise ConfigError("--curricula: name at least one of " + ", ".join(curriculum_names()))
    for name in names:
        if name not in curriculum_names():
            raise ConfigError(f"--curricula: {name!r} is not a curriculum; choose from {', '.join(curriculum_names())}")
        if name == "offline":
            try:
                multipliers = [float(m) for m in offline_multipliers.split(",") if m.strip()]
            except ValueError:
                raise ConfigError(f"--offline-multipliers: expected numbers like 1.8,3.3, got "
                                  f"{offline_multipliers!r}") from None
            for m in multipliers:
                arms.append(Arm(f"offline-{m:g}x", ("curriculum=offline", f"baseline.offline_multiplier={m}")))
        else:
            arms.append(Arm(name, (f"curriculum={name}",)))
    if len({a.label for a in arms}) != len(arms):
        raise ConfigError("--curricula: a curriculum is named twice")
    return arms


def parse_extra_arm(text: str) -> Arm:
    """``LABEL:OVERRIDE OVERRIDE ...`` (``--arm``), e.g. ``genenv-pg:curriculum=genenv env.update=pg``: one more
    arm with its own label and overrides (applied after the ones every run gets)."""
    label, sep, rest = text.partition(":")
    overrides = tuple(rest.split())
    if not sep or not label.strip() or not overrides or any("=" not in o for o in overrides):
        raise ConfigError(f"--arm: expected LABEL:key=value [key=value ...], got {text!r}")
    check_label(label, "--arm")
    return Arm(label.strip(), overrides)


def check_label(label: str, flag: str) -> None:
    """An arm's label names its runs' folder: no slashes, spaces or leading dot (``flag`` names the option)."""
    if any(ch in label for ch in "/\\ ") or label.startswith("."):
        raise ConfigError(f"{flag}: the label {label!r} names a folder: no slashes, spaces or leading dot")


def check_reference(reference: str | None, arms: list[Arm]) -> None:
    """``--reference``, when given, must be one of the arms' labels."""
    if reference is not None and reference not in {a.label for a in arms}:
        raise ConfigError(f"--reference: {reference!r} is not one of the arms ({', '.join(a.label for a in arms)})")


def run_dir_of(out: Path, arm: Arm, seed: int) -> Path:
    return out / "runs" / (arm.folder or arm.label) / f"seed{seed}"


def select_arms(arms: list[Arm], spec: str) -> list[Arm]:
    """``genenv report --arms``: a comma-separated subset of a comparison's arms, each ``LABEL`` or
    ``NEW=LABEL`` to show it under another label (e.g. ``random=random-exact``, so the oracle's gain over
    random is computed against that arm)."""
    by_label = {a.label: a for a in arms}
    chosen = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            continue
        new, _, old = item.rpartition("=")
        old, new = old.strip(), (new.strip() or old.strip())
        if old not in by_label:
            raise ConfigError(f"--arms: {old!r} is not an arm of this comparison ({', '.join(by_label)})")
        check_label(new, "--arms")
        chosen.append(Arm(new, by_label[old].overrides, folder=by_label[old].folder or old))
    if not chosen:
        raise ConfigError("--arms: name at least one arm")
    if len({a.label for a in chosen}) != len(chosen):
        raise ConfigError(f"--arms: a label is used twice in {spec!r}")
    return chosen


def pair_status(run_dir: Path, epochs: int) -> str:
    """'finished', 'partial' (resume it) or 'new'. A run stopped before its first checkpoint (during the warm
    start's evaluation, say) is partial: ``genenv run --resume`` starts it over in its own folder (a plain
    ``genenv run`` refuses a folder that holds a run)."""
    if not (run_dir / "config.yaml").exists():
        return "new"
    return "finished" if run_finished(run_dir, epochs) else "partial"


def resume_settings(cfg, run_dir: Path, name: str) -> list[str]:
    """The overrides that make a checkpointed run in ``run_dir`` the run this comparison asks for (``cfg``): each
    field a resume may change where the two differ (``epochs=20`` extends a run made with ``epochs=10``). A field
    a resume cannot change is a ConfigError naming it and the run (``name``): resuming would quietly go on with
    the folder's own setting. Nothing when the folder's config no longer loads (its own resume says why)."""
    try:
        changes = config_changes(cfg, run_dir)
    except (ConfigError, OSError, ValueError, TypeError):
        return []
    fixed = {key: pair for key, pair in changes.items() if not resumable(key)}
    if fixed:
        listed = ", ".join(f"{key} {old!r} -> {new!r}" for key, (old, new) in list(fixed.items())[:4])
        raise ConfigError(f"{name} in {run_dir} was made with other settings than this command asks for ({listed})"
                          "; a resume cannot change them. Use another --out, or the settings it was made with")
    return [f"{key}={_as_yaml(new)}" for key, (_, new) in changes.items()]


def _as_yaml(value) -> str:
    """A value as an override's YAML text (``parse_override`` reads it back: 1e-05 is ``1.0e-05``, not a string)."""
    return yaml.safe_dump(value, default_flow_style=True, width=1 << 20).removesuffix("...\n").strip()


def checkpointed_epochs(run_dir: Path) -> int:
    """Epochs a resumed run keeps: those its latest checkpoint holds (later metrics rows are redone)."""
    try:
        return int(json.loads((run_dir / "checkpoints" / "latest" / "state.json").read_text())["epoch"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def _run_pair(command: list[str], log_file: Path, side_by_side: bool = False) -> int:
    """Run one pair's ``genenv run`` into ``log_file``. ``side_by_side`` (several runs at once): torch's OpenMP
    threads wait passively (``OMP_WAIT_POLICY=PASSIVE`` unless set): spinning, runs side by side on the same cores
    burn each other's time (two smoke runs with two threads each on two cores: 16.4-17.6 s spinning, 11.7-11.9 s
    passive; one alone the same either way). The numbers a run computes do not depend on it."""
    log_file.parent.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if side_by_side:
        env.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    with open(log_file, "a") as handle:
        handle.write(f"$ {' '.join(command)}\n")
        handle.flush()
        return subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=env).returncode


def compare(out: str | Path, preset: str = "default", curricula: str | None = None, seeds="3",
            overrides: list[str] | tuple[str, ...] = (), config_file: str | None = None,
            offline_multipliers: str = "1.8,3.3", workers: int = 1, target: float | None = None,
            extra_arms: list[str] | tuple[str, ...] = (), reference: str | None = None, log=print) -> dict:
    """Run every (arm, seed) pair not finished yet, then write summary.json and report.html. The arms: one per
    curriculum (one per multiplier for offline), then each ``extra_arms`` entry (``LABEL:overrides``)."""
    out = Path(out)
    arms = parse_arms(curricula or ",".join(curriculum_names()), offline_multipliers) if curricula != "" else []
    arms += [parse_extra_arm(text) for text in extra_arms]
    if not arms or len({a.label for a in arms}) != len(arms):
        raise ConfigError("--curricula/--arm: name at least one arm, each label once")
    check_reference(reference, arms)
    seed_list = parse_seeds(seeds)
    if workers < 1:
        raise ConfigError(f"--workers: expected at least 1, got {workers}")
    extra = list(overrides)
    if workers > 1 and not any(o.startswith("threads=") for o in extra):
        extra.append("threads=1")  # two single-threaded runs beat one run on two threads (tiny models)
    configs, problems = {}, {}
    for arm in arms:  # every config error surfaces before anything runs: no warm start is paid before
        for seed in seed_list:
            configs[arm, seed] = load_config(preset, [*extra, *arm.overrides, f"seed={seed}", "progress=false"],
                                             config_file)
            check_config(configs[arm, seed])   # its strategies, and their knobs as a run writes them
        # the arm's preflight (its seeds differ in the seed alone)
        for problem in survey(configs[arm, seed_list[0]]).problems:
            problems.setdefault(problem, []).append(arm.label)
    if problems:   # each problem once, with the arms it stops where not all of them
        raise ConfigError("\n".join(problem if len(labels) == len(arms) else f"{problem} (arm {', '.join(labels)})"
                                     for problem, labels in problems.items()))
    with run_lock(out, "comparing it"):   # one process runs a comparison folder at a time
        statuses, resumes = _check_existing_runs(out, configs)
        atomic_write_json(out / "compare.json", {"preset": preset, "config_file": config_file, "overrides": extra,
                                                 "arms": [{"label": a.label, "overrides": list(a.overrides)}
                                                          for a in arms], "seeds": seed_list, "reference": reference})
        _warm_start_each_seed(configs, arms, seeds_to_warm(statuses, resumes, seed_list), workers, log)
        jobs, counts, epochs_left = [], {"finished": 0, "partial": 0, "new": 0}, 0
        for seed in seed_list:   # seed by seed: the pairs a stopped comparison has finished are paired
            for arm in arms:
                cfg = configs[arm, seed]
                run_dir = run_dir_of(out, arm, seed)
                status = statuses[arm, seed]
                counts[status] += 1
                if status == "finished":
                    log(f"[skip] {arm.label} seed {seed}: finished")
                    continue
                done = checkpointed_epochs(run_dir) if status == "partial" else 0
                epochs_left += max(cfg.epochs - done, 0)
                settings = [*extra, *arm.overrides, f"seed={seed}", "progress=false"]
                where = f" at epoch {done} of {cfg.epochs}" if status == "partial" else ""
                if status == "partial" and (arm, seed) not in resumes:
                    # stopped before its first checkpoint: nothing trained to keep, so it starts over in its folder
                    # with this command's settings (a fixed override takes effect)
                    command = [sys.executable, "-m", "genenv.cli", "run", "--resume", str(run_dir), *settings]
                    where = f" from epoch 0 of {cfg.epochs} (stopped before its first checkpoint)"
                elif status == "partial":   # with the settings a resume may change (more epochs: it is extended)
                    command = [sys.executable, "-m", "genenv.cli", "run", "--resume", str(run_dir), *resumes[arm, seed]]
                else:
                    command = [sys.executable, "-m", "genenv.cli", "run", "--preset", preset, "--out", str(run_dir),
                               *(["--config", config_file] if config_file else []), *settings]
                jobs.append((arm, seed, status, command, run_dir.parent / f"seed{seed}.log", where, cfg.epochs))
        total = sum(counts.values())
        log(f"{total} runs: {counts['finished']} finished, {counts['partial']} to resume, {counts['new']} new; "
            f"{epochs_left} of {sum(configs[a, s].epochs for a in arms for s in seed_list)} epochs to go")

        def launch(job):
            arm, seed, status, command, log_file, where, epochs = job
            start = time.perf_counter()
            log(f"[{'resume' if status == 'partial' else 'start'}] {arm.label} seed {seed}{where}")
            code = _run_pair(command, log_file, side_by_side=workers > 1)
            run_dir = run_dir_of(out, arm, seed)
            if code == 0 and pair_status(run_dir, epochs) != "finished":   # never "done" for a run that is not
                rows = read_jsonl(run_dir / "metrics.jsonl") if (run_dir / "metrics.jsonl").exists() else []
                log(f"[INCOMPLETE] {arm.label} seed {seed}: its run ended without error but holds {len(rows)} of "
                    f"{epochs} epochs (see {log_file})")
                return 1
            log(f"[{'done' if code == 0 else 'FAILED'}] {arm.label} seed {seed} in {time.perf_counter() - start:.0f}s"
                + ("" if code == 0 else f" (exit {code}; see {log_file})"))
            return code

        with ThreadPoolExecutor(max_workers=workers) as pool:
            codes = list(pool.map(launch, jobs))
        failed = sum(1 for c in codes if c != 0)
        if failed and not collect(out, arms, seed_list):
            logs = sorted({str(job[4]) for job, code in zip(jobs, codes) if code != 0})
            raise ConfigError(f"--out {out}: every run failed ({failed}); nothing to compare. Each run's log says why: "
                              + ", ".join(logs[:3]) + (" ..." if len(logs) > 3 else ""))
        summary = write_comparison(out, arms, seed_list, target=target, reference=reference)
        if failed:
            log(f"{failed} run(s) failed; the summary covers the finished ones. Re-run the same command to retry.")
        summary["failed_runs"] = failed
        return summary


def _check_existing_runs(out: Path, configs: dict) -> tuple[dict, dict]:
    """Each (arm, seed) pair's status and, for a checkpointed run, the settings its resume is given; checked
    before anything runs, a ConfigError naming the run when one cannot become the run asked for: another process
    is writing it (the two would interleave), its checkpoints were removed (it would start over and overwrite its
    metrics), or it was made with a setting a resume cannot change."""
    statuses, resumes = {}, {}
    for (arm, seed), cfg in configs.items():
        run_dir, name = run_dir_of(out, arm, seed), f"{arm.label} seed {seed}"
        statuses[arm, seed] = status = pair_status(run_dir, cfg.epochs)
        holder = run_in_use(run_dir) if status != "new" else None
        if holder:
            raise ConfigError(f"{name}: {holder} (is this comparison running elsewhere?)")
        kept = epochs_without_checkpoint(run_dir) if status == "partial" else 0
        if kept:
            raise ConfigError(f"{name}: {no_checkpoint_message(run_dir, kept)}, or ask for the epochs it holds "
                              f"(epochs={kept})")
        if has_checkpoint(run_dir):
            resumes[arm, seed] = resume_settings(cfg, run_dir, name)
    return statuses, resumes


def seeds_to_warm(statuses: dict, resumes: dict, seeds: list[int]) -> list[int]:
    """The seeds whose warm start some run will read: one with a run to start (new, or stopped before its first
    checkpoint). A finished run needs nothing and a checkpointed one resumes from the weights its folder holds, so
    re-running a comparison on a machine without the cache rebuilds no warm start it does not use."""
    return [seed for seed in seeds if any(status != "finished" and (arm, seed) not in resumes
                                          for (arm, s), status in statuses.items() if s == seed)]


def _warm_start_each_seed(configs, arms, seeds, workers, log) -> None:
    """Fill the warm-start cache once per seed before runs fan out (all curricula share it). With several
    workers the seeds warm in parallel, one process each (a process of its own: torch's thread count is global
    and tiny models are bound by the Python interpreter, so threads would not run side by side)."""
    jobs = [(configs[arms[0], seed], seed) for seed in seeds]
    if not jobs:
        return
    if workers == 1 or len(jobs) == 1:
        for cfg, seed in jobs:
            _warm_one_seed(cfg, seed, log)  # lines as they come
        return
    log(f"warm starts: {len(jobs)} seeds, {min(workers, len(jobs))} at a time (each seed's lines once it is done)")
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)),
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        for messages in pool.map(_warm_one_seed, *zip(*jobs)):
            for message in messages:
                log(message)


def _warm_one_seed(cfg, seed: int, log=None) -> list[str]:
    """Warm-start (or load from the cache) one seed's agent and simulator. Its log lines go to ``log``, or, in a
    worker process (no ``log``), come back in order."""
    messages: list[str] = []
    emit = log or messages.append
    domain = make_domain(cfg.domain.name, **cfg.domain.options)
    torch.set_num_threads(cfg.threads)
    warm_start_agent(cfg, domain, log=lambda m: emit(f"seed {seed}: {m}"))
    warm_start_simulator(cfg, domain, log=lambda m: emit(f"seed {seed}: {m}"))
    return messages


def collect(out: Path, arms: list[Arm], seeds: list[int]) -> dict[str, list[RunRecord]]:
    groups: dict[str, list[RunRecord]] = {}
    for arm in arms:
        for seed in seeds:
            run_dir = run_dir_of(out, arm, seed)
            if (run_dir / "config.yaml").exists():
                record = load_run(run_dir, arm.label)
                if record.finished:
                    groups.setdefault(arm.label, []).append(record)
    return groups


def write_comparison(out: Path, arms: list[Arm], seeds: list[int], target: float | None = None,
                     reference: str | None = None, dest: Path | None = None) -> dict:
    """summary.json, report.html and plots/ of the finished runs under ``out``, written to ``dest`` (default
    ``out``)."""
    groups = collect(out, arms, seeds)
    if not groups:
        raise RuntimeError(f"{out}: no finished run to summarise")
    dest = out if dest is None else dest
    reference = reference_label(groups, reference)
    summary = summarize(groups, reference=reference, target=target)
    atomic_write_json(dest / "summary.json", summary)
    write_report(dest, groups, f"genenv comparison: {dest.name}", summary,
                 intro=f"{len(groups)} curricula x {len(seeds)} seed(s). Every curriculum makes the same number "
                       "of agent rollouts per epoch. Rollouts-to-target uses the reference curriculum's "
                       f"({reference}) mean final held-out success as the target. {code_sentence(summary['code'])}")
    return summary


def report_comparison(out: str | Path, reference: str | None = None, arms: str | None = None,
                      dest: str | Path | None = None) -> Path:
    """Rebuild summary.json and report.html of a comparison folder from its runs. ``reference`` pairs every arm
    against another arm than the one the comparison named; ``arms`` (see ``select_arms``) reports a subset,
    possibly relabelled; ``dest`` writes the report elsewhere (with a ``view.json`` saying what it shows), so the
    comparison's own report stays as it is."""
    out = Path(out)
    plan = json.loads((out / "compare.json").read_text())
    chosen = [Arm(a["label"], tuple(a["overrides"])) for a in plan["arms"]]
    if arms is not None:
        chosen = select_arms(chosen, arms)
    check_reference(reference, chosen)  # the comparison's own reference may be left out: reference_label falls back
    reference = reference or plan.get("reference")
    dest = out if dest is None else Path(dest)
    if dest.resolve() != out.resolve():
        if (dest / "compare.json").exists():
            raise ConfigError(f"--out: {dest} holds a comparison of its own; choose an empty folder")
        dest.mkdir(parents=True, exist_ok=True)
        atomic_write_json(dest / "view.json", {
            "comparison": str(out.resolve()), "seeds": plan["seeds"],
            "reference": reference,
            "arms": [{"label": a.label, "runs": a.folder or a.label, "overrides": list(a.overrides)} for a in chosen]})
    write_comparison(out, chosen, plan["seeds"], reference=reference, dest=dest)
    return dest / "report.html"

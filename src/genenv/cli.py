"""Command line: ``genenv run | compare | report | eval | models | domains | check-domain | config``.

Exit status 2 and one line naming the field for any bad config value, unknown key or bad argument.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from pathlib import Path

import yaml

from genenv.config import ConfigError, describe, describe_components, load_config, preset_names, presets_dir, to_dict

# The heavy modules (torch, transformers) are imported by the commands that do work, so that `--help`, a config
# error and `genenv domains` answer at once (they took 7-9 s when this module imported everything).


def _run(args) -> int:

    if args.resume:
        run_dir = Path(args.resume)
        if not run_dir.is_dir():
            print(f"genenv: --resume {run_dir}: no such folder", file=sys.stderr)
            return 2
        if not (run_dir / "config.yaml").exists():
            print(f"genenv: --resume {run_dir}: no config.yaml there (not a run folder)", file=sys.stderr)
            return 2
        from genenv.checkpoint import latest_checkpoint, load_run_config  # noqa: PLC0415 (heavy: see above)
        from genenv.coevolve import run  # noqa: PLC0415
        checkpointed = latest_checkpoint(run_dir) is not None
        # before its first checkpoint nothing is trained: it starts over, and any override may change it
        cfg = load_run_config(run_dir, args.overrides, resuming=checkpointed)
        if not checkpointed:
            print(f"{run_dir}: stopped before its first checkpoint; starting it over", file=sys.stderr)
        _print_result(run(cfg, run_dir=run_dir, resume=True))
        return 0
    cfg = load_config(args.preset, args.overrides, args.config)   # a config error answers before torch loads
    run_dir = Path(args.out) if args.out else Path("runs") / cfg.name
    if run_dir.exists() and not run_dir.is_dir():
        print(f"genenv: --out {run_dir}: a file is there; a run needs a folder", file=sys.stderr)
        return 2
    if (run_dir / "metrics.jsonl").exists():
        print(f"genenv: {run_dir} already holds a run: resume it with `genenv run --resume {run_dir}` "
              "or choose another --out / name=", file=sys.stderr)
        return 2
    from genenv.coevolve import run  # noqa: PLC0415 (after what a folder can refuse: those answer at once)
    _print_result(run(cfg, run_dir=run_dir))
    return 0


def _print_result(run_dir: Path) -> None:
    """What a user waits for at the end of a run: held-out (and dev) success after the warm start and at the last
    evaluation, the agent rollouts it took, the run folder and the command that draws its report."""
    from genenv.run_folder import run_summary  # noqa: PLC0415
    summary = run_summary(Path(run_dir))

    def change(before, after) -> str:
        shown = [("-" if v is None else f"{v:.3f}") for v in (before, after)]
        return f"{shown[0]} -> {shown[1]}"
    rollouts = summary.get("rollouts")
    print(f"held-out success {change(summary['warmstart_heldout_success'], summary['final_heldout_success'])} "
          f"(after the warm start -> at the end{'' if rollouts is None else f', {rollouts:,} agent rollouts'}); "
          f"dev {change(summary['warmstart_dev_success'], summary['final_dev_success'])}")
    print(f"run folder: {run_dir}")
    print(f"report: genenv report {run_dir}")


def _compare(args) -> int:
    from genenv.compare import compare  # noqa: PLC0415
    from genenv.report import text_table  # noqa: PLC0415
    summary = compare(args.out, preset=args.preset, curricula=args.curricula,
                      seeds=args.seeds, overrides=args.overrides, config_file=args.config,
                      offline_multipliers=args.offline_multipliers, workers=args.workers, target=args.target,
                      extra_arms=args.arm, reference=args.reference)
    print(text_table(summary))
    print(f"summary: {Path(args.out) / 'summary.json'}\nreport:  {Path(args.out) / 'report.html'}")
    return 1 if summary.get("failed_runs") else 0


def _prune(args) -> int:
    from genenv.io import run_folders  # noqa: PLC0415
    runs = run_folders(args.path)
    if not runs:   # answered before torch is imported
        print(f"genenv: prune {args.path}: neither a run folder (config.yaml) nor a comparison with runs",
              file=sys.stderr)
        return 2
    from genenv.checkpoint import RunInUse, in_use_by, prunable, prune_run, run_finished  # noqa: PLC0415
    total = 0
    for run_dir in runs:
        if not run_finished(run_dir):
            print(f"{run_dir}: not finished: kept (a resume continues from its checkpoint)")
            continue
        sizes = prunable(run_dir)
        if not sizes:
            print(f"{run_dir}: finished, nothing to prune")
            continue
        holder = in_use_by(run_dir)
        if holder:
            print(f"{run_dir}: kept: {holder}")
            continue
        try:
            freed = prune_run(run_dir) if args.yes else sum(sizes.values())
        except RunInUse as err:   # taken since the check
            print(f"{run_dir}: kept: {err}")
            continue
        total += freed
        print(f"{run_dir}: finished, {'removed' if args.yes else 'would remove'} checkpoints/"
              f"{{{','.join(sizes)}}}: {freed / 1e9:.2f} GB")
    if args.yes:
        print(f"freed {total / 1e9:.2f} GB. These runs can be reported and exported, no longer resumed or extended")
    else:
        print(f"would free {total / 1e9:.2f} GB (a dry run: add --yes to remove). Pruned runs can be reported "
              "and exported, no longer resumed or extended")
    return 0


def _export(args) -> int:
    from genenv.export import ExportError, export  # noqa: PLC0415
    notes: list[str] = []
    try:
        rows = export(args.path, args.to, args.out, notes)
    except ExportError as err:
        print(f"genenv: export: {err}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"genenv: export: note: {note}", file=sys.stderr)
    print(", ".join(f"{name} {count} rows" for name, count in rows.items()) + f": {args.out}")
    return 0


def _report(args) -> int:
    from genenv.report import report_run, text_table  # noqa: PLC0415
    path = Path(args.path)
    if (path / "compare.json").exists():
        from genenv.compare import report_comparison  # noqa: PLC0415 (torch: a comparison's checks)
        report = report_comparison(path, reference=args.reference, arms=args.arms, dest=args.out)
        print(text_table(json.loads((report.parent / "summary.json").read_text())))
        print(f"report: {report}")
        return 0
    if not (path / "config.yaml").exists():
        print(f"genenv: report {path}: neither a run folder (config.yaml) nor a comparison (compare.json)",
              file=sys.stderr)
        return 2
    if args.reference or args.arms or args.out:
        print(f"genenv: report {path}: --reference, --arms and --out apply to a comparison folder, and this is one "
              "run", file=sys.stderr)
        return 2
    print(f"report: {report_run(path)}")
    return 0


def _eval(args) -> int:
    """One benchmark's evaluation, run by the module that declares it (:func:`genenv.domains.benchmark_modules`:
    heldout, a domain package's ``BENCHMARKS``, a plugin's entry point) with the options it declared; a bad path,
    name or model is one line on stderr and exit status 2."""
    from genenv.domains import benchmark_module, benchmark_modules  # noqa: PLC0415
    from genenv.models.registry import ModelNotAvailable  # noqa: PLC0415
    known = benchmark_modules()
    if args.benchmark not in known:
        print(f"genenv: --benchmark: {args.benchmark!r} is not a benchmark; choose one of "
              f"{', '.join(sorted(known))}", file=sys.stderr)
        return 2
    from genenv.eval_driver import eval_sampler  # noqa: PLC0415
    from genenv.io import atomic_write_json  # noqa: PLC0415
    from genenv.preflight import eval_problems  # noqa: PLC0415
    module = benchmark_module(args.benchmark)
    if args.sampler == "auto" and hasattr(module, "auto_sampler"):   # its own auto (heldout: the config's)
        sampler = module.auto_sampler(args)
        print(f"sampler: {sampler} (--sampler auto: what --benchmark {args.benchmark} decodes with; --sampler "
              "transformers, llama.cpp or vllm to choose)")
    elif args.sampler == "auto":
        sampler = eval_sampler("auto", args.model, args.device)
        print(f"sampler: {sampler} (--sampler auto: vLLM on a GPU, llama.cpp on the CPU, where it can decode the "
              "model; --sampler transformers, llama.cpp or vllm to choose)")
    else:
        sampler = args.sampler
    problems = eval_problems(args.model, sampler, args.device)   # the one preflight of an evaluation
    if problems:   # before any model loads or file is written
        for problem in problems:
            print(f"genenv: {problem}", file=sys.stderr)
        return 2
    common = dict(limit=args.limit, device=args.device, threads=args.threads, sampler=sampler,
                  sampler_dtype=args.sampler_dtype)
    try:
        module.from_command_line(args, common)
    except (ValueError, ModelNotAvailable, RuntimeError, OSError) as err:
        print(f"genenv: {str(err).splitlines()[0]}", file=sys.stderr)
        return 2
    scores_path = Path(args.out) / "scores.json"
    if scores_path.exists():   # which decoder decoded the answers, with the scores
        atomic_write_json(scores_path, {"sampler": sampler,   # (heldout records the one its config gave)
                                        "sampler_dtype": args.sampler_dtype if sampler == "llama.cpp" else None,
                                        **json.loads(scores_path.read_text())})
    print(f"scores: {scores_path}")
    return 0


def _named_benchmark(argv: list[str]) -> str | None:
    """The ``--benchmark NAME`` of a ``genenv eval`` command line (None for another command or none given)."""
    if not argv or argv[0] != "eval":
        return None
    for i, item in enumerate(argv):
        if item == "--benchmark" and i + 1 < len(argv):
            return argv[i + 1]
        if item.startswith("--benchmark="):
            return item.partition("=")[2]
    return None


def add_benchmark_arguments(parser: argparse.ArgumentParser, name: str) -> None:
    """The options benchmark ``name`` declares (its module's ``add_arguments``), as a group of ``parser``; nothing
    for a name no module declares (``_eval`` names the known ones)."""
    from genenv.domains import benchmark_module  # noqa: PLC0415
    module = benchmark_module(name)
    if module is not None and hasattr(module, "add_arguments"):
        module.add_arguments(parser.add_argument_group(f"--benchmark {name}"))


def _models(args) -> int:
    from genenv.models.registry import KNOWN_MODELS, ModelNotAvailable, model_folder, prepare  # noqa: PLC0415
    if args.action == "list":
        for name, spec in KNOWN_MODELS.items():
            folder = model_folder(name)
            state = f"prepared at {folder}" if (folder / "config.json").exists() else "not prepared"
            print(f"{name:10s} {spec.folder} (from the PyPI package {spec.pip_name}): {state}")
        return 0
    if not args.name:
        print(f"genenv: models {args.action}: name a model, e.g. `genenv models {args.action} "
              f"{'smollm2' if args.action == 'prepare' else 'FOLDER'}`", file=sys.stderr)
        return 2
    if args.action == "check":
        return _check_model(args)
    if args.action == "random":
        return _random_model(args)
    try:
        folder = prepare(args.name, log=lambda m: print(m, file=sys.stderr))
    except ModelNotAvailable as err:
        print(f"genenv: {err}", file=sys.stderr)
        return 2
    print(folder)
    return 0


def _check_model(args) -> int:
    """``genenv models check FOLDER``: the report of :func:`genenv.model_check.check_model`; exit status 1 when it
    found a problem, 2 for a bad preset or override."""
    from genenv.model_check import check_model  # noqa: PLC0415
    from genenv.models.registry import KNOWN_MODELS, ModelNotAvailable, resolve_model  # noqa: PLC0415
    try:
        folder = str(resolve_model(args.name, log=lambda m: print(m, file=sys.stderr))) \
            if args.name in KNOWN_MODELS else args.name
    except ModelNotAvailable as err:
        print(f"genenv: {err}", file=sys.stderr)
        return 2
    preset, machine = args.preset, []
    if preset is None:   # own-model, on the device this machine has (its preset asks for cuda)
        import torch  # noqa: PLC0415

        preset, machine = "own-model", [f"device={'cuda' if torch.cuda.is_available() else 'cpu'}"]
    cfg = load_config(preset, [*machine, *args.overrides, f"agent.model={folder}", f"env.model={folder}"])
    report = check_model(folder, cfg)
    settings = " ".join([*machine, *args.overrides])
    print(f"{folder} (memory for --preset {preset}{' ' + settings if settings else ''})")
    print(report.text())
    from genenv.players import samplers  # noqa: PLC0415
    from genenv.preflight import survey  # noqa: PLC0415
    for name, text in samplers(cfg).items():
        print(f"decoder of the {'agent' if name == 'agent' else 'simulator'}: {text}")
    problems = [problem for problem in survey(cfg).problems if problem not in report.problems]
    for problem in problems:   # what `genenv run` with these settings refuses besides
        print(f"run refuses  {problem}")
    return 1 if report.problem or problems else 0


def released_template(name: str) -> str:
    """The chat template of a released model family, as TRL ships it (``trl.chat_template_utils.<name>_chat_template``:
    e.g. qwen2_5, qwen3, llama3_2); a ConfigError listing the names for any other."""
    import trl.chat_template_utils as templates  # noqa: PLC0415 (the trl extra)
    known = sorted(n.removesuffix("_chat_template") for n in dir(templates)
                   if n.endswith("_chat_template") and "training" not in n and isinstance(getattr(templates, n), str))
    if name not in known:
        raise ConfigError(f"--chat-template: {name!r} is not a template TRL ships; choose one of {', '.join(known)}")
    return getattr(templates, f"{name}_chat_template")


def _random_model(args) -> int:
    """``genenv models random FAMILY --out F``: a random-weight model folder of an architecture family, its tokenizer
    trained on the preset's domain texts, for trying a command offline (nothing is downloaded). With
    ``--chat-template NAME`` the folder carries that released template (TRL's copy): qwen2_5 on the qwen2 family
    renders and parses tool calls, what TRL needs for a multi-turn domain."""
    import numpy as np  # noqa: PLC0415

    from genenv.domains import make_domain  # noqa: PLC0415
    from genenv.models.architectures import FAMILIES, random_folder  # noqa: PLC0415
    if args.name not in FAMILIES:
        raise ConfigError(f"models random: {args.name!r} is not an architecture family; choose one of "
                          f"{', '.join(FAMILIES)}")
    if not args.out:
        raise ConfigError("models random: --out FOLDER: where to write the model folder")
    if Path(args.out).exists():
        raise ConfigError(f"models random: --out {args.out}: already there; choose a new folder")
    template = released_template(args.chat_template) if args.chat_template else None
    cfg = load_config(args.preset or "own-model", args.overrides)
    domain = make_domain(cfg.domain.name, **cfg.domain.options)
    tasks = domain.seed_tasks(np.random.default_rng(0), 64)
    texts = [domain.agent_context([], domain.reset(task, seed=0)[1]) + " " + task.answer for task in tasks]
    # heads 32 wide whatever the family's own small width (16 for qwen3, gemma3_text, mistral): vLLM's CPU build
    # takes 32 or more
    folder = random_folder(args.name, args.out, texts, hidden_size=64, heads=2, head_dim=32, chat_template=template,
                           seed=0)
    print(f"{folder}: a random {args.name} model (2 layers, 64 wide; untrained: for trying commands, not for "
          f"results), its tokenizer trained on {cfg.domain.name}'s texts"
          + (f", the released {args.chat_template} chat template" if template else ""))
    return 0


def _domains(args) -> int:
    import sys as _sys  # noqa: PLC0415

    from genenv.domains import benchmark_names, registered_domains  # noqa: PLC0415
    domains = sorted(registered_domains().items())
    width = max(10, *(len(name) for name, _ in domains))
    benchmarks: dict[str, list[str]] = {}   # by the domain package that declares them
    for benchmark, package in benchmark_names().items():
        benchmarks.setdefault(package, []).append(benchmark)
    for name, cls in domains:
        # the class's docstring, else its module's: the first sentence, whole
        doc = (cls.__doc__ or getattr(_sys.modules.get(cls.__module__), "__doc__", None) or "").strip()
        first = " ".join(doc.split("\n\n")[0].split())
        sentence = first.split(". ")[0].rstrip(".") + "." if first else "(no description)"
        declared = benchmarks.get(cls.__module__.rpartition(".")[0] or cls.__module__, [])
        if declared:
            sentence += f" Benchmark: genenv eval --benchmark {', '.join(declared)}."
        print(textwrap.fill(f"{name:{width}s} {sentence}", width=100, subsequent_indent=" " * (width + 1)))
    return 0


def _config(args) -> int:
    if args.presets:
        for name in preset_names():
            print(f"{name:16s} {presets_dir() / (name + '.yaml')}")
        return 0
    cfg = load_config(args.preset, args.overrides)
    from genenv.curricula import make_curriculum  # noqa: PLC0415 (the curricula's registry checks the name)
    make_curriculum(cfg.curriculum)
    from genenv.signals import check_config  # noqa: PLC0415 (the strategies' registries check their names)
    check_config(cfg)
    from genenv.preflight import survey  # noqa: PLC0415 (the models, decoders and the domain's capabilities)
    for problem in survey(cfg).problems:   # what a run of it refuses: said, and the config still shown
        print(f"genenv: a run refuses: {problem}", file=sys.stderr)
    if args.describe:   # the values of the preset and overrides given (defaults: --preset default)
        for name, value, help_text in describe(values=cfg):
            print(f"{name:40s} {value!r:12}  {help_text}")
        print("components: the knobs of one choice, read only where the field named selects it")
        for name, value, help_text in describe_components(cfg):
            print(f"{name:40s} {value!r:12}  {help_text}")
        from genenv.signals import plugin_descriptions  # noqa: PLC0415
        for heading, rows in plugin_descriptions(cfg):   # (the strategies' plugins: genenv's options not adopted)
            print(heading)
            for name, value, help_text in rows:
                print(f"{name:40s} {'' if value == '' else repr(value):12}  {help_text}")
        return 0
    print(yaml.safe_dump(to_dict(cfg), sort_keys=False), end="")
    return 0


def _curriculum_names() -> tuple[str, ...]:
    from genenv.curricula import curriculum_names  # noqa: PLC0415
    return curriculum_names()


def build_parser(benchmark: str | None = None) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="genenv", description="GenEnv: co-evolve an LLM agent and its "
                                     "environment simulator with an alpha-curriculum reward.")
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="run (or resume) a co-evolution", description="Fields are overridden "
                           "with dotted KEY=VALUE pairs, e.g. `genenv run epochs=3 agent.lr=1e-4`; "
                           "`genenv config --describe` lists them.")
    run_p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. agent.lr=1e-4 epochs=3")
    run_p.add_argument("--preset", default="default",
                       help="a shipped preset (`genenv config --presets` lists them; default: default)")
    run_p.add_argument("--config", help="a YAML file applied after the preset")
    run_p.add_argument("--out", help="run folder (default: runs/<name>)")
    run_p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last checkpoint")
    run_p.set_defaults(func=_run)
    cmp_p = sub.add_parser("compare", help="run curricula x seeds side by side, then summary.json + report.html",
                           description="Runs every (curriculum, seed) pair as its own run folder under "
                           "OUT/runs/; finished pairs are skipped and unfinished ones resumed on a re-run.")
    cmp_p.add_argument("overrides", nargs="*", help="dotted overrides applied to every run, e.g. epochs=50")
    cmp_p.add_argument("--preset", default="default", help="a shipped preset for every run (default: default)")
    cmp_p.add_argument("--config", help="a YAML file applied after the preset")
    cmp_p.add_argument("--curricula", default=None, help="comma-separated, from: " + ",".join(_curriculum_names()))
    cmp_p.add_argument("--seeds", default="3", help="a count (3 -> seeds 0,1,2) or a list (0,4,7)")
    cmp_p.add_argument("--offline-multipliers", default="1.8,3.3", help="one offline arm per multiplier")
    cmp_p.add_argument("--workers", type=int, default=1, help="runs at a time (each single-threaded when > 1)")
    cmp_p.add_argument("--target", type=float, default=None,
                       help="held-out success for rollouts-to-target (default: genenv's mean final success)")
    cmp_p.add_argument("--arm", action="append", default=[], metavar="LABEL:OVERRIDES",
                       help="one more arm, e.g. 'genenv-pg:curriculum=genenv env.update=pg' (repeatable)")
    cmp_p.add_argument("--reference", default=None,
                       help="the arm every other is paired against (default: genenv)")
    cmp_p.add_argument("--out", required=True, help="comparison folder")
    cmp_p.set_defaults(func=_compare)
    rep_p = sub.add_parser("report", help="plots + a self-contained report.html of a run or a comparison")
    rep_p.add_argument("path", help="a run folder or a `genenv compare` folder")
    rep_p.add_argument("--reference", default=None,
                       help="comparisons: pair every arm against this one (default: the comparison's own)")
    rep_p.add_argument("--arms", default=None,
                       help="comparisons: report only these arms, LABEL or NEW=LABEL to relabel, e.g. "
                            "'genenv=genenv-exact,random=random-exact'")
    rep_p.add_argument("--out", default=None,
                       help="comparisons: write summary.json, report.html and plots/ here instead")
    rep_p.set_defaults(func=_report)
    exp_p = sub.add_parser("export", help="the pool's tasks, every generation and the kept rollouts as parquet "
                           "or a Hugging Face datasets folder (tasks also in veRL's prompt schema)")
    exp_p.add_argument("path", help="a run folder or a `genenv compare` folder (every run, with arm and seed)")
    exp_p.add_argument("--to", required=True, choices=["parquet", "hf"],
                       help="parquet: DIR/<table>.parquet; hf: a datasets folder (datasets.load_from_disk)")
    exp_p.add_argument("out", metavar="DIR", help="a new folder to write (refused if it exists)")
    exp_p.set_defaults(func=_export)
    pr_p = sub.add_parser("prune", help="free disk: remove finished runs' checkpoint states (a SmolLM2 run: 4 of "
                          "its 5 GB), keeping what reports and exports read; a dry run without --yes")
    pr_p.add_argument("path", help="a run folder or a `genenv compare` folder (its finished runs)")
    pr_p.add_argument("--yes", action="store_true", help="remove them (without it: list what would go)")
    pr_p.set_defaults(func=_prune)
    ev_p = sub.add_parser("eval", help="evaluate a model on a real benchmark with the benchmark's own checker",
                          epilog="Each benchmark declares its own options: `genenv eval --benchmark NAME --help` "
                          "lists them.")
    ev_p.add_argument("--benchmark", required=True,
                      help="which benchmark: heldout (a config's own dev and held-out sets, scored as `genenv run` "
                      "scores them) or one a domain package declares (bfcl, alfworld, api-bank, bamboogle, "
                      "travelplanner, a plugin's: `genenv domains` names each domain's; BFCL alone takes tens of "
                      "minutes on a CPU)")
    ev_p.add_argument("--model", required=True, help="a known name (smollm2), a Hugging Face Hub id "
                      "(org/name[@revision]) or a Hugging Face model folder")
    ev_p.add_argument("--limit", type=int, default=None,
                      help="first N entries of each category (a multi-turn entry scores all its turns)")
    ev_p.add_argument("--max-new-tokens", type=int, default=128, help="longest response per model step")
    ev_p.add_argument("--batch-size", type=int, default=8, help="prompts per generate() batch")
    ev_p.add_argument("--device", default="cpu", choices=("cpu", "cuda"), help="where the model runs")
    ev_p.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    ev_p.add_argument("--sampler", default="auto", choices=("auto", "transformers", "llama.cpp", "vllm"),
                      help="where the answers are decoded: auto (default: with --device cuda, vLLM where it can "
                           "decode the model and is installed; on the CPU llama.cpp where it can; else transformers), "
                           "llama.cpp (16 answers side by side; docs/llamacpp.md), vllm (docs/vllm.md) or transformers")
    ev_p.add_argument("--sampler-dtype", default="f16", choices=("f16", "bf16", "f32", "q8_0"),
                      help="--sampler llama.cpp: the weights it decodes with (f16 default; bf16 faster on CPUs with "
                           "avx512_bf16; f32 closest to transformers)")
    ev_p.add_argument("--out", default="runs/eval", help="folder for scores.json and the benchmark's result files")
    if benchmark:
        add_benchmark_arguments(ev_p, benchmark)
    ev_p.set_defaults(func=_eval)
    mod_p = sub.add_parser("models", help="list or prepare the named real models (e.g. smollm2), or check a model "
                           "folder before a run (docs/models.md)")
    mod_p.add_argument("action", choices=("prepare", "list", "check", "random"),
                       help="list the known models, prepare one, check a folder, or write a random-weight test folder")
    mod_p.add_argument("name", nargs="?", help="a known model name (smollm2), the folder to check, or (random) an "
                       "architecture family: llama, qwen2, qwen3, gemma3_text, phi3, mistral")
    mod_p.add_argument("overrides", nargs="*", help="check: config overrides of the run the memory is estimated for")
    mod_p.add_argument("--preset", default=None, help="check: the preset the memory is estimated for, with the "
                       "folder as both players (default: own-model on this machine's device); random: the preset "
                       "whose domain's texts train the tokenizer (default: own-model)")
    mod_p.add_argument("--out", help="random: the folder to write")
    mod_p.add_argument("--chat-template", help="random: a released template the folder carries, as TRL ships it "
                       "(qwen2_5 on qwen2: tool calls, for a multi-turn domain in TRL)")
    mod_p.set_defaults(func=_models)
    dom_p = sub.add_parser("domains", help="list registered domains")
    dom_p.set_defaults(func=_domains)
    chk_p = sub.add_parser("check-domain", help="check a domain's properties on untrusted text (exit 1 names the "
                           "first that fails)", description="Feeds generated text to a domain as simulator output and "
                           "as agent responses: parsing never raises and every rejection has a reason, scoring never "
                           "raises and stays in reward_range, a response with nothing in it earns nothing, and the "
                           "domain's own seed tasks parse back (docs/domains.md).")
    chk_p.add_argument("domain", help="a registered name (`genenv domains`) or module:Class")
    chk_p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                       help="a domain option, as domain.options.KEY (repeatable)")
    chk_p.add_argument("--examples", type=int, default=1000, help="generated texts per property (default 1000)")
    chk_p.add_argument("--seed", type=int, default=0, help="seed of the generated texts")
    chk_p.set_defaults(func=_check_domain)
    cfg_p = sub.add_parser("config", help="print the resolved config (or --describe every field)")
    cfg_p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. agent.lr=1e-4")
    cfg_p.add_argument("--preset", default="default", help="a shipped preset (default: default)")
    cfg_p.add_argument("--describe", action="store_true", help="every field, its default and what it does")
    cfg_p.add_argument("--presets", action="store_true", help="the shipped presets and where they are")
    cfg_p.set_defaults(func=_config)
    return parser


def _check_domain(args) -> int:
    from genenv.config import parse_override  # noqa: PLC0415
    from genenv.domain_check import check_domain  # noqa: PLC0415
    from genenv.domains import make_domain  # noqa: PLC0415
    options: dict = {}
    for item in args.option:
        options.update(parse_override(item))
    try:
        domain = make_domain(args.domain, **options)
    except (TypeError, ValueError) as error:
        raise ConfigError(f"check-domain {args.domain}: {error}") from None
    report = check_domain(domain, examples=max(1, args.examples), seed=args.seed)
    print(report.summary())
    for failure in report.failures[1:]:
        print(f"  also: {failure}")
    for note in report.notes:
        print(f"  note: {note}")
    return 0 if report.ok else 1


def parse_command_line(argv: list[str] | None = None) -> argparse.Namespace:
    """The parsed command line. ``KEY=VALUE`` overrides may stand before or after the options (``genenv run
    --preset smoke epochs=2 --out DIR threads=1``): argparse takes the ones before the first option as the
    command's positional overrides and leaves the later ones over, which are appended in order (the last setting of
    a key wins, as before). Anything else left over is the usual usage error."""
    argv = sys.argv[1:] if argv is None else list(argv)
    parser = build_parser(_named_benchmark(argv))   # `genenv eval --benchmark NAME`: with NAME's own options
    args, extra = parser.parse_known_args(argv)
    if extra:
        overrides = [item for item in extra if "=" in item and not item.startswith("-")]
        if len(overrides) != len(extra) or not isinstance(getattr(args, "overrides", None), list):
            parser.parse_args(argv)   # exits with argparse's message naming what it did not recognise
        args.overrides = args.overrides + overrides
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_command_line(argv)
    try:
        return args.func(args)
    except BrokenPipeError:   # `genenv run ... | head`: the reader left; stop quietly, as Unix tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except ConfigError as err:   # (the preflight's: a line per problem)
        for line in str(err).splitlines() or [""]:
            print(f"genenv: config error: {line}", file=sys.stderr)
        return 2
    except FileExistsError as err:
        print(f"genenv: {err}", file=sys.stderr)
        return 2
    except RuntimeError as err:
        from genenv.checkpoint import RunInUse  # noqa: PLC0415
        if not isinstance(err, RunInUse):
            raise
        print(f"genenv: {err}", file=sys.stderr)
        return 2
    except OSError as err:
        from genenv.io import no_space_left  # noqa: PLC0415
        if not no_space_left(err):
            raise
        run_dir = getattr(args, "resume", None) or getattr(args, "out", None) or "RUN_DIR"
        again = (f"`genenv run --resume {run_dir}` continues from its last complete checkpoint, which is intact"
                 if args.func is _run else "run the same command again (it resumes where it stopped)")
        print(f"genenv: {err.strerror or err}: free some space, then {again}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

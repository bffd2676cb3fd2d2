"""Command line: ``genenv run | domains | config``.

Exit status 2 and one line naming the field for any bad config value, unknown key or bad argument.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _run(args) -> int:
    from genenv.coevolve import load_run_config, run
    from genenv.config import load_config

    if args.resume:
        run_dir = Path(args.resume)
        if not (run_dir / "config.yaml").exists():
            print(f"genenv: --resume {run_dir}: no config.yaml there (not a run folder)", file=sys.stderr)
            return 2
        cfg = load_run_config(run_dir, args.overrides)
        run(cfg, run_dir=run_dir, resume=True)
        return 0
    cfg = load_config(args.preset, args.overrides, args.config)
    run_dir = Path(args.out) if args.out else Path(cfg.out_dir) / cfg.name
    if (run_dir / "metrics.jsonl").exists():
        print(f"genenv: {run_dir} already holds a run: resume it with `genenv run --resume {run_dir}` "
              "or choose another --out / name=", file=sys.stderr)
        return 2
    out = run(cfg, run_dir=run_dir)
    print(f"run folder: {out}")
    return 0


def _domains(args) -> int:
    from genenv.domains import registered_domains
    for name, cls in sorted(registered_domains().items()):
        doc = (cls.__doc__ or "").strip().splitlines()
        print(f"{name:12s} {doc[0] if doc else ''}")
    return 0


def _config(args) -> int:
    from genenv.config import describe, load_config, to_dict
    import yaml
    if args.describe:
        for name, default, help_text in describe():
            print(f"{name:40s} {default!r:12}  {help_text}")
        return 0
    print(yaml.safe_dump(to_dict(load_config(args.preset, args.overrides)), sort_keys=False), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="genenv", description="GenEnv: co-evolve an LLM agent and its "
                                     "environment simulator with an alpha-curriculum reward.")
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="run (or resume) a co-evolution", description="Fields are overridden "
                           "with dotted KEY=VALUE pairs, e.g. `genenv run epochs=3 agent.lr=1e-4`; "
                           "`genenv config --describe` lists them.")
    run_p.add_argument("overrides", nargs="*", help="dotted overrides, e.g. agent.lr=1e-4 epochs=3")
    run_p.add_argument("--preset", default="default", help="a config under configs/ (default: default)")
    run_p.add_argument("--config", help="a YAML file applied after the preset")
    run_p.add_argument("--out", help="run folder (default: out_dir/name)")
    run_p.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its last checkpoint")
    run_p.set_defaults(func=_run)
    dom_p = sub.add_parser("domains", help="list registered domains")
    dom_p.set_defaults(func=_domains)
    cfg_p = sub.add_parser("config", help="print the resolved config (or --describe every field)")
    cfg_p.add_argument("overrides", nargs="*")
    cfg_p.add_argument("--preset", default="default")
    cfg_p.add_argument("--describe", action="store_true")
    cfg_p.set_defaults(func=_config)
    return parser


def main(argv: list[str] | None = None) -> int:
    from genenv.config import ConfigError
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as err:
        print(f"genenv: config error: {err}", file=sys.stderr)
        return 2
    except FileExistsError as err:
        print(f"genenv: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

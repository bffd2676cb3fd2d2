"""Shared by the benchmark scripts that take ``--preset NAME [overrides]``."""

import argparse

import torch

from genenv.config import load_config
from genenv.domains import make_domain


def preset_from_args(doc: str, extra: dict[str, dict]):
    """Parse ``--preset`` + ``extra`` options + dotted overrides; returns (args, config, domain)."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--preset", default="default")
    for flag, options in extra.items():
        parser.add_argument(flag, **options)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_intermixed_args()  # (overrides may come before and after the options)
    cfg = load_config(args.preset, args.overrides)
    torch.set_num_threads(cfg.threads)
    return args, cfg, make_domain(cfg.domain.name, **cfg.domain.options)

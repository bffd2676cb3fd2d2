"""Peak resident memory of a run, per phase, beside the static footprint of its weights and optimiser states.

Runs ``--preset`` for ``--epochs`` epochs in a fresh child process (so nothing else shares its memory; its warm
starts come from the cache under ~/.cache/genenv, trained first when absent) and prints:

- the child's peak resident set size over the whole run, and while it built its players (before epoch 1);
- each phase's peak (the largest over the epochs; ``peak_rss_mb_by_phase`` in metrics.jsonl, Linux);
- the static footprint the run cannot go below: every model copy's weights, plus the gradients and AdamW
  states of the trainable parameters, from the parameter counts.

Usage: python benchmarks/memory.py --preset smollm2-bfcl [--epochs 2] [overrides ...]
Before/after a change: run it once per checkout, e.g. ``PYTHONPATH=../old/src python benchmarks/memory.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

MB = 2**20


def peak_rss_bytes() -> int:
    """This process's peak resident set size (read here, not from genenv, so the script also measures an older
    checkout of genenv)."""
    import resource  # noqa: PLC0415 (Unix)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def child(preset: str, epochs: int, overrides: list[str]) -> dict:
    """Runs in the child process: the run, then its measurements as one JSON object."""
    import torch

    from genenv.coevolve import run
    from genenv.config import load_config
    from genenv.io import read_jsonl
    from genenv.models.policy import Policy

    cfg = load_config(preset, [*overrides, f"epochs={epochs}", f"eval_every={epochs}", "progress=false"])
    torch.set_num_threads(cfg.threads)
    build_peak = {}

    def log(message: str) -> None:
        if message.startswith("after warm start") and "setup" not in build_peak:
            build_peak["setup"] = peak_rss_bytes()  # players built (warm start from the cache) and evaluated

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = run(cfg, run_dir=f"{tmp}/run", log=log)
        total_peak = peak_rss_bytes()
        rows = read_jsonl(run_dir / "metrics.jsonl")
        static = {}
        for role, player in (("agent", cfg.agent), ("env", cfg.env)):
            policy = Policy.load(run_dir / "final" / role, dtype=player.dtype)
            if player.lora_rank:
                policy.apply_lora(player.lora_rank)
            weights = sum(p.numel() * p.element_size() for p in policy.model.parameters())
            trainable = sum(p.numel() * p.element_size() for p in policy.trainable_parameters())
            static[role] = {"weights_mb": weights / MB, "trainable_mb": trainable / MB}
    phases: dict[str, float] = {}
    for row in rows:
        for phase, mb in (row.get("peak_rss_mb_by_phase") or {}).items():
            phases[phase] = max(phases.get(phase, 0.0), mb)
    # genenv resets the peak at each phase (Linux), so the run's peak is the largest of the parts
    peak = max([total_peak / MB, (build_peak.get("setup") or 0) / MB, *phases.values()])
    return {"peak_mb": peak, "setup_peak_mb": (build_peak.get("setup") or 0) / MB,
            "phases_mb": phases, "static": static}


def static_footprint_mb(static: dict) -> dict[str, float]:
    """Weights of the policy and its frozen reference, plus gradient and two AdamW moments per trainable
    parameter, for each player."""
    return {role: 2 * s["weights_mb"] + 3 * s["trainable_mb"] for role, s in static.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="smollm2-bfcl")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_intermixed_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.preset, args.epochs, args.overrides)), flush=True)
        return
    command = [sys.executable, __file__, "--child", "--preset", args.preset, "--epochs", str(args.epochs),
               *args.overrides]
    done = subprocess.run(command, capture_output=True, text=True, env=os.environ.copy())
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    if done.returncode != 0 or not lines:
        sys.exit(f"the measured run failed (exit {done.returncode}):\n{done.stderr[-4000:]}")
    result = json.loads(lines[-1][len("RESULT "):])
    static = static_footprint_mb(result["static"])
    print(f"preset {args.preset}, {args.epochs} epochs {' '.join(args.overrides)}")
    print(f"peak resident memory of the run: {result['peak_mb']:8.0f} MB")
    print(f"  players built and evaluated:   {result['setup_peak_mb']:8.0f} MB")
    for phase, mb in sorted(result["phases_mb"].items(), key=lambda kv: -kv[1]):
        print(f"  phase {phase:<24s} {mb:8.0f} MB")
    for role, s in result["static"].items():
        print(f"static {role}: weights {s['weights_mb']:.0f} MB, trainable {s['trainable_mb']:.0f} MB; "
              f"policy + reference + gradient + 2 AdamW moments = {static[role]:.0f} MB")
    total_static = sum(static.values())
    print(f"static footprint (both players): {total_static:.0f} MB; the run's peak is "
          f"{result['peak_mb'] / total_static:.2f}x it")


if __name__ == "__main__":
    main()

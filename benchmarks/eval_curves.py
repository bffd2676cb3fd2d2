"""Each run's evaluations, compactly: per arm and seed, dev and held-out success at every evaluated epoch, with the
run's mean band hit rate and mixed-group fraction. A few kB where metrics.jsonl is hundreds: what a session commits
so that a later session (on another machine) can pair its seeds with these (issue 55).

    .venv/bin/python benchmarks/eval_curves.py LABEL=ARM_DIR [LABEL=ARM_DIR ...] --out FILE.json

``ARM_DIR`` holds ``seed<k>/`` run folders (a comparison's ``runs/<arm>``); a run still going counts what it has.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from genenv.io import atomic_write_json, read_jsonl


def curves(arm_dir: Path) -> dict[str, dict]:
    """Seed -> {"evaluations": {epoch: [dev, held-out]}, "epochs", "band_hit_rate", "mixed_groups"}."""
    out = {}
    for seed_dir in sorted(arm_dir.glob("seed*/"), key=lambda p: int(p.name[4:]) if p.name[4:].isdigit() else -1):
        path = seed_dir / "metrics.jsonl"
        rows = read_jsonl(path) if path.exists() else []
        if not rows:
            continue
        band = [r["band_hit_rate"] for r in rows if r.get("band_hit_rate") is not None]
        mixed = [r["effective_fraction"] for r in rows if r.get("effective_fraction") is not None]
        out[seed_dir.name[4:]] = {
            "epochs": len(rows),
            "evaluations": {str(r["epoch"]): [r["dev_success"], r["heldout_success"]] for r in rows
                            if r.get("dev_success") is not None},
            "band_hit_rate": round(sum(band) / len(band), 4) if band else None,
            "mixed_groups": round(sum(mixed) / len(mixed), 4) if mixed else None}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("arms", nargs="+", metavar="LABEL=ARM_DIR")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    result = {label: curves(Path(path)) for label, _, path in (item.partition("=") for item in args.arms)}
    atomic_write_json(Path(args.out), result)
    print(json.dumps({label: sorted(seeds) for label, seeds in result.items()}))


if __name__ == "__main__":
    main()

"""Same masks: the simulator's token masks computed by two code trees, compared (a restructuring of
``genenv.constrained`` must keep them bit for bit, issue 76).

For every domain that declares a task shape: ``--texts`` seed tasks, each replayed through ``TokenConstraint`` (the
masks a sampler saw before each of its tokens) without a budget and under two budgets (one that makes the text
close early, one past it), on the domain's tiny vocabulary and, given ``--model``, that model's tokenizer. Each
tree runs in a process of its own with its ``src`` first on PYTHONPATH; the masks are hashed per case and the hashes
compared.

    git worktree add /tmp/before <commit>
    .venv/bin/python benchmarks/same_masks.py --before /tmp/before/src --model MODEL_FOLDER

(MODEL_FOLDER: e.g. ``genenv models prepare smollm2``'s folder under ~/.cache/genenv/models.)

Exit status 0 when every case is equal, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent / "src"
SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"

HASHES = r'''
import hashlib, json, sys, warnings
warnings.simplefilter("ignore")
import numpy as np
from genenv.constrained import TokenConstraint
from genenv.domains import make_domain
from genenv.models.tiny import build_tiny_tokenizer
texts_per_domain, model, shared = int(sys.argv[1]), sys.argv[2], sys.argv[3]
options = {"apibank": {"data": f"{shared}/api-bank"}, "travel": {"data": f"{shared}/travelplanner"}}
out = {}
for name in ("household", "toolcall", "multihop", "apibank", "travel", "addition"):
    try:
        domain = make_domain(name, **options.get(name, {}))
        shape = domain.task_shape()
    except Exception as error:   # (data not here, an extra not installed)
        out[name] = f"not measured: {str(error)[:80]}"
        continue
    if shape is None:
        continue
    tokenizers = {"tiny": build_tiny_tokenizer(domain.alphabet, domain.tiny_words)} if domain.alphabet else {}
    if model:
        from transformers import AutoTokenizer
        tokenizers["model"] = AutoTokenizer.from_pretrained(model)
    texts = [t.text for t in domain.seed_tasks(np.random.default_rng(0), texts_per_domain)]
    for label, tokenizer in tokenizers.items():
        for budget in (None, 48, 400):
            constraint = TokenConstraint(shape, tokenizer, len(tokenizer), tokenizer.eos_token_id, name,
                                         budget=budget)
            digest = hashlib.sha256()
            for text in texts:
                ids = tokenizer.encode(text, add_special_tokens=False)[: (budget or 10**9) + 8]
                digest.update(constraint.replay(ids).tobytes())
            out[f"{name} {label} budget={budget}"] = digest.hexdigest()[:16]
print(json.dumps(out))
'''


def hashes(source: Path, texts: int, model: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(source))
    done = subprocess.run([sys.executable, "-c", HASHES, str(texts), model, str(SHARED)], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{source}: failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the earlier code's src folder (a worktree's)")
    parser.add_argument("--model", default="", help="a model folder whose tokenizer is measured too")
    parser.add_argument("--texts", type=int, default=4, help="seed texts per domain")
    args = parser.parse_args(argv)
    before, after = hashes(args.before.resolve(), args.texts, args.model), hashes(HERE, args.texts, args.model)
    differ = [case for case in sorted(before.keys() | after.keys()) if before.get(case) != after.get(case)]
    for case in sorted(after):
        print(f"{case:36s} {'same' if case not in differ else 'DIFFERENT'}  {after[case]}")
    print(f"{'DIFFERENT' if differ else 'same'}: {len(after) - len(differ)} of {len(after)} cases equal")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

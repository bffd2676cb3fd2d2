"""One domain's episodes through verifiers' own eval client (`vf-eval genenv-<domain>`) against genenv's own rollout
driver, both on one llama.cpp server of SmolLM2 (started here, on the loopback address, offline) with the same tasks,
greedy, one request at a time: the wall time of each and their ratio, and whether both gave the same rewards
(issue 93). vf-eval's time includes its start (loading the taskset, preparing its chat program); genenv's, only the
rollouts. A single-turn domain (genenv's driver sends a domain's text prompt as one user message).

    .venv/bin/python benchmarks/verifiers_speed.py [--domain apibank --data ../shared/data/api-bank] [--tasks 8]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from genenv.domains import make_domain
from genenv.integrations.verifiers import genenv_task, split_tasks
from genenv.models.registry import KNOWN_MODELS, packaged_file
from genenv.models.remote import RemoteSimulator
from genenv.rollout import rollout

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def start_server(log: Path) -> tuple[subprocess.Popen, str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "llama_cpp.server", "--model",
                               str(packaged_file(KNOWN_MODELS["smollm2"])), "--model_alias", "smollm2-135m",
                               "--host", "127.0.0.1", "--port", str(port), "--n_threads", "2", "--n_ctx", "4096"],
                              stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    for _ in range(240):
        try:
            urllib.request.urlopen(f"{url}/models", timeout=1).read()
            return server, url
        except OSError:
            time.sleep(0.5)
    server.terminate()
    raise SystemExit(f"the server did not answer: {log.read_text()[-1000:]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--domain", default="apibank")
    parser.add_argument("--data", default=str(ROOT.parent / "shared" / "data" / "api-bank"))
    parser.add_argument("--tasks", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=48)
    args = parser.parse_args()
    options = {"data": args.data} if args.domain in ("apibank", "travel") else {}
    domain = make_domain(args.domain, **options)
    if domain.multi_turn:
        raise SystemExit(f"{args.domain} is multi-turn: genenv's driver here sends one prompt per task")
    tasks = split_tasks(args.domain, options, "heldout", 100, 1, 0)[:args.tasks]
    with tempfile.TemporaryDirectory() as folder:
        server, url = start_server(Path(folder) / "server.log")
        try:
            start = time.perf_counter()
            done = subprocess.run([str(BIN / "vf-eval"), f"genenv-{args.domain.replace('_', '-')}", "--no-push",
                                   "--client.base-url", url, "--model", "smollm2-135m", "-c", "1", "-n",
                                   str(args.tasks), "--sampling.max-tokens", str(args.max_tokens),
                                   "--sampling.temperature", "0", "--env.taskset.options", json.dumps(options),
                                   "--output-dir", str(Path(folder) / "eval")],
                                  capture_output=True, text=True, env={**os.environ, "OPENAI_API_KEY": "none"})
            verifiers_s = time.perf_counter() - start
            if done.returncode != 0:
                raise SystemExit(done.stdout[-2000:] + done.stderr[-2000:])
            traces = [trace for file in Path(folder, "eval").rglob("traces.jsonl")
                      for line in file.read_text().splitlines() for trace in json.loads(line)["traces"]]
            theirs = {genenv_task(t["task"]["data"]["genenv_task"]).text: t["rewards"]["reward"]["score"]
                      for t in traces}
            policy = RemoteSimulator(url, "smollm2-135m", concurrency=1, timeout_s=300)
            start = time.perf_counter()
            groups = rollout(domain, policy, tasks, greedy=True, max_new_tokens=args.max_tokens)
            genenv_s = time.perf_counter() - start
        finally:
            server.terminate()
            server.wait(timeout=30)
    ours = {task.text: group[0].reward for task, group in zip(tasks, groups)}
    print(f"{args.domain}, {len(tasks)} held-out tasks, SmolLM2 on llama.cpp's server, greedy, <= {args.max_tokens} "
          f"tokens, one request at a time")
    print(f"  vf-eval (verifiers' client, its start included): {verifiers_s:7.1f} s")
    print(f"  genenv rollout() (OpenAI client):                 {genenv_s:7.1f} s")
    print(f"  ratio vf-eval / genenv: {verifiers_s / genenv_s:.2f}x; rewards: verifiers {sorted(theirs.values())}, "
          f"genenv {sorted(ours.values())}")


if __name__ == "__main__":
    main()

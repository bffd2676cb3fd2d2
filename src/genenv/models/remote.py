"""Any OpenAI-compatible endpoint as a frozen simulator (issue 43): ``env.backend=openai``.

The authors' own GenEnv code writes tasks with a frozen LLM; a user with a large model already served (vLLM,
SGLang, llama.cpp's server, a hosted API) brings it the same way: the simulator's prompts go to the endpoint,
its answers come back as generations the domain parses, validates and scores like any other. The remote model is
never trained, so it serves the curricula that do not train the simulator (``random`` is the authors' setup,
``static``, ``learnability``); ``genenv`` with it is a configuration error.

Requests run ``env.openai.concurrency`` at a time, each with a timeout and ``retries`` retries (the ``openai``
client's own backoff). A request that still fails is an invalid generation whose reason says why (``simulator
request failed: ...``), counted in ``invalid_reasons`` like a malformed task: never a crash. Each generation
asks with a seed derived from the run's seed and its key, so a server that honours ``seed`` answers the same
again; the API key is read from ``OPENAI_API_KEY``, the client's own variable (never written to the run folder).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from genenv.models.policy import Generation
from genenv.seeding import grid_keys

REMOTE_FILE = "remote.json"   # in a run's checkpoints/initial/env and final/env: which endpoint wrote the tasks


class RemoteSimulator:
    """The part of :class:`~genenv.models.policy.Policy` a frozen simulator needs: ``generate`` (text only: no
    token ids or log-probs, nothing trains on them) and what a run folder records of its player."""

    trains = False

    def __init__(self, base_url: str, model: str, api: str = "chat", concurrency: int = 4, timeout_s: float = 60.0,
                 retries: int = 2):
        self.base_url, self.model, self.api = base_url, model, api
        self.concurrency, self.timeout_s, self.retries = concurrency, timeout_s, retries
        self.model_seconds = 0.0
        self._client = None

    @classmethod
    def from_config(cls, openai_cfg) -> "RemoteSimulator":
        return cls(openai_cfg.base_url, openai_cfg.model, openai_cfg.api, openai_cfg.concurrency, openai_cfg.timeout_s,
                   openai_cfg.retries)

    def __getstate__(self):   # sent to Ray workers: each opens its own client
        return {**self.__dict__, "_client": None}

    @property
    def client(self):
        if self._client is None:
            import openai  # noqa: PLC0415 (optional: the openai extra)
            self._client = openai.OpenAI(base_url=self.base_url, api_key=os.environ.get("OPENAI_API_KEY") or "none",
                                         timeout=self.timeout_s, max_retries=self.retries)
        return self._client

    def _request(self, prompt: str, max_new_tokens: int, temperature: float, seed: int) -> Generation:
        try:
            if self.api == "chat":
                reply = self.client.chat.completions.create(
                    model=self.model, messages=[{"role": "user", "content": prompt}], max_tokens=max_new_tokens,
                    temperature=temperature, seed=seed)
                text = reply.choices[0].message.content or ""
            else:
                reply = self.client.completions.create(model=self.model, prompt=prompt, max_tokens=max_new_tokens,
                                                       temperature=temperature, seed=seed)
                text = reply.choices[0].text or ""
            finished = reply.choices[0].finish_reason != "length"
            return Generation([], [], text, [], finished)
        except Exception as err:  # noqa: BLE001 (any failure of a remote call is an invalid generation, never a crash)
            first = str(err).splitlines()[0][:200] if str(err) else ""
            return Generation([], [], "", [], False, error=f"{type(err).__name__}: {first}".rstrip(": "))

    def generate(self, prompts: list[str], n: int = 1, max_new_tokens: int = 16, temperature: float = 1.0,
                 greedy: bool = False, seed: int = 0, batch_size: int = 512, prompt_ids=None,
                 keys=None, constraint=None) -> list[list[Generation]]:
        """``n`` answers per prompt, one request each (``concurrency`` at a time), in order. (``constraint`` is
        always None: ``env.constrained`` needs the model's own logits, which an endpoint does not send.)"""
        if keys is None:
            keys = grid_keys(0, len(prompts), n)
        jobs = [(prompt, _request_seed(seed, keys[i * n + j])) for i, prompt in enumerate(prompts) for j in range(n)]
        temperature = 0.0 if greedy else temperature
        start = time.perf_counter()
        with ThreadPoolExecutor(max_workers=max(1, self.concurrency)) as pool:
            out = list(pool.map(lambda job: self._request(job[0], max_new_tokens, temperature, job[1]), jobs))
        self.model_seconds += time.perf_counter() - start
        return [out[i * n:(i + 1) * n] for i in range(len(prompts))]

    # ------------------------------------------------------------------ what a run folder keeps of it
    def describe(self) -> dict:
        return {"backend": "openai", "base_url": self.base_url, "model": self.model, "api": self.api}

    def save(self, path: str | Path) -> None:
        path = Path(path)
        path.mkdir(parents=True, exist_ok=True)
        (path / REMOTE_FILE).write_text(json.dumps(self.describe(), indent=1))

    def save_weights(self, file: str | Path) -> None:
        Path(file).write_text(json.dumps(self.describe()))

    def load_weights(self, file: str | Path) -> None:
        """Nothing to load: the remote model never changes."""

    def num_parameters(self) -> int:
        return 0

    def trainable_parameters(self) -> list:
        return []

    def frozen_copy(self) -> "RemoteSimulator":
        return self

    def set_gradient_checkpointing(self, enabled: bool) -> None:
        """No local forward passes."""


def _request_seed(seed: int, key) -> int:
    """A request's seed from the run's and its key (a server that honours it answers the same again)."""
    digest = hashlib.sha256(f"{seed}:{int(key)}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF

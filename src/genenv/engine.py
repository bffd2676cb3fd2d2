"""Where an epoch's model-heavy phases run: in the run's own process, or sharded over Ray actors.

The simulator's task writing (phase 1), the agent's rollouts (phase 3) and its greedy evaluation (phase 8)
are cut into shards by the config alone (:func:`genenv.rollout.tasks_per_shard`), and every sampled sequence
draws its randomness from (seed, epoch, phase, task, sample, turn) (:func:`genenv.seeding.sequence_uniforms`).
A shard is therefore the same
computation wherever it runs, and a run gives the same metrics for ``engine.workers`` = 0 (in-process), 1 or 2,
as long as every process uses the same number of torch threads (``threads``; a matrix product may round
differently with another thread count).

With ``engine.workers=N`` (``pip install 'genenv-coevolve[ray]'``), N Ray actors each hold a replica of both players and
the domain; the learner (GRPO, the simulator's update) stays in the driver. After every update the driver puts
the new weights in Ray's object store once, and each actor loads them before its next shard and checks that it
holds the version the shard was sent with. Multi-turn episodes run inside the actors with the domain; shards
come back as plain data (episodes, generations). An actor that dies is replaced by a fresh one (current
weights) and its shard is redone, up to ``engine.max_restarts`` times in a run.

Warm starts and the evaluation right after them, the single-step accuracy of domains with an expert, and a
fixed-data curriculum's one-time set stay in the driver.
"""

from __future__ import annotations

import os
import socket
import time

from genenv.config import ConfigError, RunConfig
from genenv.domains.base import Domain
from genenv.generation import write_shard
from genenv.rollout import rollout_shard

ROLES = ("agent", "env")


def run_shard(role: str, domain: Domain, policy, shard: dict, constraint=None):
    """One shard: the agent's rollout groups of some tasks, or the simulator's generations for some prompts (under
    the simulator's ``constraint``, ``env.constrained``)."""
    if role == "agent":
        return rollout_shard(domain, policy, **shard)
    return write_shard(policy, **shard, constraint=constraint)


class LocalEngine:
    """Shards run one after another in this process, with the driver's own players."""
    workers = 0
    wait_seconds = 0.0   # the players' own clocks count the model time spent here

    def __init__(self, domain: Domain, players):
        self.domain, self.players = domain, players

    def run_shards(self, role: str, shards: list[dict]) -> list:
        policy = self.players.agent if role == "agent" else self.players.env
        return [run_shard(role, self.domain, policy, shard, self.players.env_constraint) for shard in shards]

    def weights_changed(self, role: str) -> None:
        """Nothing to send: the shards use the driver's players themselves."""

    def close(self) -> None:
        pass


def make_engine(cfg: RunConfig, domain: Domain, players) -> Engine:
    return RayEngine(cfg, domain, players) if cfg.engine.workers > 0 else LocalEngine(domain, players)


def _import_ray():
    try:
        import ray  # noqa: PLC0415 (optional dependency, imported when used)
    except ImportError:
        raise ConfigError("engine.workers > 0 runs on Ray, which is not installed: pip install 'genenv-coevolve[ray]' "
                          "(ray==2.60.0), or set engine.workers=0") from None
    return ray


def init_local_ray(ray, **resources) -> None:
    """Start a local Ray whose actors run at this process's priority: Ray starts its workers niced by 15, so beside
    other CPU-bound jobs a run's own actors, which the run waits on, were starved (a replacement actor spent minutes
    importing transformers with two busy jobs on a 2-core machine: the suite under load, issue 77)."""
    previous = os.environ.get("RAY_worker_niceness")
    os.environ["RAY_worker_niceness"] = "0"
    try:
        ray.init(include_dashboard=False, log_to_driver=False, **resources)
    finally:
        if previous is None:
            os.environ.pop("RAY_worker_niceness", None)
        else:
            os.environ["RAY_worker_niceness"] = previous


def _check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast on a host:port nobody listens on (ray.init would retry for minutes); 'auto' is Ray's to resolve."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        raise ValueError("expected 'auto' or host:port")
    with socket.create_connection((host, int(port)), timeout=timeout):
        pass


def _check_resources(ray, cfg: RunConfig) -> None:
    """Actors the cluster can never place would wait forever: say so at once, naming the settings. (Its total,
    not what is free now: actors of a closing engine free their CPUs a moment later.)"""
    total, ec = ray.cluster_resources(), cfg.engine
    for resource, per_worker, knob in (("CPU", cfg.threads, "threads"), ("GPU", ec.gpus_per_worker,
                                                                         "engine.gpus_per_worker")):
        needed = ec.workers * per_worker
        if needed > total.get(resource, 0.0) + 1e-9:
            raise ConfigError(f"engine.workers: {ec.workers} actors x {knob}={per_worker:g} need {needed:g} "
                              f"{resource}s, the Ray cluster has {total.get(resource, 0.0):g}; lower one of them or "
                              "add nodes")


class _Worker:
    """One actor: replicas of both players and the domain; runs shards with the weights version it was sent."""

    def __init__(self, domain: Domain, agent, env, versions: dict, threads: int, device: str, env_constraint=None):
        import torch  # noqa: PLC0415 (in the actor's process)
        torch.set_num_threads(threads)
        self.domain, self.env_constraint = domain, env_constraint
        self.policies = {"agent": agent, "env": env}
        for policy in self.policies.values():
            if hasattr(policy, "model"):   # (a remote simulator has no local model)
                policy.device = device
                policy.model.to(device)
            if hasattr(getattr(policy, "sampler", None), "attach"):   # sampler=vllm: an engine of its own
                policy.sampler.attach(policy)
        self.versions = dict(versions)

    def load(self, role: str, version: int, state: dict) -> int:
        self.policies[role].model.load_state_dict(state)
        self.versions[role] = version
        return version

    def run(self, role: str, version: int, shard: dict):
        if self.versions[role] != version:
            raise RuntimeError(f"worker {os.getpid()} holds {role} weights version {self.versions[role]}, "
                               f"the shard was sent for version {version}")
        return run_shard(role, self.domain, self.policies[role], shard, self.env_constraint)

    def state(self) -> dict:
        """Its process id and the weights versions it holds (for tests and diagnostics)."""
        return {"pid": os.getpid(), "versions": dict(self.versions)}


class RayEngine:
    """Shards spread over ``engine.workers`` Ray actors (see the module's docstring)."""

    def __init__(self, cfg: RunConfig, domain: Domain, players):
        self.ray = ray = _import_ray()
        ec = cfg.engine
        self.cfg, self.domain, self.players = cfg, domain, players
        self.workers = ec.workers
        self.restarts = 0
        self.wait_seconds = 0.0   # the driver's wall time waiting for shards (the actors' model time, in parallel)
        if not ray.is_initialized():
            address = os.environ.get("RAY_ADDRESS", "")   # Ray's own variable: the cluster to join, if any
            try:
                if address:
                    _check_reachable(address)
                    ray.init(address=address, include_dashboard=False, log_to_driver=False)
                else:
                    init_local_ray(ray, num_cpus=max(os.cpu_count() or 1, ec.workers * cfg.threads),
                                   num_gpus=None if ec.gpus_per_worker else 0)
            except (ConnectionError, OSError, RuntimeError, ValueError) as err:
                raise ConfigError(f"RAY_ADDRESS: cannot reach a Ray cluster at {address!r} "
                                  f"({str(err).splitlines()[0] if str(err) else type(err).__name__}); start one "
                                  "with `ray start --head` or unset RAY_ADDRESS for a local Ray") from None
        _check_resources(ray, cfg)
        # each actor runs `threads` torch threads: it reserves that many CPUs
        self._remote = ray.remote(num_cpus=cfg.threads, num_gpus=ec.gpus_per_worker)(_Worker)
        self.versions = {role: 0 for role in ROLES}
        self._domain = ray.put(domain)   # it never changes: one copy in the object store for every actor
        self._constraint = ray.put(players.env_constraint)   # nor does the simulator's task shape
        self.actors = self._new_actors(ec.workers)

    # ------------------------------------------------------------------ actors and weights
    def _new_actors(self, count: int) -> list:
        """``count`` fresh actors holding the driver's current players (put in the object store once for all)."""
        agent, env = self.ray.put(self.players.agent), self.ray.put(self.players.env)
        return [self._remote.remote(self._domain, agent, env, self.versions, self.cfg.threads, self.cfg.device,
                                    self._constraint) for _ in range(count)]

    def weights_changed(self, role: str) -> None:
        """The driver updated ``role``'s weights: the next shards need the new version (put once, here)."""
        policy = self.players.agent if role == "agent" else self.players.env
        self.versions[role] += 1
        state = {name: tensor.detach().to("cpu", copy=True) for name, tensor in policy.model.state_dict().items()}
        weights = self.ray.put(state)
        for actor in self.actors:
            actor.load.remote(role, self.versions[role], weights)

    # ------------------------------------------------------------------ shards
    def run_shards(self, role: str, shards: list[dict]) -> list:
        """Each shard on the next free actor; results in the shards' order. A dead actor is replaced and its shard
        sent again."""
        start = time.perf_counter()
        try:
            return self._run_shards(role, shards)
        finally:
            self.wait_seconds += time.perf_counter() - start

    def _run_shards(self, role: str, shards: list[dict]) -> list:
        ray = self.ray
        results: list = [None] * len(shards)
        todo = list(range(len(shards)))[::-1]
        running = {}   # object ref -> (shard index, actor slot)
        free = list(range(len(self.actors)))[::-1]
        while todo or running:
            while todo and free:
                index, slot = todo.pop(), free.pop()
                ref = self.actors[slot].run.remote(role, self.versions[role], shards[index])
                running[ref] = (index, slot)
            done, _ = ray.wait(list(running), num_returns=1)
            index, slot = running.pop(done[0])
            try:
                results[index] = ray.get(done[0])
            except ray.exceptions.RayActorError as err:
                self._replace(slot, err)
                todo.append(index)
            free.append(slot)
        return results

    def _replace(self, slot: int, err: Exception) -> None:
        self.restarts += 1
        if self.restarts > self.cfg.engine.max_restarts:
            raise RuntimeError(f"engine: Ray actors died {self.restarts} times in this run (more than "
                               f"engine.max_restarts={self.cfg.engine.max_restarts}); last: {err}") from err
        self.ray.kill(self.actors[slot], no_restart=True)
        self.actors[slot] = self._new_actors(1)[0]

    def worker_states(self) -> list[dict]:
        return self.ray.get([actor.state.remote() for actor in self.actors])

    def close(self) -> None:
        for actor in self.actors:
            self.ray.kill(actor, no_restart=True)
        self.actors = []


Engine = LocalEngine | RayEngine

"""Sharded phases: the same results in-process and on Ray actors, weights reaching the actors, dead actors replaced."""

import builtins
import os
import signal
import subprocess
import sys

import pytest
import torch
from killing import kill_after_checkpoint

from genenv.coevolve import run
from genenv.config import ConfigError, load_config
from genenv.domains import make_domain
from genenv.engine import LocalEngine, RayEngine, make_engine
from genenv.io import read_jsonl
from genenv.metrics import TIMING_KEYS
from genenv.rollout import rollout, tasks_per_shard

ray = pytest.importorskip("ray", reason="the Ray engine's tests need ray (pip install 'genenv-coevolve[ray]')")

# small generate() batches so that an epoch has several shards to spread over the workers
SHARDED = ["threads=1", "epochs=2", "agent.generation_batch=8", "env.generation_batch=4"]


def _stable(rows):
    return [{k: v for k, v in r.items() if k not in TIMING_KEYS} for r in rows]


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray with 2 CPUs for the module (starting Ray takes seconds), started as the engine starts one."""
    from genenv.engine import init_local_ray
    ray.shutdown()   # (a run of another module in this process may have left its local Ray up)
    init_local_ray(ray, num_cpus=2, num_gpus=0)
    yield
    ray.shutdown()


class _Players:
    def __init__(self, agent, env, env_constraint=None):
        self.agent, self.env, self.env_constraint = agent, env, env_constraint


def _addition_setup(tiny_policy):
    domain = make_domain("addition", width=4)
    tasks = [domain.make_task(a, b) for a, b in ((12, 34), (5, 999), (0, 7), (4321, 1), (77, 77), (1, 2))]
    env = tiny_policy.frozen_copy()
    return domain, tasks, _Players(tiny_policy, env)


def _tokens(groups):
    return [[e.turns[0].response_ids for e in group] for group in groups]


def test_without_ray_installed_the_error_names_the_setting(tiny_policy, monkeypatch):
    domain, _, players = _addition_setup(tiny_policy)
    real_import = builtins.__import__

    def no_ray(name, *args, **kwargs):
        if name == "ray":
            raise ImportError("No module named 'ray'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ray)
    with pytest.raises(ConfigError, match=r"engine.workers > 0 .* pip install 'genenv-coevolve\[ray\]'"):
        make_engine(load_config("smoke", ["engine.workers=1"]), domain, players)
    assert isinstance(make_engine(load_config("smoke"), domain, players), LocalEngine)   # workers=0 needs no Ray


def test_an_unreachable_cluster_is_one_error_naming_the_address(tiny_policy, monkeypatch):
    """The cluster is Ray's own RAY_ADDRESS; the removed engine.address says so, naming the value to export."""
    domain, _, players = _addition_setup(tiny_policy)
    ray.shutdown()   # (a Ray already up in this process would be used as it is)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    with pytest.raises(ConfigError, match="RAY_ADDRESS: cannot reach a Ray cluster at '127.0.0.1:1'"):
        make_engine(load_config("smoke", ["engine.workers=1"]), domain, players)
    with pytest.raises(ConfigError, match="engine.address: removed; .* export RAY_ADDRESS=auto"):
        load_config("smoke", ["engine.workers=1", "engine.address=auto"])


def test_shards_depend_on_the_config_not_on_workers():
    assert tasks_per_shard(512, 8) == 64 and tasks_per_shard(8, 4) == 2 and tasks_per_shard(3, 8) == 1


def test_sharded_rollouts_equal_the_whole_batch_in_process(tiny_policy):
    """Shards of 2 tasks sample what one shard of 6 did (keys, not batch positions, fix the randomness)."""
    tiny_policy.model.double()   # see test_policy: float64 keeps batch-shape rounding away from token edges
    domain, tasks, players = _addition_setup(tiny_policy)
    kwargs = dict(group_size=4, max_new_tokens=6, seed=9)
    whole = rollout(domain, tiny_policy, tasks, batch_size=512, **kwargs)
    sharded = rollout(domain, tiny_policy, tasks, batch_size=8, run_shards=LocalEngine(domain, players).run_shards,
                      **kwargs)
    assert _tokens(sharded) == _tokens(whole)
    assert [[e.reward for e in g] for g in sharded] == [[e.reward for e in g] for g in whole]


def test_actors_get_the_new_weights_after_an_update(tiny_policy, local_ray):
    domain, tasks, players = _addition_setup(tiny_policy)
    cfg = load_config("smoke", ["threads=1", "engine.workers=2"])
    kwargs = dict(group_size=4, max_new_tokens=6, seed=3, batch_size=8)
    engine = RayEngine(cfg, domain, players)
    try:
        before = rollout(domain, tiny_policy, tasks, run_shards=engine.run_shards, **kwargs)
        assert _tokens(before) == _tokens(rollout(domain, tiny_policy, tasks, **kwargs))
        with torch.no_grad():
            for param in tiny_policy.model.parameters():
                param.add_(0.3 * torch.randn_like(param))
        engine.weights_changed("agent")
        after = rollout(domain, tiny_policy, tasks, run_shards=engine.run_shards, **kwargs)
        assert _tokens(after) != _tokens(before)          # a changed agent samples differently on the actors
        assert _tokens(after) == _tokens(rollout(domain, tiny_policy, tasks, **kwargs))   # ... as it does here
        assert all(state["versions"] == {"agent": 1, "env": 0} for state in engine.worker_states())
        assert len({state["pid"] for state in engine.worker_states()} | {os.getpid()}) == 3
    finally:
        engine.close()


def test_multi_turn_episodes_run_inside_the_actors(local_ray):
    """Household episodes (the domain's state stepped turn by turn) come back from the actors as they run here."""
    import numpy as np

    from genenv.config import TinyModelConfig
    from genenv.models.tiny import build_tiny_policy
    domain = make_domain("household", max_steps=10)
    policy = build_tiny_policy(TinyModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2,
                                               max_positions=512), domain.alphabet, seed=0, words=domain.tiny_words)
    tasks = domain.seed_tasks(np.random.default_rng(0), 2)
    kwargs = dict(group_size=2, max_new_tokens=6, seed=1, batch_size=2)   # 2 shards of 1 task
    engine = RayEngine(load_config("smoke", ["threads=1", "engine.workers=2"]), domain,
                       _Players(policy, policy.frozen_copy()))
    try:
        remote = rollout(domain, policy, tasks, run_shards=engine.run_shards, **kwargs)
    finally:
        engine.close()
    local = rollout(domain, policy, tasks, **kwargs)

    def trace(groups):
        return [[(e.reward, e.terminated, e.truncated, [(t.action, t.response_ids) for t in e.turns]) for e in g]
                for g in groups]
    assert trace(remote) == trace(local)
    assert max(len(e.turns) for g in local for e in g) > 1


def test_more_actors_than_the_cluster_can_place_is_one_clear_error(tiny_policy, local_ray):
    domain, _, players = _addition_setup(tiny_policy)
    with pytest.raises(ConfigError, match=r"engine.workers: 3 actors x threads=1 need 3 CPUs, the "
                                          r"Ray cluster has 2;"):
        make_engine(load_config("smoke", ["engine.workers=3", "threads=1"]), domain, players)


def test_the_local_rays_actors_run_at_the_drivers_priority(local_ray):
    """Ray nices its workers by 15 unless told: beside busy jobs the run's own actors starved (issue 77)."""
    @ray.remote
    class Probe:
        def niceness(self):
            return os.nice(0)
    probe = Probe.remote()
    try:
        assert ray.get(probe.niceness.remote()) == os.nice(0)
    finally:
        ray.kill(probe, no_restart=True)   # (its CPU is the next test's)


def test_a_killed_actor_is_replaced_and_its_shard_redone(tiny_policy, local_ray):
    domain, tasks, players = _addition_setup(tiny_policy)
    cfg = load_config("smoke", ["threads=1", "engine.workers=2", "engine.max_restarts=1"])
    kwargs = dict(group_size=4, max_new_tokens=6, seed=5, batch_size=8)
    expected = _tokens(rollout(domain, tiny_policy, tasks, **kwargs))
    engine = RayEngine(cfg, domain, players)
    try:
        dead_pid = engine.worker_states()[0]["pid"]
        os.kill(dead_pid, signal.SIGKILL)
        assert _tokens(rollout(domain, tiny_policy, tasks, run_shards=engine.run_shards, **kwargs)) == expected
        assert engine.restarts == 1 and dead_pid not in {s["pid"] for s in engine.worker_states()}
        os.kill(engine.worker_states()[1]["pid"], signal.SIGKILL)
        with pytest.raises(RuntimeError, match="engine.max_restarts=1"):
            rollout(domain, tiny_policy, tasks, run_shards=engine.run_shards, **kwargs)
    finally:
        engine.close()


@pytest.mark.slow
def test_the_same_metrics_for_0_1_and_2_workers(tmp_path, local_ray):
    rows = {}
    for workers in (0, 1, 2):
        out = run(load_config("smoke", [*SHARDED, f"engine.workers={workers}"]), run_dir=tmp_path / f"w{workers}",
                  log=lambda m: None)
        rows[workers] = _stable(read_jsonl(out / "metrics.jsonl"))
    assert rows[0][-1]["agent_updates"] and rows[0][-1]["env_steps"]   # both players changed between epochs
    assert rows[1] == rows[0] and rows[2] == rows[0]


def _cli(*args):
    return [sys.executable, "-m", "genenv.cli", *args]


@pytest.mark.slow
def test_resume_after_sigkill_with_workers_matches_a_run_without(tmp_path):
    epochs = "epochs=5"
    reference = run(load_config("smoke", [*SHARDED, epochs]), run_dir=tmp_path / "reference", log=lambda m: None)
    killed = tmp_path / "killed"
    args = ["run", "--preset", "smoke", "--out", str(killed), *SHARDED, epochs, "engine.workers=2",
            "checkpoint_every_s=0"]
    proc = subprocess.Popen(_cli(*args), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    done_before = kill_after_checkpoint(proc, killed, 2, timeout=300, group=True)
    assert done_before < 5, "the run finished before it could be killed"
    subprocess.run(_cli("run", "--resume", str(killed), "engine.workers=2"), check=True, capture_output=True)
    assert _stable(read_jsonl(killed / "metrics.jsonl")) == _stable(read_jsonl(reference / "metrics.jsonl"))

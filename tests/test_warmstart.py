"""Warm starts: one code path whether trained now or found in the cache, and a cache key on all that shapes them."""

import dataclasses
import shutil
import sys
from pathlib import Path

import pytest
import torch

from genenv.config import RunConfig, load_config
from genenv.domains import make_domain
from genenv.warmstart import _cache_key, warm_start_agent, warm_start_simulator, warmstart_fields

# Config fields that do not change either warm start (what co-evolution does after it, and bookkeeping).
# A new config field must be added here or to WARMSTART_FIELDS in genenv/warmstart.py.
NOT_IN_WARMSTART = {
    "name", "epochs", "seeds_per_epoch", "curriculum", "eval_every", "samples_rollouts_shown", "progress",
    "checkpoint_every_s",
    "agent.lora_rank", "agent.lr", "agent.weight_decay", "agent.group_size", "agent.temperature", "agent.clip_eps",
    "agent.kl_coef", "agent.entropy_coef", "agent.advantage_scaling", "grad_clip", "agent.replay_fraction",
    "agent.min_informative_groups", "agent.minibatch_groups", "agent.update_epochs", "agent.micro_batch",
    "env.lora_rank", "env.variations", "env.temperature", "env.max_new_tokens", "env.lr", "env.weight_decay",
    "env.kl_coef", "env.max_kl", "env.generation_batch", "env.seed_draw", "env.learnt_levels",
    # the simulator's update rules and their knobs (sections): co-evolution only
    "env.update", "env.pg", "env.rwr", "env.constrained",
    # recomputing activations changes memory, never the numbers (test_policy: the same gradients bit for bit)
    "gradient_checkpointing",
    "curriculum_reward.alpha", "curriculum_reward.beta", "curriculum_reward.k_min", "curriculum_reward.lam",
    "curriculum_reward.p_hat_level", "experimental",
    "baseline.static_variations", "baseline.offline_multiplier", "baseline.offline_generator",
    "baseline.learnability_floor", "baseline.oracle_exploration", "baseline.oracle_window",
    "agent.warmup_steps",
    # co-evolution only: the warm starts run without them (make_players sets them on the warm-started players)
    "agent.shared_prefix", "prefix_cached_sampling", "autocast", "trackers", "tracker_project", "agent.sampler",
    "env.sampler", "llamacpp",
    # a remote simulator has no warm start and no cache entry
    "env.backend", "env.openai",
    # warm starts always run in the driver
    "engine.workers", "engine.gpus_per_worker", "engine.max_restarts",
}


def _leaf_fields(cls, prefix=""):
    for f in dataclasses.fields(cls):
        path = prefix + f.name
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            yield path, type(default)
        else:
            yield path, None


# Fields the key holds within a player's entry: the run's tiny shape is part of "agent.tiny" / "env.tiny".
KEYED_WITHIN_A_PLAYER = {"tiny"}


def _covered(path: str) -> bool:
    listed = {path for role in ("agent", "env") for path in warmstart_fields(role)} | KEYED_WITHIN_A_PLAYER
    return any(path == name or path.startswith(name + ".") for name in listed) or path in NOT_IN_WARMSTART


def test_every_config_field_is_classified():
    """A new knob must say whether it shapes a warm start, or a stale cached one would be reused silently."""
    unclassified = []
    for path, section in _leaf_fields(RunConfig):
        if section is None:
            unclassified += [] if _covered(path) else [path]
        elif not _covered(path):
            unclassified += [f"{path}.{sub}" for sub, _ in _leaf_fields(section) if not _covered(f"{path}.{sub}")]
    assert not unclassified


@pytest.mark.parametrize("override", ["agent.max_new_tokens=12", "agent.max_context_tokens=30",
                                      "agent.generation_batch=7", "curriculum_reward.success_threshold=0.5",
                                      "domain.heldout_per_level=5", "agent.warmstart.steps=3", "threads=3",
                                      "seed=4", "tiny.hidden_size=48", "agent.tiny.max_positions=40"])
def test_agent_cache_key_follows_what_shapes_the_agent_warm_start(override):
    base = load_config("smoke")
    changed = load_config("smoke", [override])
    domain = make_domain("addition", **base.domain.options)
    assert _cache_key("agent", changed, changed.agent, domain) != _cache_key("agent", base, base.agent, domain)


def test_simulator_cache_key_ignores_agent_settings():
    base = load_config("smoke")
    domain = make_domain("addition", **base.domain.options)
    for override in ("agent.max_new_tokens=12", "agent.lr=1.0", "env.lr=1.0", "epochs=9"):
        changed = load_config("smoke", [override])
        assert _cache_key("env", changed, changed.env, domain) == _cache_key("env", base, base.env, domain)
    changed = load_config("smoke", ["env.warmstart.corpus_size=11"])
    assert _cache_key("env", changed, changed.env, domain) != _cache_key("env", base, base.env, domain)


def test_a_simulator_only_domain_option_keys_the_simulator_alone():
    base = load_config("smoke")
    changed = load_config("smoke", ["domain.options.variation_span=1"])
    plain = make_domain("addition", **base.domain.options)
    varied = make_domain("addition", **changed.domain.options)
    assert _cache_key("agent", changed, changed.agent, varied) == _cache_key("agent", base, base.agent, plain)
    assert _cache_key("env", changed, changed.env, varied) != _cache_key("env", base, base.env, plain)
    other = load_config("smoke", ["domain.options.reward=digits"])   # an option the agent's warm start sees
    assert (_cache_key("agent", other, other.agent, make_domain("addition", **other.domain.options))
            != _cache_key("agent", base, base.agent, plain))


def test_cache_key_follows_the_domain_format_version():
    import dataclasses
    cfg = load_config("smoke")
    domain = make_domain("addition", **cfg.domain.options)
    key = _cache_key("agent", cfg, cfg.agent, domain)
    domain.warm_start_key = dataclasses.replace(domain.warm_start_key, format_version=7)
    assert _cache_key("agent", cfg, cfg.agent, domain) != key


def test_a_domain_declares_what_keys_its_warm_starts_in_one_place():
    """Issue 88, item 3: format_version, the options that shape only the corpus or say where data lives, and the
    modules beyond the class's own are one WarmStartKey; a domain that sets one of them as a member of its own
    (written for an older genenv: read no longer, a stale cache would be reused) is refused at import, naming it."""
    from genenv.domains.base import Domain, WarmStartKey
    from genenv.domains.household import domain as household
    assert make_domain("household").warm_start_key == WarmStartKey(
        format_version=3, simulator_only_options=("variation_span",), code_modules=(household.engine,))
    with pytest.raises(TypeError, match=r"Old: format_version, code_modules now go in one declaration, "
                                        r"warm_start_key = WarmStartKey\(format_version=\.\.\., code_modules=\.\.\.\)"):
        type("Old", (Domain,), {"format_version": 2, "code_modules": ()})


@pytest.mark.parametrize("role", ["agent", "env"])
def test_trained_and_cached_warm_starts_are_the_same_model(role, tmp_path, monkeypatch):
    """The run that trains a warm start continues from the saved copy, loaded back, exactly like a run that finds
    it in the cache: same bytes, same memory layout, the same log-probs bit for bit (guaranteed by construction:
    the same file loaded by the same code)."""
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    cfg = load_config("smoke", ["threads=1"])
    domain = make_domain("addition", **cfg.domain.options)
    warm_start = warm_start_agent if role == "agent" else warm_start_simulator
    trained, info = warm_start(cfg, domain, log=lambda m: None)
    cached, cached_info = warm_start(cfg, domain, log=lambda m: None)
    assert info == cached_info
    for (name, a), b in zip(trained.model.named_parameters(), cached.model.parameters()):
        assert a.equal(b) and a.data_ptr() % 64 == b.data_ptr() % 64 == 0, name
    ids = trained.encode_prompts(["1234+5678=", "s5|12000000+3000000>"])
    batch = trained.build_batch(ids, [[5, 6, 7], [8, 9]])
    with torch.no_grad():
        assert trained.token_logprobs(batch)[0].equal(cached.token_logprobs(batch)[0])


class _Killed(Exception):
    pass


class _StopAfter:
    """A progress display that kills the warm start when its step ``after + 1`` is counted."""

    def __init__(self, after: int):
        self.after, self.n, self.total = after, 0, None

    def update(self, n: int = 1) -> None:
        self.n += n
        if self.n > self.after:
            raise _Killed()


@pytest.mark.parametrize("role", ["agent", "env"])
def test_a_killed_warm_start_resumes_at_its_last_saved_step(role, tmp_path, monkeypatch):
    """Killed after 7 steps (journal saved after every step with checkpoint_every_s=0), the warm start resumes at
    step 7 and ends with the weights of an uninterrupted one, bit for bit; the journal is gone afterwards."""
    cfg = load_config("smoke", ["threads=1", "checkpoint_every_s=0"])
    domain = make_domain("addition", **cfg.domain.options)
    warm_start = warm_start_agent if role == "agent" else warm_start_simulator
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "straight"))
    straight, straight_info = warm_start(cfg, domain, log=lambda m: None)

    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "killed"))
    with pytest.raises(_Killed):
        warm_start(cfg, domain, progress=_StopAfter(7), log=lambda m: None)
    journals = list((tmp_path / "killed" / "models").glob("*.partial"))
    assert len(journals) == 1 and (journals[0] / "progress.json").exists()
    lines = []
    resumed, resumed_info = warm_start(cfg, domain, log=lines.append)
    assert any("resuming" in line and "step 7" in line for line in lines)
    assert resumed_info == straight_info
    for (name, a), b in zip(straight.model.named_parameters(), resumed.model.parameters()):
        assert a.equal(b), name
    assert not list((tmp_path / "killed" / "models").glob("*.partial*"))


def test_a_warm_start_killed_in_its_second_round_resumes_there(tmp_path, monkeypatch):
    """Two rounds (the success check never passes): killed 5 steps into round 2, the agent warm start resumes in
    round 2 with round 1's info and ends as an uninterrupted one."""
    cfg = load_config("smoke", ["threads=1", "checkpoint_every_s=0", "agent.warmstart.steps=20",
                                "agent.warmstart.max_rounds=2", "agent.warmstart.min_success=1.0",
                                "agent.warmstart.check_tasks=8"])
    domain = make_domain("addition", **cfg.domain.options)
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "straight"))
    with pytest.warns(RuntimeWarning, match="below agent.warmstart.min_success"):
        straight, straight_info = warm_start_agent(cfg, domain, log=lambda m: None)
    assert straight_info["rounds"] == 2
    from genenv.models.policy import Policy
    from genenv.warmstart import agent_cache_folder  # where benchmarks/warm_started_agent.py says it is
    assert Policy.load(agent_cache_folder(cfg, domain)).model.state_dict()["lm_head.weight"].equal(
        straight.model.state_dict()["lm_head.weight"])
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "killed"))
    with pytest.raises(_Killed):
        warm_start_agent(cfg, domain, progress=_StopAfter(25), log=lambda m: None)
    lines = []
    with pytest.warns(RuntimeWarning, match="below agent.warmstart.min_success"):
        resumed, resumed_info = warm_start_agent(cfg, domain, log=lines.append)
    assert any("resuming round 2 at step 5" in line for line in lines)
    assert resumed_info == straight_info
    for (name, a), b in zip(straight.model.named_parameters(), resumed.model.parameters()):
        assert a.equal(b), name


def test_cache_key_follows_the_data_not_the_folder_it_lives_in(tmp_path, monkeypatch):
    """A copy of the same API-Bank data elsewhere (a fresh machine, the environment variable instead of the option)
    finds the cached warm starts; a changed file at the same path retrains them."""
    fixture = Path(__file__).parent / "data" / "apibank"
    first, second = shutil.copytree(fixture, tmp_path / "a"), shutil.copytree(fixture, tmp_path / "b")

    def keys(data, **environment):
        for name, value in environment.items():
            monkeypatch.setenv(name, str(value))
        cfg = load_config("apibank-smoke", ["threads=1"] + ([f"domain.options.data={data}"] if data else []))
        domain = make_domain("apibank", **cfg.domain.options)
        return [_cache_key(role, cfg, getattr(cfg, role), domain) for role in ("agent", "env")]

    assert keys(first) == keys(second) == keys(None, GENENV_APIBANK_DATA=second)
    database = second / "init_database" / "Bank.json"
    database.write_text(database.read_text().replace("}", " }", 1))
    changed = keys(second)
    assert changed[0] != keys(first)[0] and changed[1] != keys(first)[1]


def test_a_seeds_warm_start_is_evaluated_once_for_every_arm(tmp_path, monkeypatch):
    """The warm-started agent's dev and held-out evaluation is cached by what decides it: another arm on the same
    seed finds it (the same values in its warmstart.json, no evaluation run for it); another agent setting (bf16
    autocast) or an unreadable cache entry evaluates again."""
    import json

    from genenv import coevolve, run_folder
    monkeypatch.setenv("GENENV_CACHE", str(tmp_path / "cache"))
    calls, real = [], coevolve.evaluate_all
    for module in (coevolve, run_folder):   # the epochs' evaluations, and the warm start's
        monkeypatch.setattr(module, "evaluate_all", lambda *a, **k: calls.append(1) or real(*a, **k))

    def arm(name, *overrides):
        lines, before = [], len(calls)
        coevolve.run(load_config("smoke", ["threads=1", "epochs=1", *overrides]), run_dir=tmp_path / name,
                     log=lines.append)
        said = next(line for line in lines if line.startswith("after warm start"))
        return json.loads((tmp_path / name / "warmstart.json").read_text()), len(calls) - before, said

    first, evaluations, said = arm("genenv")
    assert evaluations == 2 and "cached" not in said            # the warm start's, then the last epoch's
    second, evaluations, said = arm("random", "curriculum=random")
    assert evaluations == 1 and said.endswith("(evaluated by an earlier run: cached)")
    assert second == first and first["heldout_success"] is not None
    _, evaluations, _ = arm("bf16", "autocast=bfloat16")
    assert evaluations == 2
    for entry in (tmp_path / "cache" / "evaluations").iterdir():
        entry.write_text("{")
    third, evaluations, said = arm("static", "curriculum=static")
    assert evaluations == 2 and "cached" not in said and third == first


def test_the_code_fingerprint_follows_what_code_computes_not_where_it_lives():
    """Issue 56: moving a module (another name, another folder, other import lines, other docstrings) keeps its
    hash; changing what it computes does not."""
    from genenv.domains.base import computation_hash
    source = ('"""A module."""\nimport numpy as np\nfrom genenv.evaluators.travelplanner import solver as checks\n\n'
              'def f(v):\n    """Its doc."""\n    return checks.g(v) + np.sum(1)  # a comment\n')
    moved = ('"""The same module, moved."""\nfrom genenv.domains.travel import solver as checks\nimport numpy as np\n'
             '\n\ndef f(v):\n    return checks.g(v) + np.sum(1)\n')
    assert computation_hash(source) == computation_hash(moved)
    assert computation_hash(source) != computation_hash(source.replace("np.sum(1)", "np.sum(2)"))
    assert computation_hash("def (") != computation_hash("def ((")   # unparsable source: its text


def test_a_domain_moved_to_another_module_keeps_its_warm_start_cache_key(tmp_path):
    """The whole key (class, code, options, tokenizer) of the same domain class at two module paths is the same:
    a pure move of files retrains nothing."""
    import importlib.util

    from genenv.config import load_config
    from genenv.warmstart import _cache_key
    text = ('"""Old place."""\nfrom genenv.domains.addition import AdditionDomain\n\n\nclass Moved(AdditionDomain):\n'
            '    def level_size(self, level):\n        return super().level_size(level)\n')
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "old_place.py").write_text(text)
    (tmp_path / "pkg" / "sub" / "new_place.py").write_text(text.replace("Old place.", "New place, other words."))
    domains = []
    for name, path in (("old_place", tmp_path / "old_place.py"), ("pkg.sub.new_place", tmp_path / "pkg" / "sub" /
                                                                  "new_place.py")):
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        domains.append(module.Moved())
    cfg = load_config("smoke", [])
    for role, player in (("agent", cfg.agent), ("env", cfg.env)):
        assert _cache_key(role, cfg, player, domains[0]) == _cache_key(role, cfg, player, domains[1])
    edited = tmp_path / "edited.py"
    edited.write_text(text.replace("return super().level_size(level)", "return 1 + super().level_size(level)"))
    spec = importlib.util.spec_from_file_location("edited", edited)
    module = importlib.util.module_from_spec(spec)
    sys.modules["edited"] = module
    spec.loader.exec_module(module)
    assert _cache_key("agent", cfg, cfg.agent, module.Moved()) != _cache_key("agent", cfg, cfg.agent, domains[0])


def test_the_knobs_no_warm_start_read_are_gone_and_the_cache_keys_hold_none_of_them():
    """Issue 76: agent.warmstart.corpus_size and the simulator's success check never did anything; they are no
    knobs (an old spelling is dropped with a warning). Issue 94: a cache key holds today's fields under today's names
    only (the shims that kept the warm starts cached before issue 76 protected nothing: every cache retrained)."""
    import warnings

    from genenv.config import RunConfig
    from genenv.warmstart import _config_value
    cfg = RunConfig()
    assert not hasattr(cfg.agent.warmstart, "corpus_size") and not hasattr(cfg.env.warmstart, "min_success")
    assert "corpus_size" not in _config_value(cfg, "agent.warmstart")
    assert not {"min_success", "max_rounds", "check_tasks"} & set(_config_value(cfg, "env.warmstart"))
    assert "dtype" in warmstart_fields("agent") and "agent.dtype" not in warmstart_fields("agent")
    with pytest.warns(FutureWarning, match="env.warmstart.check_tasks is removed"):
        read = load_config("smoke", ["env.warmstart.check_tasks=7"])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert read.env.warmstart == load_config("smoke").env.warmstart


_BUILD_AGENT = """
import sys
from genenv.config import load_config
from genenv.domains import make_domain
from genenv.warmstart import warm_start_agent
cfg = load_config("smoke", ["threads=1", "checkpoint_every_s=0"])
policy, info = warm_start_agent(cfg, make_domain(cfg.domain.name), log=lambda m: print("LOG", m, flush=True))
print("DONE", info["rounds"], float(sum(p.double().sum() for p in policy.model.parameters())))
"""


def test_two_processes_needing_one_warm_start_build_it_once_and_load_the_same_weights(tmp_path):
    """The ranks of `torchrun --nproc_per_node 2` each warm-start the agent (examples/trl_genenv.py): on a fresh cache
    both once wrote the same journal at the same time and one died on the other's swap (FileNotFoundError on the
    journal's progress.json). With the cache entry's lock one builds it (journaled after every step, the race's
    widest window) while the other waits, then loads what it saved: the same weights, and only one trained."""
    import os
    import subprocess
    env = dict(os.environ, GENENV_CACHE=str(tmp_path / "cache"))
    procs = [subprocess.Popen([sys.executable, "-c", _BUILD_AGENT], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [err[-2000:] for _, err in outs]
    done = [next(line for line in out.splitlines() if line.startswith("DONE")) for out, _ in outs]
    assert done[0] == done[1]   # the same rounds and the same weights, to the last bit of their sum
    trained = [sum(line.startswith("LOG agent warm start round") for line in out.splitlines()) for out, _ in outs]
    assert sorted(trained) == [0, int(done[0].split()[1])]   # one process trained, the other loaded its result
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["locks", "models"]
    assert not list((tmp_path / "cache" / "models").glob("*.partial*"))   # the journal went with the build

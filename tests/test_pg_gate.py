"""env.pg.gate: which valid generations may earn the simulator's pg reward (issue 37).

The level gate reads the domain's levels (a method with the oracle's information); the experimental predicted
gate only the pool's p_hat (every domain has it)."""

import warnings

import numpy as np
import pytest

from genenv.algos.env_pg import reward_groups
from genenv.config import ConfigError, load_config
from genenv.config import load_config as _load_config
from genenv.curricula import information_label, information_used, make_curriculum
from genenv.domains import Task, make_domain
from genenv.generation import Candidate
from genenv.pool import TaskPool
from genenv.preflight import domain_problems
from genenv.reward import level_gate
from genenv.simulator_updates import simulator_gate


def challenger_groups(candidates, alpha=0.5, beta=2.0, invalid_reward=0.0, shape="rescaled", gate=None, repeat=None):
    """The loop's two steps: each generation's reward (genenv.reward; an invalid_reward or repeat: the penalised
    signal's), then the update's seed groups (env_pg)."""
    from genenv.experimental.options import interior_reward, penalised_rewards
    from genenv.reward import rescaled
    reward = rescaled(alpha, beta) if shape == "rescaled" else (lambda c: float(interior_reward(c.p_hat, alpha, beta)))
    return reward_groups(candidates, penalised_rewards(candidates, reward, invalid_reward, gate, repeat))



def test_the_level_gate_reads_the_domains_levels_from_epoch_0():
    """At epoch 0 the pool holds only the seeds' levels 1-2, just rolled out and mastered, and this epoch's first
    level-3 tasks. Levels 3-8 are open (level 3 not mastered, 4-8 never rolled out: their first tasks are paid);
    levels 1-2 are shut. The old gate took its levels from the pool: {2} open (1 and 2 both mastered, so "the
    hardest"), level 3 earning nothing."""
    cfg = load_config("default")
    domain = make_domain("addition")
    pool = TaskPool()
    for i in range(10):
        pool.add(Task(f"a{i}", "p", "a", 1), "seed", -1, 1.0)
        pool.add(Task(f"b{i}", "p", "a", 2), "seed", -1, 0.875)
    pool.add(Task("c0", "p", "a", 3), "generated", 0, 0.25)
    gate = simulator_gate(cfg, domain, pool)
    assert [level for level in domain.levels() if gate(_candidate(level))] == [3, 4, 5, 6, 7, 8]


def _candidate(level, r_env=1.0, batch=0):
    return Candidate(batch, Task("s", "s"), "ctx", [1], [5], "raw", Task(f"x{level}", "p", "a", level), r_env=r_env,
                     logprobs=(-1.0,))


def test_a_gate_shuts_tasks_out_of_the_reward():
    """Two in-band tasks of one seed, the gate open only on level 3: only the second earns, so the group favours
    it; a gate shutting both leaves no signal."""
    gate = level_gate({3})
    groups = challenger_groups([_candidate(2), _candidate(3)], alpha=0.5, beta=2.0, gate=gate)
    assert [s.advantage for s in groups[0]] == pytest.approx([-0.5, 0.5])
    assert challenger_groups([_candidate(2), _candidate(2)], gate=gate) == []   # no signal
    assert len(challenger_groups([_candidate(2), _candidate(3, r_env=0.7)])) == 1      # ungated


def test_removed_options_name_the_commit_that_still_runs_them():
    """env.pg.gate=greedy went in issue 56 (it lost its rule on dev): under either name, a clear error."""
    for override in ("env.pg.gate=greedy", "env.pg_gate=greedy"):
        with pytest.raises(ConfigError, match=r"'greedy' was removed .* commit d99c82e"):
            load_config("smoke", [override])


def test_the_level_gate_is_refused_on_a_domain_without_ordered_levels():
    """A domain that does not declare its levels ordered by difficulty cannot run the level gate (it would read
    meaningless buckets); the predicted gate runs anywhere, and a curriculum that trains no simulator ignores it."""
    class Unordered(type(make_domain("addition"))):
        ordered_levels = False
    cfg = load_config("default")
    assert [p.split(":")[0] for p in domain_problems(cfg, make_curriculum("genenv"), Unordered())] == ["env.pg.gate"]
    assert domain_problems(load_config("default", ["env.pg.gate=predicted"]), make_curriculum("genenv"),
                           Unordered()) == []
    assert domain_problems(cfg, make_curriculum("random"), Unordered()) == []
    assert make_domain("addition").ordered_levels and make_domain("household").ordered_levels


def test_a_presets_level_gate_is_not_inherited_by_another_domain():
    assert load_config("default").env.pg.gate == "levels"
    assert load_config("default", ["domain.name=household"]).env.pg.gate == "none"
    assert load_config("default", ["domain.name=household", "env.pg.gate=levels"]).env.pg.gate == "levels"
    assert load_config("default", ["domain.name=addition"]).env.pg.gate == "levels"   # the preset's own domain


def test_pg_gate_config_errors_and_the_deprecated_name():
    with pytest.raises(ConfigError, match="env.pg.gate"):
        load_config("default", ["env.update=rwr"])         # the preset's gate would be a silent no-op
    load_config("default", ["env.update=rwr", "env.pg.gate=none"])
    with pytest.raises(ConfigError, match="env.pg_level_gate"):
        load_config("smoke", ["env.pg_level_gate=true", "env.pg.gate=predicted"])
    with pytest.warns(FutureWarning, match="pg.gate=levels"):
        assert load_config("smoke", ["env.pg_level_gate=true"]).env.pg.gate == "levels"


def test_the_update_rules_knobs_are_grouped_and_the_old_names_still_read():
    """env.pg.* and env.rwr.* (issue 42): an old flat name is read for one release with a FutureWarning naming
    the new one (quietly from a run folder's config, which was started with it); both names at once, a knob of
    the rule not selected, and pg with batch-level p_hat are configuration errors."""
    from genenv.config import to_dict
    from genenv.run_config import run_config
    with pytest.warns(FutureWarning, match="env.pg_minibatch_groups is deprecated: write env.pg.minibatch_groups"):
        cfg = load_config("smoke", ["env.pg_minibatch_groups=3", "env.pg_gate=levels"])
    assert (cfg.env.pg.minibatch_groups, cfg.env.pg.gate) == (3, "levels")
    with pytest.warns(FutureWarning, match="env.pool_replay is deprecated: write env.rwr.pool_replay"):
        assert load_config("paper", ["env.pool_replay=0.5"]).env.rwr.pool_replay == 0.5
    with pytest.raises(ConfigError, match="env.pg_steps: set env.pg.steps alone"):
        load_config("smoke", ["env.pg_steps=2", "env.pg.steps=3"])
    with pytest.raises(ConfigError, match="env.rwr.batch: set to 8, a knob of env.update=rwr, but env.update is 'pg'"):
        load_config("smoke", ["env.rwr.batch=8"])
    with pytest.raises(ConfigError, match="env.pg.steps: set to 2, a knob of env.update=pg, but env.update is 'rwr'"):
        load_config("paper", ["env.pg.steps=2"])
    with pytest.raises(ConfigError, match="curriculum_reward.p_hat_level: 'batch'"):
        load_config("paper", ["env.update=pg"])
    load_config("paper", ["env.update=pg", "curriculum_reward.p_hat_level=task"])
    # a run folder written before the grouping: its flat names read without a warning
    old = to_dict(load_config("smoke"))
    pg, rwr = old["env"].pop("pg"), old["env"].pop("rwr")
    old["env"].update({f"pg_{k}": v for k, v in pg.items()
                       if k not in ("gate_mastered", "gate_window", "signal")}, pg_invalid_reward=0.0)   # (added since)
    old["env"]["pg_gate_window"] = 512   # (now experimental.predicted_gate.window)
    old["env"].update(rwr_steps=2, rwr_batch=8, pool_replay=rwr["pool_replay"], pg_level_gate=True)
    old["env"]["seed_draw"] = "predicted"   # (its window is read only where its strategy is selected)
    old["env"]["pg_gate"] = "predicted"
    old["env"].pop("pg_level_gate")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        read = run_config(old)
    from genenv.signals import check_config
    check_config(read)
    assert (read.env.rwr.steps, read.env.rwr.batch, read.env.pg.gate) == (2, 8, "predicted")
    assert read.experimental["predicted_gate"].window == 512


def _old_run_folder_config() -> dict:
    """A run folder's config.yaml as genenv wrote it before issue 76: every field, the experimental switches off."""
    from genenv.config import to_dict
    old = to_dict(load_config("smoke"))
    old["env"]["pg"].update(probe_tasks=256, probe_side="all", likelihood_width=2.0, invalid_reward=0.0,
                            repeat_is_invalid=False)
    old["env"]["progress"] = {"clusters": 8, "window": 2048, "min_count": 16, "exploration": 0.2}
    old.pop("experimental")
    old["env"].pop("learnt_levels")   # (the learnt seed draw's knobs were experimental.predicted_seed_* then)
    old["env"]["pg"]["signal"] = "alpha"                                   # (issue 88's fields of one answer)
    old["curriculum_reward"]["p_hat_estimate"] = "empirical"
    old["baseline"]["oracle_rule"] = "frontier"
    old["agent"]["warmstart"]["corpus_size"] = 20000                      # (knobs no player read)
    old["env"]["warmstart"].update(min_success=0.9, max_rounds=3, check_tasks=256)
    old["experimental"] = {"pg_reward": "rescaled", "oracle_rule": "frontier", "posterior_p_hat": False,
                           "learnability_seeds": False, "predicted_gate": False, "predicted_gate_window": 1024,
                           "predicted_seeds": False, "predicted_seed_bins": 4, "predicted_seed_window": 1024}
    return old


def test_options_that_lost_their_decision_rule_are_registered_strategies_and_their_old_spellings_read():
    """Issue 76: each option that lost its decision rule is a strategy the experimental plugin registers, selected by
    its registry's field, or by experimental.<part> where it replaces the main path's one answer (issue 88), its
    knobs under experimental.<section>; the old spellings still read for one release with a FutureWarning naming the
    new one, and an old run folder's config (every switch off) reads quietly as today's defaults."""
    from genenv.config import to_dict
    from genenv.run_config import run_config
    from genenv.signals import check_config

    def load_config(*args):   # as a run reads it: the strategies' knobs checked and filled in
        cfg = _load_config(*args)
        check_config(cfg)
        return cfg
    moves = {"env.pg_reward=interior": ("experimental.signal=interior", ("experimental", "signal"), "interior"),
             "experimental.pg_reward=interior": ("experimental.signal=interior", ("experimental", "signal"),
                                                 "interior"),
             "env.pg.signal=interior": ("experimental.signal=interior", ("experimental", "signal"), "interior"),
             "experimental.learnability_seeds=true": ("env.seed_draw=learnability", ("env", "seed_draw"),
                                                      "learnability"),
             "experimental.predicted_seeds=true": ("env.seed_draw=learnt_frontier", ("env", "seed_draw"),
                                                   "learnt_frontier"),
             "env.seed_draw=predicted": ("env.seed_draw=learnt_frontier", ("env", "seed_draw"), "learnt_frontier"),
             "experimental.predicted_gate=true": ("env.pg.gate=predicted", ("env", "pg", "gate"), "predicted")}
    for override, (written, path, value) in moves.items():
        with pytest.warns(FutureWarning, match=f"write {written}"):
            cfg = load_config("smoke", [override])
        node = to_dict(cfg)
        for part in path:
            node = node[part]
        assert node == value, override
    knob_moves = {"env.pg.gate_fit_window=64": ("env.pg.gate=predicted", "predicted_gate", "window", 64),
                  "env.pg.probe_tasks=8": ("experimental.signal=probe_gain", "probe_gain", "tasks", 8),
                  "env.pg.likelihood_width=1.5": ("experimental.signal=answer_likelihood", "answer_likelihood",
                                                  "width", 1.5),
                  "env.progress.clusters=3": ("env.seed_draw=progress", "progress", "clusters", 3)}
    for override, (selection, section, name, value) in knob_moves.items():
        with pytest.warns(FutureWarning, match="experimental." + section + "." + name):
            cfg = load_config("smoke", [selection, override])
        assert getattr(cfg.experimental[section], name) == value
    # the learnt seed draw joined the main path (issue 88): its knobs, under any old name, are env.learnt_levels's
    for override, name, value in (("experimental.predicted_seed_bins=3", "bins", 3), ("env.seed_draw_window=32",
                                  "window", 32), ("experimental.predicted_seeds.bins=5", "bins", 5)):
        with pytest.warns(FutureWarning, match=f"write env.learnt_levels.{name}$"):
            cfg = load_config("smoke", ["env.seed_draw=learnt_frontier", override])
        assert getattr(cfg.env.learnt_levels, name) == value
    with pytest.raises(ConfigError, match="env.pg.signal: set experimental.signal alone"):
        load_config("smoke", ["env.pg.signal=interior", "experimental.signal=penalised"])
    with pytest.raises(ConfigError, match="experimental.signal: 'nonesuch' is not an experimental signal; "
                                          "choose one of .*, or leave it out for the main path's AlphaSignal"):
        load_config("smoke", ["experimental.signal=nonesuch"])
    with pytest.warns(FutureWarning, match="experimental.oracle_rule=frontier is deprecated"):   # (its name till 76)
        assert to_dict(load_config("smoke", ["experimental.oracle_rule=frontier"])) == to_dict(load_config("smoke"))
    for field, main in (("env.pg.signal", "alpha"), ("curriculum_reward.p_hat_estimate", "empirical"),
                        ("baseline.oracle_rule", "frontier")):   # (the main path's answer: the field is dropped)
        with pytest.warns(FutureWarning, match=f"{field} is removed .*: leave it out"):
            assert to_dict(load_config("smoke", [f"{field}={main}"])) == to_dict(load_config("smoke"))
        with pytest.raises(ConfigError, match=f"{field}: 'nonesuch' is not known; the field is removed"):
            load_config("smoke", [f"{field}=nonesuch"])
    with pytest.raises(ConfigError, match="experimental.predicted_seeds: True selects env.seed_draw=learnt_frontier, "
                                          "and env.seed_draw is 'frontier'"):
        load_config("smoke", ["experimental.predicted_seeds=true", "env.seed_draw=frontier"])
    with pytest.raises(ConfigError, match="env.pg.gate: 'predicted' reads|env.pg.gate: set to 'predicted'"):
        load_config("paper", ["env.pg.gate=predicted"])     # rwr: a gate of the pg update
    with pytest.raises(ConfigError, match="experimental.probe_gain.tasks: set to 8, a knob of "
                                          "experimental.signal=probe_gain, which this run does not select"):
        load_config("smoke", ["experimental.probe_gain.tasks=8"])
    with pytest.raises(ConfigError, match="experimental.nonesuch: no experimental option has this section"):
        load_config("smoke", ["experimental.nonesuch.x=1"])
    with pytest.raises(ConfigError, match="env.seed_draw: 'nonesuch' is not a seed draw; choose one of uniform, "
                                          "frontier"):
        load_config("smoke", ["env.seed_draw=nonesuch"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        read = run_config(_old_run_folder_config())
    check_config(read)   # (a run checks its strategies at start; the old folder's default sections select nothing)
    assert to_dict(read) == to_dict(load_config("smoke"))
    old = _old_run_folder_config()   # a run folder of an experimental signal, from before issue 88
    old["env"]["pg"]["signal"] = "probe_gain"
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # (quietly: its warning was given when it started)
        read = run_config(old)
    check_config(read)
    assert to_dict(read) == to_dict(load_config("smoke", ["experimental.signal=probe_gain"]))


def test_every_experimental_strategy_is_named_with_its_measurement():
    """genenv.experimental.EXPERIMENTS names each experimental strategy the registries hold, and each experimental
    replacement of a main-path part, exactly once, with where it was measured and what the rule said; no main-path
    strategy is marked experimental, and a registry remains only where the main path has a choice (issue 88)."""
    from genenv.experimental import EXPERIMENTS, experiment
    from genenv.experimental.sections import Experimental, experimental_options
    from genenv.signals import MAIN_PARTS, REGISTRIES, Strategy
    assert sorted(e.setting for e in EXPERIMENTS) == sorted(setting for setting, _ in experimental_options())
    assert all(e.measured and e.decision for e in EXPERIMENTS)
    main = {f"{r.knob}={name}" for r in REGISTRIES for name in r.names()
            if not issubclass(r.entries[name], Experimental)}
    assert main == {"env.seed_draw=uniform", "env.seed_draw=frontier", "env.seed_draw=learnt_frontier",
                    "env.pg.gate=none", "env.pg.gate=levels"}
    assert all(len([n for n in r.names() if not issubclass(r.entries[n], Experimental)]) > 1 for r in REGISTRIES)
    assert all(issubclass(cls, Strategy) and not issubclass(cls, Experimental) for cls in MAIN_PARTS.values())
    assert "issue37" in experiment("env.pg.gate=predicted").measured
    with pytest.raises(KeyError, match="known: experimental.signal=interior"):
        experiment("env.pg.gate=greedy")


def test_nothing_outside_the_experimental_package_imports_it_or_names_its_options():
    """The boundary (issue 76): no module of genenv outside genenv/experimental/ imports it, tests one of its
    option names, writes one of its settings or names (``experimental.``...: its old spellings too, issue 88) or
    reads the config's experimental sections (the plugin reads, checks, describes and migrates its own, through the
    hooks genenv.signals offers every plugin); it is reached only through the genenv.strategies entry point."""
    import ast
    from pathlib import Path

    import genenv
    from genenv.experimental.sections import experimental_options
    root = Path(genenv.__file__).parent
    settings = [setting for setting, _ in experimental_options()]
    names = {setting.rpartition("=")[2] for setting in settings}
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if "experimental" in path.relative_to(root).parts:
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and node.body
                      and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                    and (node.value.startswith("experimental.") or any(s in node.value for s in settings))):
                offenders.append(f"{path.name}:{node.lineno}: names {node.value[:60]!r}")
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("genenv.experimental"):
                offenders.append(f"{path.name}: imports {node.module}")
            if isinstance(node, ast.Import) and any(a.name.startswith("genenv.experimental") for a in node.names):
                offenders.append(f"{path.name}: imports genenv.experimental")
            if isinstance(node, ast.Compare):
                for const in ast.walk(node):
                    if isinstance(const, ast.Constant) and const.value in names:
                        offenders.append(f"{path.name}:{node.lineno}: tests {const.value!r}")
            if isinstance(node, ast.Attribute) and node.attr == "experimental" and isinstance(node.ctx, ast.Load):
                parent = getattr(node.value, "id", getattr(node.value, "attr", ""))
                if parent == "cfg":
                    offenders.append(f"{path.name}:{node.lineno}: reads cfg.experimental")
    assert offenders == []
    import importlib.metadata
    points = [p.value for p in importlib.metadata.entry_points(group="genenv.strategies")]
    assert "genenv.experimental:register" in points


def test_each_arm_is_named_for_what_it_knows():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        smoke = load_config("smoke")
    assert information_used(smoke) == () and information_label(smoke) == "paper"
    assert information_label(load_config("smoke", ["env.pg.gate=predicted"])) == "paper"
    assert information_used(load_config("smoke", ["env.pg.gate=levels"])) == ("domain levels (env.pg.gate=levels)",)
    assert information_used(load_config("smoke", ["curriculum=random", "env.pg.gate=levels"])) == ()
    assert "oracle" in information_label(load_config("smoke", ["curriculum=oracle"]))
    assert "env.seed_draw=frontier" in information_label(load_config("smoke", ["curriculum=random",
                                                                              "env.seed_draw=frontier"]))
    default = information_used(load_config("default"))
    assert any("variation_span" in entry for entry in default) and any("pg.gate" in entry for entry in default)


def test_the_text_difficulty_model_learns_what_looks_mastered():
    """Ridge regression on character n-grams: fit on tasks whose text says how hard they are (many zeros: solved;
    many other digits: failed), it predicts a new task of each kind on its side of the 0.75 threshold."""
    from genenv.text_difficulty import TextDifficulty, fit_ridge, ngram_features
    rng = np.random.default_rng(0)
    easy = ["".join(rng.choice(list("0000001"), 8)) for _ in range(40)]
    hard = ["".join(rng.choice(list("123456789"), 8)) for _ in range(40)]
    model = TextDifficulty().fit(easy + hard, [1.0] * 40 + [0.0] * 40)
    assert model.predict("00000010") > 0.75 > model.predict("58214763")
    assert np.isnan(TextDifficulty().predict("x"))
    vector = ngram_features("aaa", dims=8, orders=(1,))
    assert vector.max() == pytest.approx(1.0) and np.count_nonzero(vector) == 1   # 3 a's, one bucket, unit length
    weights, intercept = fit_ridge(np.array([[0.0], [1.0], [2.0]]), np.array([1.0, 3.0, 5.0]), l2=0.0)
    assert weights[0] == pytest.approx(2.0) and intercept == pytest.approx(1.0)   # y = 2x + 1 exactly


def test_the_predicted_gate_shuts_out_tasks_that_look_like_mastered_ones():
    cfg = load_config("default", ["env.pg.gate=predicted"])
    pool = TaskPool()
    for i in range(60):
        pool.add(Task(f"0000000{i % 10}+00000000", "p", "a", 1), "generated", 0, 1.0)
        pool.add(Task(f"{i % 10}7345678+98765432"[:17], "p", "a", 8), "generated", 0, 0.0)
    gate = simulator_gate(cfg, make_domain("addition"), pool)
    easy, hard = _candidate(1), _candidate(8)
    easy = easy.updated(parsed=Task("00000003+00000000", "p", "a", 1))
    hard = hard.updated(parsed=Task("57345678+98765432", "p", "a", 8))
    assert not gate(easy) and gate(hard)
    assert "paper" == information_label(cfg).split(" + ")[0] and not any("pg_gate" in e for e in information_used(cfg))


def test_a_strategy_without_its_kinds_method_is_refused_when_built():
    """Each kind of strategy declares the method it answers with (abstract): a registered class that lacks it fails
    at its construction, before a run uses it, not at the first call."""
    from genenv.signals import SeedDraw, Signal
    cfg = load_config("smoke")
    for kind in (SeedDraw, Signal):
        incomplete = type(f"Incomplete{kind.__name__}", (kind,), {})
        with pytest.raises(TypeError, match="abstract"):
            incomplete(cfg)

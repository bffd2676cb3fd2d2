import pytest

from genenv.cli import main
from genenv.config import ConfigError, RunConfig, describe, load_config, parse_override


def test_defaults_follow_design():
    cfg = RunConfig()
    assert cfg.curriculum_reward.alpha == 0.5 and cfg.curriculum_reward.beta == 2.0
    assert cfg.curriculum_reward.lam == 1.0
    # measured decision (README): p_hat per task with a band of +-0.25; the paper's settings are a preset
    assert cfg.curriculum_reward.k_min == 0.25 and cfg.curriculum_reward.p_hat_level == "task"
    paper = load_config("paper")
    assert paper.curriculum_reward.k_min == 0.1 and paper.curriculum_reward.p_hat_level == "batch"
    assert cfg.seeds_per_epoch == 16 and cfg.env.variations == 4 and cfg.agent.group_size == 8
    assert cfg.agent.clip_eps == 0.2 and cfg.agent.kl_coef == 0.001 and cfg.env.kl_coef == 0.05
    assert cfg.env.max_kl == 0.5 and cfg.agent.replay_fraction == 0.5 and cfg.agent.min_informative_groups == 16


def test_dotted_overrides_and_presets():
    cfg = load_config("smoke", ["agent.lr=1e-4", "epochs=7", "curriculum=random"])
    assert cfg.agent.lr == 1e-4 and cfg.epochs == 7 and cfg.curriculum == "random"
    assert cfg.domain.options == {"width": 4}
    assert parse_override("a.b.c=3") == {"a": {"b": {"c": 3}}}


@pytest.mark.parametrize("override, field", [
    ("agent.lr=abc", "agent.lr"),
    ("agent.nope=1", "agent.nope"),
    ("curriculum_reward.alpha=1.5", "curriculum_reward.alpha"),
    ("epochs=2.5", "epochs"),
    ("tiny.num_heads=3", "tiny.num_heads"),
])
def test_bad_values_name_the_field(override, field):
    with pytest.raises(ConfigError, match=field.replace(".", r"\.")):
        load_config("default", [override])


def test_an_unknown_curriculum_is_refused_before_any_work(capsys, tmp_path):
    """The curricula's registry checks the name (genenv.curricula.make_curriculum), at run start, in compare
    before anything runs, and in `genenv config`."""
    for argv in (["run", "curriculum=banana", "--out", str(tmp_path / "r")], ["config", "curriculum=banana"],
                 ["compare", "--curricula", "genenv,banana", "--out", str(tmp_path / "c")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert "curriculum" in err and "banana" in err and "random" in err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


def test_cli_exits_2_with_one_line(capsys):
    assert main(["run", "agent.lr=oops"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "agent.lr" in err[0]
    assert main(["run", "--preset", "nosuch"]) == 2
    assert "nosuch" in capsys.readouterr().err


def test_bad_yaml_file_names_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("epochs: [1, 2\n")
    with pytest.raises(ConfigError, match="bad.yaml"):
        load_config(None, [], bad)
    bad.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(None, [], bad)


def test_describe_lists_every_knob_with_help():
    rows = describe()
    names = {name for name, _, _ in rows}
    assert {"agent.lr", "env.max_kl", "curriculum_reward.beta", "agent.min_informative_groups"} <= names
    assert all(help_text for _, _, help_text in rows)


@pytest.mark.slow
def test_presets_ship_in_the_wheel(tmp_path):
    """Installed from the wheel, outside the checkout, every preset is found (they are package data)."""
    import subprocess
    import sys
    import zipfile
    from pathlib import Path

    from genenv.config import preset_names
    root = Path(__file__).resolve().parents[1]
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(tmp_path / "wheel"), str(root)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    site = tmp_path / "site"
    zipfile.ZipFile(next((tmp_path / "wheel").glob("genenv_coevolve-*.whl"))).extractall(site)
    probe = ("import genenv, genenv.config as c; print(genenv.__file__); print(','.join(c.preset_names())); "
             "print(c.load_config('household').domain.name)")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path,
                         env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    location, names, domain = out.stdout.split()
    assert location.startswith(str(site)) and names.split(",") == preset_names() and domain == "household"
    assert {"default", "smoke", "paper", "household"} <= set(names.split(","))


def test_preset_domain_options_apply_only_to_the_presets_domain():
    """--preset smoke sets addition's width; naming another domain drops it instead of failing in that domain."""
    assert load_config("smoke").domain.options == {"width": 4}
    assert load_config("smoke", ["domain.name=household"]).domain.options == {}
    kept = load_config("smoke", ["domain.name=household", "domain.options={max_steps: 20}"])
    assert kept.domain.options == {"max_steps": 20}
    assert load_config("smoke", ["domain.name=addition"]).domain.options == {"width": 4}
    switched = load_config("smoke", ["domain.name=household", "domain.options.max_steps=20"])
    assert switched.domain.options == {"max_steps": 20}     # addition's width does not follow


def test_a_dotted_domain_option_keeps_the_presets_other_options():
    """``domain.options.data=PATH`` on a preset with options once replaced them all (the smollm2-travel runs lost
    max_candidates: 3); each override now sets its own key."""
    assert load_config("smollm2-travel", ["domain.options.data=x"]).domain.options == {"max_candidates": 3,
                                                                                      "data": "x"}
    both = load_config("smoke", ["domain.options.reward=digits", "domain.options.variation_span=1"])
    assert both.domain.options == {"width": 4, "reward": "digits", "variation_span": 1}
    assert load_config("smoke", ["domain.options.width=6"]).domain.options == {"width": 6}


@pytest.mark.parametrize("name", ["smollm2-apibank", "smollm2-multihop", "smollm2-travel", "travel-smoke",
                                  "smollm2-reasoning-gym"])
def test_the_real_domain_presets_load_and_name_their_domain(name):
    """Every field of these presets is a known, valid setting (a typo would be a ConfigError naming it)."""
    from genenv.config import preset_names
    assert name in preset_names()
    cfg = load_config(name)
    assert cfg.name == name and cfg.domain.name in ("apibank", "multihop", "travel", "reasoning_gym")
    if name.startswith("smollm2"):
        assert cfg.agent.model == cfg.env.model == "smollm2" and cfg.gradient_checkpointing


def test_changed_fields_names_every_differing_leaf_by_its_dotted_key():
    from genenv.run_config import changed_fields
    old = {"epochs": 200, "agent": {"lr": 1e-3, "tiny": {"num_layers": 2}}, "name": "default"}
    new = {"epochs": 400, "agent": {"lr": 1e-3, "tiny": {"num_layers": 3}}, "name": "default", "extra": 1}
    assert changed_fields(old, new) == {"epochs": (200, 400), "agent.tiny.num_layers": (2, 3), "extra": (None, 1)}
    assert changed_fields(old, old) == {}


def test_help_config_errors_and_domains_do_not_load_torch():
    """Issue 39: every command took 7-9 s before doing anything, because importing the CLI imported torch and
    transformers. --help, a config error (with a did-you-mean) and `genenv domains` now never import them."""
    import subprocess
    import sys
    probe = ("import sys, contextlib, io\nfrom genenv.cli import main\nout = io.StringIO()\n"
             "with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):\n"
             "    try:\n        code = main({args!r})\n    except SystemExit as e:\n        code = e.code\n"
             "print(code, 'torch' in sys.modules, 'transformers' in sys.modules, repr(out.getvalue()))")
    for args, expected_code, text in ((["--help"], 0, "usage: genenv"), (["run", "epoch=3"], 2, "did you mean epochs?"),
                                      (["domains"], 0, "addition"), (["config", "seed=x"], 2, "seed: expected"),
                                      (["prune", "no-such-folder"], 2, "neither a run folder")):
        done = subprocess.run([sys.executable, "-c", probe.format(args=args)], capture_output=True, text=True,
                              timeout=120)
        code, torch_loaded, transformers_loaded, output = done.stdout.strip().split(" ", 3)
        assert (int(code), torch_loaded, transformers_loaded) == (expected_code, "False", "False"), (args, done.stderr)
        assert text in output


def test_config_describe_shows_the_presets_values():
    """Issue 39: `genenv config --describe --preset default` showed the knobs' defaults (lr 3e-4, gate off)."""
    import contextlib
    import io

    from genenv.cli import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["config", "--describe", "--preset", "default"]) == 0
    main_part, _, experimental = out.getvalue().partition("\nexperimental: ")
    main_part, _, components = main_part.partition("\ncomponents: ")
    rows = {line.split()[0]: line.split()[1] for line in main_part.splitlines()}
    assert rows["agent.lr"] == "0.001" and rows["env.pg.gate"] == "'levels'" and rows["epochs"] == "200"
    assert not any(name.startswith("experimental") for name in rows)   # the main knobs first, then the others
    listed = {line.split()[0]: line for line in experimental.splitlines()[1:]}
    assert "selected by experimental.signal=probe_gain: " in listed["experimental.probe_gain"]
    assert "experimental.probe_gain.tasks" in listed
    assert not any("env.seed_draw=frontier" in line for line in listed.values())   # a main-path strategy is not
    # each option with its knobs right after it
    lines = experimental.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("experimental.probe_gain "))
    assert lines[at + 1].startswith("experimental.probe_gain.")
    # an option sharing a section listed before it is named by its own name
    assert "selected by experimental.signal=learning_progress: " in listed["experimental.learning_progress"]
    # a component's knobs under their component, each naming the choice that reads it
    component_rows = {line.split()[0]: line for line in components.splitlines()[1:]}
    assert "tiny.hidden_size" not in rows
    assert "(agent.model=tiny or env.model=tiny)" in component_rows["tiny.hidden_size"]
    assert "(agent.model=tiny)" in component_rows["agent.tiny.max_positions"]
    assert "(env.backend=openai)" in component_rows["env.openai.base_url"]
    assert "(agent.sampler=llama.cpp or env.sampler=llama.cpp)" in component_rows["llamacpp.context"]


def test_the_main_config_has_at_most_108_knobs():
    """Issue 76, item 2: the main config lists what a user reaches for, at most 110 leaf knobs with its components'
    (the tiny models' shape, the OpenAI endpoint, the llama.cpp sampler); the experimental options are apart. 108
    since issue 88: the GRPO advantage scaling (TRL's) and the learnt seed draw's two knobs joined, and the three
    fields that chose among one main-path answer (the pg signal, the p_hat estimate, the oracle's rule) left."""
    from genenv.config import describe, describe_components
    main_rows = [name for name, _, _ in describe()]
    component_rows = [name for name, _, _ in describe_components()]
    assert len(main_rows) + len(component_rows) <= 108, (len(main_rows), len(component_rows))
    assert not set(main_rows) & set(component_rows)
    assert {"tiny.num_layers", "agent.tiny.max_positions", "env.openai.model", "llamacpp.dtype"} <= set(
        component_rows)


def test_a_components_knob_is_read_only_where_the_component_is_selected():
    """A knob of a component the run does not select would do nothing: set by the user it is an error naming it
    and the choice that reads it; set by the preset (whose tiny shape belongs to its tiny model) it is dropped."""
    with pytest.raises(ConfigError, match=r"agent\.tiny\.max_positions: set to 32, a knob of agent\.model=tiny, but "
                                          r"agent\.model is 'smollm2'"):
        load_config("default", ["agent.model=smollm2", "agent.tiny.max_positions=32"])
    with pytest.raises(ConfigError, match=r"tiny\.hidden_size: set to 32, a knob of agent\.model=tiny or "
                                          r"env\.model=tiny, but agent\.model is 'smollm2'"):
        load_config("default", ["agent.model=smollm2", "env.model=smollm2", "tiny.hidden_size=32"])
    with pytest.raises(ConfigError, match=r"env\.openai\.model: .* a knob of env\.backend=openai"):
        load_config("default", ["env.openai.model=qwen"])
    with pytest.raises(ConfigError, match=r"llamacpp\.context: .* agent\.sampler=llama\.cpp or env\.sampler="):
        load_config("default", ["llamacpp.context=512"])
    assert load_config("default", ["env.sampler=llama.cpp", "llamacpp.context=512"]).llamacpp.context == 512
    smoke = load_config("smoke")
    assert smoke.tiny.hidden_size == 32   # the preset's tiny shape, read where a tiny model is
    moved = load_config("smoke", ["agent.model=smollm2"])
    assert moved.agent.tiny == type(smoke.agent.tiny)() and moved.env.tiny == smoke.env.tiny
    assert moved.tiny == smoke.tiny   # the simulator's model is still tiny
    # a knob set at the value the preset's section would have held is not an error, the section is dropped
    both = ["agent.model=smollm2", "env.model=smollm2"]
    assert load_config("smoke", [*both, "tiny.num_layers=2"]).tiny.hidden_size == 64


def test_one_layer_of_defaults_a_preset_names_only_what_differs():
    """Issue 76, item 2: the knob's default is what a plain run uses (agent.lr 1e-3), and a preset sets a value only
    where it differs from the default (every shipped preset, each of its leaves)."""
    import yaml

    from genenv.config import presets_dir, to_dict
    assert RunConfig().agent.lr == load_config("default").agent.lr == 1e-3
    defaults = to_dict(RunConfig())

    def same_as_default(data, node, path=""):
        out = []
        for key, value in data.items():
            if isinstance(value, dict) and isinstance(node.get(key), dict) and key != "options":
                out += same_as_default(value, node[key], f"{path}{key}.")
            elif key != "name" and node.get(key) == value:
                out.append(f"{path}{key}")
        return out
    repeated = {path.stem: same_as_default(yaml.safe_load(path.read_text()) or {}, defaults)
                for path in sorted(presets_dir().glob("*.yaml"))}
    assert repeated == {name: [] for name in repeated}


def test_the_quick_preset_is_the_default_half_as_long():
    """`--preset quick` (a first comparison in about ten minutes) differs from the default in its name and
    epochs only, so what it shows is the default's method."""
    from genenv.config import to_dict
    quick, default = to_dict(load_config("quick")), to_dict(load_config("default"))
    assert {k for k in default if quick[k] != default[k]} == {"name", "epochs"}
    assert quick["epochs"] == default["epochs"] // 2


def test_a_domain_without_ordered_levels_runs_what_the_config_names_and_says_what_was_measured(tmp_path,
                                                                                               monkeypatch):
    """Issue 76, item 2: no default depends on the domain. A run on a domain that declares no ordered levels runs
    what its layers name (GenEnv by default) and its log says, once at the start, the measured alternative and its
    page; a domain with ordered levels, or another curriculum, says nothing. (Issue 94: said by the run, not by
    load_config.)"""
    from genenv.coevolve import run
    from genenv.domains import make_domain
    from genenv.domains.addition import AdditionDomain
    from genenv.metrics import level_free_note
    cfg = load_config("default", ["domain.name=apibank"])
    assert (cfg.curriculum, cfg.env.pg.gate, cfg.env.seed_draw) == ("genenv", "none", "uniform")
    note = level_free_note(cfg.curriculum, make_domain("multihop"))   # (multihop declares no ordered levels)
    assert "curriculum=random env.seed_draw=learnt_frontier" in note and "docs/results.md" in note
    assert level_free_note("random", make_domain("multihop")) is None
    assert level_free_note("genenv", make_domain("household")) is None
    for epochs in ("599", "600"):   # the budget changes nothing
        long = load_config("default", ["domain.name=apibank", f"epochs={epochs}"])
        assert (long.curriculum, long.env.seed_draw, long.experimental) == ("genenv", "uniform", {})
    named = tmp_path / "named.yaml"
    named.write_text("curriculum: static\ndomain: {name: multihop}\n")
    assert load_config("default", config_file=named).curriculum == "static"
    monkeypatch.setattr(AdditionDomain, "ordered_levels", False)
    lines = []
    run(load_config("smoke", ["epochs=1", "progress=false", "env.pg.gate=none"]), run_dir=tmp_path / "run",
        log=lines.append)
    assert lines.count(level_free_note("genenv", make_domain("addition"))) == 1


def test_a_knob_both_players_had_is_one_knob_of_the_run_its_old_names_read_for_a_release():
    """Issue 76: dtype, autocast, gradient checkpointing, prefix-cached sampling, llama.cpp's settings and the
    gradient clip are the run's (both players follow them). A player's old spelling gives the run its value with a
    warning; two players given two values, or an old name beside the new one, is one error naming them."""
    with pytest.warns(FutureWarning, match=r"agent\.autocast is deprecated: write autocast \(both players follow it\)"):
        cfg = load_config("smoke", ["agent.autocast=bfloat16"])
    assert cfg.autocast == "bfloat16"
    with pytest.warns(FutureWarning, match=r"agent\.grad_clip and env\.grad_clip are deprecated"):
        assert load_config("smoke", ["agent.grad_clip=0.5", "env.grad_clip=0.5"]).grad_clip == 0.5
    with pytest.warns(FutureWarning, match=r"agent\.sampler_context is deprecated: write agent\.llamacpp\.context"):
        cfg = load_config("smoke", ["agent.sampler=llama.cpp", "agent.sampler_context=512"])
    assert cfg.llamacpp.context == 512
    with pytest.raises(ConfigError, match=r"agent\.llamacpp\.context and env\.llamacpp\.context: 512 and 1024; both "
                                          r"players now follow one llamacpp\.context"):
        load_config("smoke", ["agent.llamacpp.context=512", "env.llamacpp.context=1024"])
    with pytest.raises(ConfigError, match=r"env\.dtype: set dtype alone"):
        load_config("smoke", ["dtype=bfloat16", "env.dtype=bfloat16"])


def test_a_removed_knob_is_refused_where_it_would_have_changed_something_and_a_run_folder_keeps_reading():
    """checkpoint_in_background (always on), engine.cpus_per_worker (an actor reserves its `threads`), out_dir
    (`--out`), engine.address and env.openai.api_key_env (Ray's and OpenAI's own variables): at the value that
    changed nothing, dropped with a warning; at another, one error saying what to do instead. A run folder written
    before them reads quietly, each player's old settings becoming the run's."""
    import copy
    import warnings

    from genenv.config import to_dict
    from genenv.run_config import run_config
    with pytest.warns(FutureWarning, match=r"checkpoint_in_background is removed \(a checkpoint is always written in "
                                          r"the background\): leave it out"):
        load_config("smoke", ["checkpoint_in_background=false"])
    with pytest.raises(ConfigError, match=r"out_dir: removed; a run's folder is `genenv run --out DIR`"):
        load_config("smoke", ["out_dir=elsewhere"])
    with pytest.raises(ConfigError, match=r"env\.openai\.api_key_env: removed; .* export OPENAI_API_KEY=\"\$MY_KEY\""):
        load_config("smoke", ["env.openai.api_key_env=MY_KEY"])
    old = to_dict(load_config("smoke"))
    for name in ("dtype", "autocast", "gradient_checkpointing", "prefix_cached_sampling", "grad_clip", "llamacpp"):
        value = old.pop(name)
        old["agent"][name], old["env"][name] = copy.deepcopy(value), copy.deepcopy(value)
    old["agent"]["autocast"] = "bfloat16"
    old.update(out_dir="elsewhere", checkpoint_in_background=False)
    old["engine"].update(address="auto", cpus_per_worker=2.0)
    old["env"]["openai"]["api_key_env"] = "MY_KEY"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cfg = run_config(old)
    assert cfg.autocast == "bfloat16" and cfg.grad_clip == 1.0 and cfg.llamacpp.context == 4096


def test_a_run_folder_written_before_the_shared_knobs_resumes_with_todays_spelling(tmp_path):
    """A run folder whose config.yaml gives each player its own dtype, tiny shape and llama.cpp settings (as every
    run before issue 76's step did) reads as today's config; a resume's override in today's spelling applies to it,
    and one that changes what the run is stays refused, named in today's spelling."""
    import copy

    import yaml

    from genenv.checkpoint import load_run_config
    from genenv.config import to_dict
    old = to_dict(load_config("smoke"))
    shape = old.pop("tiny")
    for role in ("agent", "env"):
        old[role]["tiny"] = {**shape, **old[role]["tiny"]}
        for name in ("dtype", "autocast", "gradient_checkpointing", "prefix_cached_sampling", "grad_clip", "llamacpp"):
            old[role][name] = copy.deepcopy(old[name])
    for name in ("dtype", "autocast", "gradient_checkpointing", "prefix_cached_sampling", "grad_clip", "llamacpp"):
        del old[name]
    old.update(out_dir="runs", checkpoint_in_background=True)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(old))
    cfg = load_run_config(tmp_path, ["epochs=5"], resuming=True)
    assert cfg.epochs == 5 and cfg.tiny.hidden_size == 32 and cfg.agent.tiny.max_positions == 32
    with pytest.raises(ConfigError, match=r"tiny\.hidden_size: a resume cannot change it"):
        load_run_config(tmp_path, ["tiny.hidden_size=64"], resuming=True)


def test_a_players_knob_at_the_top_names_the_players_that_have_it():
    """`sampler=llama.cpp` (issue 87, item 6): one line naming agent.sampler and env.sampler, not a near spelling."""
    with pytest.raises(ConfigError, match=r"^sampler: unknown field; did you mean agent.sampler or env.sampler\?"):
        load_config("smoke", ["sampler=llama.cpp"])
    with pytest.raises(ConfigError, match=r"^group_size: unknown field; did you mean agent.group_size\?"):
        load_config("smoke", ["group_size=4"])
    with pytest.raises(ConfigError, match=r"^variations: unknown field; did you mean env.variations\?"):
        load_config("smoke", ["variations=4"])


def test_old_spellings_are_read_by_a_module_of_their_own_only_when_a_config_holds_one():
    """Issue 88, item 2: config.py holds the knobs and their checks; genenv.old_spellings is imported only for a
    config with a name or value today's lacks (and then reads it, with its warning)."""
    import subprocess
    import sys
    code = ("import sys, warnings; from genenv.config import load_config; load_config('smoke', ['agent.lr=0.1']); "
            "print('old_spellings' in str(sorted(sys.modules))); warnings.simplefilter('ignore'); "
            "cfg = load_config('smoke', ['env.pg_steps=3']); print('genenv.old_spellings' in sys.modules, "
            "cfg.env.pg.steps)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["False", "True", "3"], done.stderr

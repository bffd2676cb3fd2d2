"""Configs written with the knobs' old names (a preset, a config file, overrides, a run folder's config.yaml), read
as today's: knobs that moved or merged, switches that became a registry's value, knobs removed. Each old name gives
a FutureWarning naming the new spelling (quietly from a run folder: its warning was given when it started). Read
only when a config holds a name or value today's lacks (:func:`genenv.config._read_old_spellings`).
"""

from __future__ import annotations

import copy
import warnings

from genenv.errors import ConfigError

# the warm-start knobs each player never read, removed in issue 76, at the values they always had (what a warm
# start's cache key holds for them, so no cached warm start retrains)
DEAD_WARMSTART_KNOBS = {"agent.warmstart.corpus_size": 20000, "env.warmstart.min_success": 0.9,
                        "env.warmstart.max_rounds": 3, "env.warmstart.check_tasks": 256}

# knobs that moved, old dotted name -> new: the simulator's knobs grouped by the update rule that reads them (issue
# 42), and the knobs of the options that lost their decision rule under experimental.<section> (issues 56, 76). The
# old names are read for one release with a FutureWarning (quietly from a run folder's config).
MOVED_KNOBS = {"env.pg_steps": "env.pg.steps", "env.pg_minibatch_groups": "env.pg.minibatch_groups",
               "env.pg_clip_eps": "env.pg.clip_eps",
               "env.pg_gate": "env.pg.gate", "env.pg_gate_window": "experimental.predicted_gate.window",
               "env.pg.gate_fit_window": "experimental.predicted_gate.window",
               "experimental.predicted_gate_window": "experimental.predicted_gate.window",
               "env.seed_draw_bins": "env.learnt_levels.bins",
               "experimental.predicted_seed_bins": "env.learnt_levels.bins",
               "experimental.predicted_seeds.bins": "env.learnt_levels.bins",
               "env.seed_draw_window": "env.learnt_levels.window",
               "experimental.predicted_seed_window": "env.learnt_levels.window",
               "experimental.predicted_seeds.window": "env.learnt_levels.window",
               "env.rwr_steps": "env.rwr.steps", "env.rwr_batch": "env.rwr.batch",
               "env.pool_replay": "env.rwr.pool_replay",
               "experimental.oracle_rule": "baseline.oracle_rule",
               "env.pg.probe_tasks": "experimental.probe_gain.tasks",
               "env.pg.probe_side": "experimental.probe_gain.side",
               "env.pg.likelihood_width": "experimental.answer_likelihood.width",
               **{f"env.progress.{name}": f"experimental.progress.{name}"
                  for name in ("clusters", "window", "min_count", "exploration")},
               # the llama.cpp sampler's knobs, a component's section (issue 76)
               **{f"{player}.sampler_{name}": f"{player}.llamacpp.{name}"
                  for player in ("agent", "env") for name in ("dtype", "context")}}
# knobs each player had, now one knob of the run that both players follow (issue 76): new dotted name -> the old
# per-player names. The old names are read for one release with a FutureWarning: a value either gave (the other at
# its default) is the run's; two players given two different values is an error naming both
SHARED_KNOBS = {**{name: (f"agent.{name}", f"env.{name}")
                   for name in ("dtype", "autocast", "gradient_checkpointing", "prefix_cached_sampling")},
                **{f"llamacpp.{name}": (f"agent.llamacpp.{name}", f"env.llamacpp.{name}")
                   for name in ("dtype", "context")},
                "grad_clip": ("agent.grad_clip", "env.grad_clip"),
                **{f"tiny.{name}": (f"agent.tiny.{name}", f"env.tiny.{name}")
                   for name in ("hidden_size", "intermediate_size", "num_layers", "num_heads")}}
# knobs removed in issue 76, old dotted name -> (the value at which leaving it out changes nothing, why it went or
# what to do instead, whether another value is refused with that advice or dropped with it as a warning)
REMOVED_KNOBS = {"checkpoint_in_background": (True, "a checkpoint is always written in the background", False),
                 "engine.cpus_per_worker": (1.0, "an actor reserves the `threads` CPUs it runs", False),
                 "out_dir": ("runs", "a run's folder is `genenv run --out DIR` (default runs/<name>)", True),
                 "engine.address": ("", "Ray joins the cluster its own variable RAY_ADDRESS names: export "
                                        "RAY_ADDRESS={value} and leave engine.address out", True),
                 "env.openai.api_key_env": ("OPENAI_API_KEY", "the key is read from OPENAI_API_KEY, the client's own "
                                                              "variable: export OPENAI_API_KEY=\"${value}\" and "
                                                              "leave env.openai.api_key_env out", True)}
# switches that became a registry's value: old dotted name -> (its value when on, the field it selects, the value);
# the old name at any other value selects nothing (it was off)
MOVED_SWITCHES = {"experimental.learnability_seeds": (True, "env.seed_draw", "learnability"),
                  "experimental.predicted_seeds": (True, "env.seed_draw", "learnt_frontier"),
                  "experimental.predicted_gate": (True, "env.pg.gate", "predicted"),
                  "experimental.posterior_p_hat": (True, "curriculum_reward.p_hat_estimate", "posterior"),
                  "curriculum_reward.posterior": (True, "curriculum_reward.p_hat_estimate", "posterior"),
                  "experimental.pg_reward": ("interior", "env.pg.signal", "interior"),
                  "env.pg.reward": ("interior", "env.pg.signal", "interior"),
                  "env.pg_reward": ("interior", "env.pg.signal", "interior")}
# the pg reward's variants (issue 76: options that lost their decision rule), old name -> the knob of the
# experimental signal env.pg.signal=penalised that holds it, and the value at which it changed nothing (an old name
# at that value is dropped; at any other it selects that signal with the value)
PENALTY_KNOBS = {"env.pg_invalid_reward": ("invalid_reward", 0.0), "env.pg.invalid_reward": ("invalid_reward", 0.0),
                 "env.pg.repeat_is_invalid": ("repeats", False)}
PENALISED_SIGNAL = "penalised"
_ABSENT = object()


def _at(data: dict, dotted: str):
    """The value at ``dotted`` in nested mappings, or ``_ABSENT``."""
    node = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def _put(data: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    node = data
    for depth, part in enumerate(parents):
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{'.'.join(parents[:depth + 1])}: expected a mapping, got {node!r}")
    node[last] = value


def _pop(data: dict, dotted: str):
    *parents, last = dotted.split(".")
    parent = _at(data, ".".join(parents)) if parents else data
    value = parent.pop(last)
    if parents and not parent:   # an emptied section of an old name (env.progress) goes with it
        _pop(data, ".".join(parents))
    return value


def read_old_spellings(data: dict, defaults: dict) -> dict:
    """``data`` (a whole config, or the layers over a preset) with every switch of :data:`MOVED_SWITCHES` read as the
    value it selects, every knob of :data:`MOVED_KNOBS` and :data:`SHARED_KNOBS` read from its old name and every
    knob of :data:`REMOVED_KNOBS` dropped, each with a FutureWarning naming the new spelling. An old name beside its
    new one is an error (and a removed value, :data:`genenv.config.REMOVED_VALUES`, is refused where the config is
    read, under its new name). ``defaults``: today's config at its defaults, as a dict."""
    level_gate = _at(data, "env.pg_level_gate")
    shared_old = [old for olds in SHARED_KNOBS.values() for old in olds]
    if (all(_at(data, old) is _ABSENT for old in (*MOVED_KNOBS, *MOVED_SWITCHES, *DEAD_WARMSTART_KNOBS,
                                                  *PENALTY_KNOBS, *REMOVED_KNOBS, *shared_old))
            and level_gate is _ABSENT):
        return data
    data = copy.deepcopy(data)
    for dead in DEAD_WARMSTART_KNOBS:   # a player never read it: dropped, whatever its value
        if _at(data, dead) is not _ABSENT:
            warnings.warn(f"{dead} is removed: that player's warm start never read it", FutureWarning, stacklevel=3)
            _pop(data, dead)
    for old, (on, field_name, value) in MOVED_SWITCHES.items():   # first: a switch's old name may be a new section
        setting = _at(data, old)
        if setting is _ABSENT or isinstance(setting, dict):
            continue
        _pop(data, old)
        if setting != on:
            warnings.warn(f"{old} is deprecated (it was off: leave it out)", FutureWarning, stacklevel=3)
            continue
        current = _at(data, field_name)
        # (the field at its default counts as unset: a run folder's config writes every field)
        if current not in (_ABSENT, _at(defaults, field_name), value):
            raise ConfigError(f"{old}: {setting!r} selects {field_name}={value}, and {field_name} is {current!r}; set "
                              f"{field_name} alone ({old} is deprecated)")
        why = "it joined the main path" if value == "learnt_frontier" else "an option that lost its decision rule"
        warnings.warn(f"{old}={setting} is deprecated: write {field_name}={value} ({why})", FutureWarning,
                      stacklevel=3)
        _put(data, field_name, value)
    for old, new in MOVED_KNOBS.items():
        if _at(data, old) is _ABSENT:
            continue
        if _at(data, new) is not _ABSENT:
            raise ConfigError(f"{old}: set {new} alone ({old} is its old name)")
        why = " (an option that lost its decision rule)" if new.startswith("experimental.") else ""
        warnings.warn(f"{old} is deprecated: write {new}{why}", FutureWarning, stacklevel=3)
        _put(data, new, _pop(data, old))
    for old, (unchanged, why, refused) in REMOVED_KNOBS.items():
        setting = _at(data, old)
        if setting is _ABSENT:
            continue
        _pop(data, old)
        if setting != unchanged and refused:
            raise ConfigError(f"{old}: removed; {why.format(value=setting)}")
        warnings.warn(f"{old} is removed: leave it out" if setting == unchanged else f"{old} is removed ({why}): "
                      "leave it out", FutureWarning, stacklevel=3)
    for new, olds in SHARED_KNOBS.items():
        given = {old: _pop(data, old) for old in olds if _at(data, old) is not _ABSENT}
        if not given:
            continue
        if _at(data, new) is not _ABSENT:
            raise ConfigError(f"{next(iter(given))}: set {new} alone (both players now follow it)")
        chosen = {value for value in given.values() if value != _at(defaults, new)}
        if len(chosen) > 1:
            raise ConfigError(f"{' and '.join(given)}: {' and '.join(map(repr, given.values()))}; both players now "
                              f"follow one {new}: set {new} alone (the code of commit 3d3030c runs them apart)")
        warnings.warn(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} deprecated: write {new} (both "
                      "players follow it)", FutureWarning, stacklevel=3)
        _put(data, new, chosen.pop() if chosen else _at(defaults, new))
    if level_gate is not _ABSENT:
        _pop(data, "env.pg_level_gate")
        if level_gate in (True, "true", "True"):
            gate = _at(data, "env.pg.gate")
            if gate not in (_ABSENT, "none", "levels"):
                raise ConfigError(f"env.pg_level_gate: true contradicts env.pg.gate={gate}; set env.pg.gate alone "
                                  "(env.pg_level_gate is deprecated)")
            warnings.warn("env.pg_level_gate is deprecated: write env.pg.gate=levels", FutureWarning, stacklevel=3)
            _put(data, "env.pg.gate", "levels")
    for old, (name, unchanged) in PENALTY_KNOBS.items():
        setting = _at(data, old)
        if setting is _ABSENT:
            continue
        _pop(data, old)
        if setting == unchanged and isinstance(setting, bool) == isinstance(unchanged, bool):
            warnings.warn(f"{old} is deprecated (at {unchanged!r} it changed nothing: leave it out)", FutureWarning,
                          stacklevel=3)
            continue
        signal = _at(data, "env.pg.signal")
        if signal not in (_ABSENT, "alpha", PENALISED_SIGNAL):
            raise ConfigError(f"{old}: {setting!r} is now a knob of env.pg.signal={PENALISED_SIGNAL} (the alpha "
                              f"signal with penalties), and env.pg.signal is {signal!r}; the two together run with "
                              "the code of commit fbcbc37")
        target = f"experimental.{PENALISED_SIGNAL}.{name}"
        if _at(data, target) is not _ABSENT:
            raise ConfigError(f"{old}: set {target} alone ({old} is its old name)")
        warnings.warn(f"{old}={setting!r} is deprecated: write env.pg.signal={PENALISED_SIGNAL} {target}={setting!r} "
                      "(an option that lost its decision rule)", FutureWarning, stacklevel=3)
        _put(data, "env.pg.signal", PENALISED_SIGNAL)
        _put(data, target, setting)
    return data


def drop_removed(data: dict) -> dict:
    """``data`` without the knobs of :data:`REMOVED_KNOBS`, whatever their values (a run folder's config: the run
    was started with them)."""
    if all(_at(data, old) is _ABSENT for old in REMOVED_KNOBS):
        return data
    data = copy.deepcopy(data)
    for old in REMOVED_KNOBS:
        if _at(data, old) is not _ABSENT:
            _pop(data, old)
    return data

"""Configs written with the knobs' old names (a preset, a config file, overrides, a run folder's config.yaml), read
as today's: knobs that moved or merged, knobs removed; a plugin's options' old names by the plugin's own reader
(:func:`genenv.plugins.add_old_spellings`). Each old name gives a FutureWarning naming the new spelling (quietly
from a run folder: its warning was given when it started). Read only when a config holds a name or value today's
lacks (:func:`genenv.config._read_old_spellings`).
"""

from __future__ import annotations

import copy
import warnings

from genenv.errors import ConfigError
from genenv.plugins import OLD_SPELLINGS, load_plugins

# the warm-start knobs each player never read, removed in issue 76, at the values they always had (what a warm
# start's cache key holds for them, so no cached warm start retrains)
DEAD_WARMSTART_KNOBS = {"agent.warmstart.corpus_size": 20000, "env.warmstart.min_success": 0.9,
                        "env.warmstart.max_rounds": 3, "env.warmstart.check_tasks": 256}

# knobs that moved, old dotted name -> new: the simulator's knobs grouped by the update rule that reads them (issue
# 42), the learnt seed draw's (issue 88) and the llama.cpp sampler's, a component's section (issue 76). The old names
# are read for one release with a FutureWarning (quietly from a run folder's config).
MOVED_KNOBS = {"env.pg_steps": "env.pg.steps", "env.pg_minibatch_groups": "env.pg.minibatch_groups",
               "env.pg_clip_eps": "env.pg.clip_eps", "env.pg_gate": "env.pg.gate",
               "env.seed_draw_bins": "env.learnt_levels.bins", "env.seed_draw_window": "env.learnt_levels.window",
               "env.rwr_steps": "env.rwr.steps", "env.rwr_batch": "env.rwr.batch",
               "env.pool_replay": "env.rwr.pool_replay",
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
# the fields that chose among one main-path answer and experiments' replacements (issue 88), at the main path's
# value: dropped (an experiment's value is moved by the plugin's reader, genenv.plugins.add_old_spellings)
PART_FIELDS = {"env.pg.signal": "alpha", "curriculum_reward.p_hat_estimate": "empirical",
               "baseline.oracle_rule": "frontier"}
ABSENT = object()   # (no value at a dotted name)


def at(data: dict, dotted: str):
    """The value at ``dotted`` in nested mappings, or ``ABSENT``."""
    node = data
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return ABSENT
        node = node[part]
    return node


def put(data: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    node = data
    for depth, part in enumerate(parents):
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"{'.'.join(parents[:depth + 1])}: expected a mapping, got {node!r}")
    node[last] = value


def pop(data: dict, dotted: str):
    *parents, last = dotted.split(".")
    parent = at(data, ".".join(parents)) if parents else data
    value = parent.pop(last)
    if parents and not parent:   # an emptied section of an old name (env.progress) goes with it
        pop(data, ".".join(parents))
    return value


def move_knobs(data: dict, moved: dict[str, str], note: str = "") -> None:
    """In ``data``, each knob of ``moved`` (old dotted name -> new) given under its old name moved to its new one,
    with a FutureWarning naming it (and ``note``); both names given is an error."""
    for old, new in moved.items():
        if at(data, old) is ABSENT:
            continue
        if at(data, new) is not ABSENT:
            raise ConfigError(f"{old}: set {new} alone ({old} is its old name)")
        warnings.warn(f"{old} is deprecated: write {new}{note}", FutureWarning, stacklevel=4)
        put(data, new, pop(data, old))


def read_old_spellings(data: dict, defaults: dict) -> dict:
    """``data`` (a whole config, or the layers over a preset) with every old spelling read as today's: first each
    plugin's (:func:`genenv.plugins.add_old_spellings`: the experimental options' are theirs), then the main path's:
    every knob of :data:`MOVED_KNOBS` and :data:`SHARED_KNOBS` read from its old name, every knob of
    :data:`REMOVED_KNOBS` and :data:`PART_FIELDS` dropped, each with a FutureWarning naming the new spelling. An old
    name beside its new one is an error (and a removed value, :data:`genenv.config.REMOVED_VALUES`, is refused where
    the config is read, under its new name). ``defaults``: today's config at its defaults, as a dict."""
    load_plugins()
    for read in OLD_SPELLINGS:
        data = read(data, defaults)
    level_gate = at(data, "env.pg_level_gate")
    shared_old = [old for olds in SHARED_KNOBS.values() for old in olds]
    if (all(at(data, old) is ABSENT for old in (*MOVED_KNOBS, *DEAD_WARMSTART_KNOBS, *REMOVED_KNOBS, *PART_FIELDS,
                                                *shared_old))
            and level_gate is ABSENT):
        return data
    data = copy.deepcopy(data)
    for dead in DEAD_WARMSTART_KNOBS:   # a player never read it: dropped, whatever its value
        if at(data, dead) is not ABSENT:
            warnings.warn(f"{dead} is removed: that player's warm start never read it", FutureWarning, stacklevel=3)
            pop(data, dead)
    move_knobs(data, MOVED_KNOBS)
    for old, (unchanged, why, refused) in REMOVED_KNOBS.items():
        setting = at(data, old)
        if setting is ABSENT:
            continue
        pop(data, old)
        if setting != unchanged and refused:
            raise ConfigError(f"{old}: removed; {why.format(value=setting)}")
        warnings.warn(f"{old} is removed: leave it out" if setting == unchanged else f"{old} is removed ({why}): "
                      "leave it out", FutureWarning, stacklevel=3)
    for old, main in PART_FIELDS.items():
        setting = at(data, old)
        if setting is ABSENT:
            continue
        if setting != main:
            raise ConfigError(f"{old}: {setting!r} is not known; the field is removed (the main path has one "
                              f"answer, {main!r}; `genenv config --describe` lists the experiments that replace it)")
        pop(data, old)
        warnings.warn(f"{old} is removed (the main path's one answer, {main!r}, runs): leave it out", FutureWarning,
                      stacklevel=3)
    for new, olds in SHARED_KNOBS.items():
        given = {old: pop(data, old) for old in olds if at(data, old) is not ABSENT}
        if not given:
            continue
        if at(data, new) is not ABSENT:
            raise ConfigError(f"{next(iter(given))}: set {new} alone (both players now follow it)")
        chosen = {value for value in given.values() if value != at(defaults, new)}
        if len(chosen) > 1:
            raise ConfigError(f"{' and '.join(given)}: {' and '.join(map(repr, given.values()))}; both players now "
                              f"follow one {new}: set {new} alone (the code of commit 3d3030c runs them apart)")
        warnings.warn(f"{' and '.join(given)} {'is' if len(given) == 1 else 'are'} deprecated: write {new} (both "
                      "players follow it)", FutureWarning, stacklevel=3)
        put(data, new, chosen.pop() if chosen else at(defaults, new))
    if level_gate is not ABSENT:
        pop(data, "env.pg_level_gate")
        if level_gate in (True, "true", "True"):
            gate = at(data, "env.pg.gate")
            if gate not in (ABSENT, "none", "levels"):
                raise ConfigError(f"env.pg_level_gate: true contradicts env.pg.gate={gate}; set env.pg.gate alone "
                                  "(env.pg_level_gate is deprecated)")
            warnings.warn("env.pg_level_gate is deprecated: write env.pg.gate=levels", FutureWarning, stacklevel=3)
            put(data, "env.pg.gate", "levels")
    return data


def drop_removed(data: dict) -> dict:
    """``data`` without the knobs of :data:`REMOVED_KNOBS`, whatever their values (a run folder's config: the run
    was started with them)."""
    if all(at(data, old) is ABSENT for old in REMOVED_KNOBS):
        return data
    data = copy.deepcopy(data)
    for old in REMOVED_KNOBS:
        if at(data, old) is not ABSENT:
            pop(data, old)
    return data

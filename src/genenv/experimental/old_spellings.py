"""The experimental options' old spellings, read as today's (:func:`read_old_spellings`, the reader
:func:`genenv.experimental.register` gives :func:`genenv.signals.add_old_spellings`; :mod:`genenv.old_spellings`
calls it before reading the main path's). Each old name gives a FutureWarning naming the new spelling (quietly from
a run folder: its warning was given when it started).
"""

from __future__ import annotations

import copy
import warnings

from genenv.config import ConfigError
from genenv.experimental.sections import PARTS
from genenv.old_spellings import ABSENT, at, move_knobs, pop, put

# the main-path fields that selected a part's class before only the main path's answer was left there (issue 88),
# old dotted name -> the part: an experimental value moves to experimental.<part> (the main path's value is dropped
# by genenv.old_spellings)
PART_FIELDS = {"env.pg.signal": "signal", "curriculum_reward.p_hat_estimate": "p_hat_estimate",
               "baseline.oracle_rule": "oracle_rule"}
# switches that became a value: old dotted name -> (its value when on, the field it selects, the value); the old
# name at any other value selects nothing (it was off)
MOVED_SWITCHES = {"experimental.learnability_seeds": (True, "env.seed_draw", "learnability"),
                  "experimental.predicted_seeds": (True, "env.seed_draw", "learnt_frontier"),
                  "experimental.predicted_gate": (True, "env.pg.gate", "predicted"),
                  "experimental.posterior_p_hat": (True, "experimental.p_hat_estimate", "posterior"),
                  "curriculum_reward.posterior": (True, "experimental.p_hat_estimate", "posterior"),
                  "experimental.pg_reward": ("interior", "experimental.signal", "interior"),
                  "env.pg.reward": ("interior", "experimental.signal", "interior"),
                  "env.pg_reward": ("interior", "experimental.signal", "interior")}
# knobs that moved, old dotted name -> new: the knobs of the options that lost their decision rule, under
# experimental.<section> (issues 56, 76), and the learnt seed draw's, which joined the main path (issue 88)
MOVED_KNOBS = {"env.pg_gate_window": "experimental.predicted_gate.window",
               "env.pg.gate_fit_window": "experimental.predicted_gate.window",
               "experimental.predicted_gate_window": "experimental.predicted_gate.window",
               "env.pg.probe_tasks": "experimental.probe_gain.tasks",
               "env.pg.probe_side": "experimental.probe_gain.side",
               "env.pg.likelihood_width": "experimental.answer_likelihood.width",
               **{f"env.progress.{name}": f"experimental.progress.{name}"
                  for name in ("clusters", "window", "min_count", "exploration")}}
JOINED_KNOBS = {"experimental.predicted_seed_bins": "env.learnt_levels.bins",
                "experimental.predicted_seeds.bins": "env.learnt_levels.bins",
                "experimental.predicted_seed_window": "env.learnt_levels.window",
                "experimental.predicted_seeds.window": "env.learnt_levels.window"}
# the pg reward's variants (issue 76), old name -> the knob of experimental.signal=penalised that holds it, and the
# value at which it changed nothing (an old name at that value is dropped; at any other it selects that signal)
PENALTY_KNOBS = {"env.pg_invalid_reward": ("invalid_reward", 0.0), "env.pg.invalid_reward": ("invalid_reward", 0.0),
                 "env.pg.repeat_is_invalid": ("repeats", False)}
# an old name that is today's spelling of a part, at the main path's value then (experimental.oracle_rule named
# baseline.oracle_rule before issue 76): dropped
MAIN_VALUES = {"experimental.oracle_rule": "frontier"}
# the values of the parts whose slots left the main path in issue 94, with the commit whose code still runs them
# (genenv.experimental.REMOVED says where each was measured)
RETIRED_COMMIT = "2039471"
RETIRED_VALUES = {"p_hat_estimate": ("posterior",), "oracle_rule": ("band",)}


def refuse_retired(data: dict) -> None:
    """A retired part's value (:data:`RETIRED_VALUES`), under its name or an old one moved to it: a ConfigError
    naming the commit whose code still runs it (:data:`RETIRED_COMMIT`)."""
    for part, values in RETIRED_VALUES.items():
        value = at(data, f"experimental.{part}")
        if value in values:
            raise ConfigError(f"experimental.{part}: {value!r} was removed (an option that lost its decision rule); "
                              f"its runs repeat with the code of commit {RETIRED_COMMIT} (docs/results-log.md)")
PENALISED = "penalised"
LOST = "an option that lost its decision rule"


def read_old_spellings(data: dict, defaults: dict) -> dict:
    """``data`` with the experimental options' old spellings written as today's: a part's old field at an
    experimental value (:data:`PART_FIELDS`), the switches of :data:`MOVED_SWITCHES`, the knobs of
    :data:`MOVED_KNOBS`, :data:`JOINED_KNOBS` and :data:`PENALTY_KNOBS`; each with a FutureWarning. An old name
    beside its new one is an error; an old name of the main path's answer (:data:`MAIN_VALUES`) is dropped.
    ``defaults``: today's config at its defaults, as a dict."""
    olds = (*PART_FIELDS, *MOVED_SWITCHES, *MOVED_KNOBS, *JOINED_KNOBS, *PENALTY_KNOBS)
    if all(at(data, old) is ABSENT for old in olds) and all(at(data, k) != v for k, v in MAIN_VALUES.items()):
        refuse_retired(data)
        return data
    data = copy.deepcopy(data)
    for old, main in MAIN_VALUES.items():
        if at(data, old) == main:
            pop(data, old)
            warnings.warn(f"{old}={main} is deprecated (the main path's answer: leave it out)", FutureWarning,
                          stacklevel=4)
    for old, part in PART_FIELDS.items():
        value = at(data, old)
        retired = value in RETIRED_VALUES.get(part, ())
        if value not in PARTS.get(part, {}) and not retired:   # (the main path's value, or none: read elsewhere)
            continue
        pop(data, old)
        new = f"experimental.{part}"
        if at(data, new) not in (ABSENT, value):
            raise ConfigError(f"{old}: set {new} alone ({old}={value} is its old spelling)")
        if not retired:   # (a retired one is refused by the config, naming the commit that runs it)
            warnings.warn(f"{old}={value} is deprecated: write {new}={value} ({LOST})", FutureWarning, stacklevel=4)
        put(data, new, value)
    for old, (on, field_name, value) in MOVED_SWITCHES.items():   # (a switch's old name may be a new section)
        setting = at(data, old)
        if setting is ABSENT or isinstance(setting, dict):
            continue
        pop(data, old)
        if setting != on:
            warnings.warn(f"{old} is deprecated (it was off: leave it out)", FutureWarning, stacklevel=4)
            continue
        current = at(data, field_name)
        # (the field at its default counts as unset: a run folder's config writes every field)
        if current not in (ABSENT, at(defaults, field_name), value):
            raise ConfigError(f"{old}: {setting!r} selects {field_name}={value}, and {field_name} is {current!r}; set "
                              f"{field_name} alone ({old} is deprecated)")
        why = "it joined the main path" if value == "learnt_frontier" else LOST
        warnings.warn(f"{old}={setting} is deprecated: write {field_name}={value} ({why})", FutureWarning,
                      stacklevel=4)
        put(data, field_name, value)
    move_knobs(data, MOVED_KNOBS, f" ({LOST})")
    move_knobs(data, JOINED_KNOBS)
    for old, (name, unchanged) in PENALTY_KNOBS.items():
        setting = at(data, old)
        if setting is ABSENT:
            continue
        pop(data, old)
        if setting == unchanged and isinstance(setting, bool) == isinstance(unchanged, bool):
            warnings.warn(f"{old} is deprecated (at {unchanged!r} it changed nothing: leave it out)", FutureWarning,
                          stacklevel=4)
            continue
        signal = at(data, "experimental.signal")
        if signal not in (ABSENT, PENALISED):
            raise ConfigError(f"{old}: {setting!r} is now a knob of experimental.signal={PENALISED} (the alpha "
                              f"signal with penalties), and experimental.signal is {signal!r}; the two together run "
                              "with the code of commit fbcbc37")
        target = f"experimental.{PENALISED}.{name}"
        if at(data, target) is not ABSENT:
            raise ConfigError(f"{old}: set {target} alone ({old} is its old name)")
        warnings.warn(f"{old}={setting!r} is deprecated: write experimental.signal={PENALISED} {target}={setting!r} "
                      f"({LOST})", FutureWarning, stacklevel=4)
        put(data, "experimental.signal", PENALISED)
        put(data, target, setting)
    refuse_retired(data)
    return data

"""Options that were measured and not adopted, behind a plugin boundary (issues 56, 76).

Each lost the decision rule written before its dev runs; it is kept so those runs can be repeated, and because
some are the controls later questions compare against (issue 55 names the predicted gate with the predicted seed
draw as the best earlier level-free arm). Each is a strategy registered by :func:`register`, which genenv's own
``genenv.strategies`` entry point calls: no module outside this package imports it, and the main path never tests
one of its names. Where the main path has a choice, an option is one more entry of its registry, selected by the
registry's field (``env.pg.gate=predicted``, ``env.seed_draw=progress``); where it has one answer, an option
replaces it, selected by ``experimental.<part>`` (``experimental.signal=probe_gain``). Its knobs live under
``experimental.<section>``; its old spellings are read by :mod:`genenv.experimental.old_spellings`.
No preset selects one and no default depends on them. :data:`EXPERIMENTS` says, for each, what it does, where its
measurement is and what the rule said; :data:`REMOVED` names the options that were taken out and the commit whose
code still runs them.
"""

from __future__ import annotations

from dataclasses import dataclass

from genenv.experimental.old_spellings import RETIRED_COMMIT


def register() -> None:
    """Register every experimental strategy and the hooks through which the main path reaches them: the parts they
    replace, the check of their settings, their part of ``genenv config --describe`` and the reader of their old
    spellings (the ``genenv.strategies`` entry point)."""
    from genenv.experimental import agent_signals, learning_progress, old_spellings, options, predicted  # noqa: F401, PLC0415
    from genenv.experimental.sections import check_sections, describe_options, replacement  # noqa: PLC0415
    from genenv.signals import add_config_check, add_description, add_old_spellings, add_replacement  # noqa: PLC0415
    add_replacement(replacement)
    add_config_check(check_sections)
    add_description(describe_options)
    add_old_spellings(old_spellings.read_old_spellings)


@dataclass(frozen=True)
class Experiment:
    """One experimental option: the setting that selects it, what it does, and what measured it."""
    setting: str       # knob=value
    what: str
    measured: str      # the results-log page
    decision: str      # the rule's reading that left it out


EXPERIMENTS: tuple[Experiment, ...] = (
    Experiment("experimental.signal=interior", "pg pays R_env only for tasks the agent sometimes solves, meant for "
               "alpha < 0.5 (formerly experimental.pg_reward=interior)",
               "docs/results-log/issue13-attempts-1-4.md (attempt 2)",
               "dev, 8 seeds: -0.008 [-0.034, +0.010] (alpha 0.25) and +0.003 [-0.006, +0.013] (alpha 0.3) "
               "against the default reward; not adopted"),
    Experiment("experimental.signal=penalised", "the alpha signal with an invalid generation earning "
               "experimental.penalised.invalid_reward and, with experimental.penalised.repeats, a repeated valid task "
               "earning it too (formerly env.pg.invalid_reward, env.pg.repeat_is_invalid)",
               "docs/results-log/apibank-comparison.md (pilots E, F, G)",
               "F (invalid_reward -0.5) passed its pilot rule (valid generations 37% -> 61%), but the rise on seed 1 "
               "was a collapse onto one solved request, the held-out comparison was never run, and constrained "
               "decoding (93% valid) replaced it in the preset; G (repeats) was built and never run; no preset "
               "selects it"),
    Experiment("env.seed_draw=learnability", "the simulator's seed tasks drawn by p(1-p) of their last p_hat",
               "docs/results-log/issue13-attempts-1-4.md (attempt 3)",
               "dev, 8 seeds: +0.011 [-0.015, +0.050] over uniform seeds; not adopted"),
    Experiment("env.pg.gate=predicted", "pg pays only tasks whose success, predicted from their text by a ridge "
               "regression fit to the pool's recent p_hat, is below env.pg.gate_mastered (no levels)",
               "docs/results-log/issue37-dev.md, issue37-fresh.md",
               "fresh seeds, with the learnt seed draw, minus random with the same draw: +0.020 [-0.020, "
               "+0.065]; not adopted (issue 55's control)"),
    Experiment("experimental.signal=probe_gain", "a valid task earns its GRPO gradient's first-order gain on a "
               "probe set of held-in pool tasks", "docs/results-log/issue55.md (2b, 2c, 3b)",
               "below +0.02 over random on dev at T200 and T600, the hard-side probe too; not adopted"),
    Experiment("experimental.signal=answer_likelihood", "a valid task earns the agent's probability of its verified "
               "response, in log-odds around alpha", "docs/results-log/issue55.md (2b, 2c)",
               "below +0.02 over random on dev at T200 and T600; not adopted"),
    Experiment("experimental.signal=learning_progress", "a valid task earns its cluster's learning progress",
               "docs/results-log/issue55.md (4c)", "16 dev seeds: ahead of its untrained control on 14, the "
               "interval including 0; not adopted"),
    Experiment("env.seed_draw=progress", "seeds drawn from clusters by their learning progress (the untrained "
               "simulator given learning_progress's information)", "docs/results-log/issue55.md (4c)",
               "the control that learning_progress did not beat; never a default"),
)

# options taken out of the code (issues 56, 94), with the commit whose code still runs them and where they were measured
REMOVED: dict[str, tuple[str, str]] = {
    "env.pg.gate=greedy": ("d99c82e", "docs/results-log/issue37-dev.md: the greedy gate lost on dev"),
    "domain.options.catalog (api-bank)": ("d99c82e", "docs/results-log/apibank-comparison.md: the API catalog in "
                                          "the simulator's prompt was not adopted"),
    "experimental.oracle_rule=band": (RETIRED_COMMIT, "docs/results-log/issue13-sixteen-seeds.md: dev, 8 seeds, "
                                      "'frontier' minus 'band' +0.057 [+0.010, +0.108] (off the main path: issue 94)"),
    "experimental.p_hat_estimate=posterior": (RETIRED_COMMIT, "never measured to gain; never a default (off the main "
                                              "path: issue 94)"),
}


def experiment(setting: str) -> Experiment:
    """The entry of ``setting`` (``knob=value``; a KeyError names the known ones)."""
    for entry in EXPERIMENTS:
        if entry.setting == setting:
            return entry
    raise KeyError(f"no experimental option {setting!r}; known: {', '.join(e.setting for e in EXPERIMENTS)}")

"""Options that were measured and not adopted, in one place (issue 56).

Each lost the decision rule written before its dev runs; it is kept so those runs can be repeated, and because
some are the controls later questions compare against (issue 55 names the predicted gate with the predicted seed
draw as the best earlier level-free arm). A run turns one on under the config's ``experimental`` section; no preset
sets one and the library's defaults never depend on them. :data:`EXPERIMENTS` says, for each switch, what it does,
where its measurement is and what the rule said; :data:`REMOVED` names the options that were taken out and the
commit whose code still runs them. ``genenv.experimental.predicted`` holds the code of the predicted gate and seed
draw; the others are a branch of a function the main path has anyway.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Experiment:
    """One ``experimental.<switch>`` option: what it does, the knobs that belong to it, and what measured it."""
    switch: str
    what: str
    measured: str      # the results-log page
    decision: str      # the rule's reading that left it out
    knobs: tuple[str, ...] = ()


EXPERIMENTS: tuple[Experiment, ...] = (
    Experiment("pg_reward", "pg pays R_env only for tasks the agent sometimes solves ('interior'), meant for "
               "alpha < 0.5", "docs/results-log/issue13-attempts-1-4.md (attempt 2)",
               "dev, 8 seeds: -0.008 [-0.034, +0.010] (alpha 0.25) and +0.003 [-0.006, +0.013] (alpha 0.3) "
               "against the default reward; not adopted"),
    Experiment("oracle_rule", "the oracle writes at the level with the largest band share ('band') instead of the "
               "easiest unmastered one", "docs/results-log/issue13-sixteen-seeds.md",
               "dev, 8 seeds: 'frontier' minus 'band' +0.057 [+0.010, +0.108]; frontier adopted"),
    Experiment("posterior_p_hat", "every p_hat the Beta(1,1) posterior mean (k+1)/(n+2)",
               "none: moved here by issue 42 with the options no rule adopted (commit 87ec9e6)",
               "no run on the record shows a gain; never a default"),
    Experiment("learnability_seeds", "the simulator's seed tasks drawn by p(1-p) of their last p_hat",
               "docs/results-log/issue13-attempts-1-4.md (attempt 3)",
               "dev, 8 seeds: +0.011 [-0.015, +0.050] over uniform seeds; not adopted"),
    Experiment("predicted_gate", "pg pays only tasks whose success, predicted from their text by a ridge "
               "regression fit to the pool's recent p_hat, is below env.pg.gate_mastered (no levels)",
               "docs/results-log/issue37-dev.md, issue37-fresh.md",
               "fresh seeds, with predicted_seeds, minus random with the same draw: +0.020 [-0.020, +0.065]; not "
               "adopted (issue 55's control)", knobs=("predicted_gate_window",)),
    Experiment("predicted_seeds", "the frontier seed draw over learned levels: pool tasks ranked by the same "
               "predicted success, cut into equal groups (no levels)",
               "docs/results-log/issue37-fresh.md", "as predicted_gate; kept as issue 55's control",
               knobs=("predicted_seed_bins", "predicted_seed_window")),
)

# options taken out of the code (issue 56), with the commit whose code still runs them and where they were measured
REMOVED: dict[str, tuple[str, str]] = {
    "env.pg.gate=greedy": ("d99c82e", "docs/results-log/issue37-dev.md: the greedy gate lost on dev"),
    "domain.options.catalog (api-bank)": ("d99c82e", "docs/benchmarks/apibank-comparison.md: the API catalog in "
                                          "the simulator's prompt was not adopted"),
}


def experiment(switch: str) -> Experiment:
    """The registry entry of ``experimental.<switch>`` (a KeyError names the known switches)."""
    for entry in EXPERIMENTS:
        if entry.switch == switch:
            return entry
    raise KeyError(f"no experimental option {switch!r}; known: {', '.join(e.switch for e in EXPERIMENTS)}")

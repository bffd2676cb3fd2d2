"""``env.pg.gate=predicted``: the pg gate over a difficulty the pool learns from p_hat (:mod:`genenv.text_difficulty`),
with no domain levels (issue 37), not adopted (issue 37's fresh seeds: this gate with the learnt seed draw minus
the untrained simulator with the same draw +0.020 [-0.020, +0.065]); kept as issue 55's control. The learnt seed
draw it was run with is the main path's ``env.seed_draw=learnt_frontier`` (issue 88).
"""

from __future__ import annotations

from dataclasses import dataclass

from genenv.config import knob
from genenv.experimental.sections import Experimental
from genenv.signals import GATES, Gate
from genenv.text_difficulty import TextDifficulty, recent_outcomes


def predicted_gate(pool, mastered: float, window: int):
    """``env.pg.gate=predicted`` (no domain levels), the pg gate: a valid task may earn unless the difficulty
    model, fit on the pool's ``window`` most recent rolled-out tasks, predicts its success at ``mastered`` or
    above (a task that looks like mastered ones does not pay)."""
    model = TextDifficulty().fit(*recent_outcomes(pool, window))
    return lambda c: not model.predict(c.parsed.text) >= mastered


# ----- the registered gate (env.pg.gate=predicted) ---------------------------------------------------------

@dataclass
class PredictedGateKnobs:
    """``env.pg.gate=predicted``."""
    window: int = knob(1024, "the most recently added rolled-out pool tasks the difficulty model is fit on", lo=16)


@GATES.register("predicted")
class PredictedGate(Experimental, Gate):
    """A valid task may earn only if its success, predicted from its text, is below ``env.pg.gate_mastered``."""
    knobs, section = PredictedGateKnobs, "predicted_gate"

    def predicate(self, domain, pool):
        return predicted_gate(pool, self.cfg.env.pg.gate_mastered, self.options.window)

"""Deprecated (one release): the curriculum math moved to :mod:`genenv.reward`, with every other part of what the
simulator is paid. Importing this module warns and re-exports the old names."""

import warnings

from genenv.reward import (  # noqa: F401
    alpha_reward,
    frontier_reward,
    in_band,
    rwr_weights,
    success_rate,
)

warnings.warn("genenv.curriculum is deprecated: import these functions from genenv.reward", FutureWarning,
              stacklevel=2)

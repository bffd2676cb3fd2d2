"""genenv's plugins: the ``genenv.strategies`` entry points, each called once (:func:`load_plugins`; genenv's own
options that lost their decision rule are one), and the hook for their options' old spellings, which the config's
reader of old names calls. Below the config: it imports nothing of genenv. The other hooks a plugin fills (its
strategies, replacements, config checks and descriptions) are :mod:`genenv.signals`', which re-exports these."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable

ENTRY_POINT_GROUP = "genenv.strategies"   # each entry point: a callable that registers strategies when called
OLD_SPELLINGS: list[Callable[[dict, dict], dict]] = []   # the plugins' readers of their old spellings
_LOADED: list[bool] = [False]


def load_plugins() -> None:
    """Call every ``genenv.strategies`` entry point once."""
    if _LOADED[0]:
        return
    _LOADED[0] = True
    for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
        point.load()()


def add_old_spellings(read: Callable[[dict, dict], dict]) -> None:
    """A plugin's reader of its options' old spellings: ``read(data, defaults)`` returns a config mapping (whole,
    or layers over a preset; ``defaults``: today's config at its defaults) with them written as today's, each with
    a FutureWarning (:mod:`genenv.old_spellings` calls it first, before reading the main path's)."""
    if read not in OLD_SPELLINGS:
        OLD_SPELLINGS.append(read)

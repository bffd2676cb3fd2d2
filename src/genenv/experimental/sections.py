"""The experimental options' settings: ``experimental.<part>`` (which experimental class replaces a main-path part)
and ``experimental.<section>`` (an option's knobs) of a run's config, read, checked and described here.

The main path holds no knowledge of them. :mod:`genenv.signals` builds every strategy with its ``read_options``
hook, asks the replacements plugins add (:func:`genenv.signals.add_replacement`) for each of its parts, runs the
config checks plugins add (:func:`genenv.signals.add_config_check`) and prints the descriptions they add
(:func:`genenv.signals.add_description`); :func:`genenv.experimental.register` adds this module's. The config keeps
``experimental`` as a plain dict (``RunConfig.experimental``) until :func:`check_sections` builds each section into
its dataclass.
"""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, ClassVar

from genenv.config import ConfigError, describe, from_dict
from genenv.signals import MAIN_PARTS, REGISTRIES, Signal, selected

if TYPE_CHECKING:
    from genenv.config import RunConfig


class Experimental:
    """Mixin of an experimental strategy (first among its bases): ``knobs``, a dataclass of its settings, read from
    ``experimental.<section>`` into ``self.options``."""
    experimental: ClassVar[bool] = True
    knobs: ClassVar[type | None] = None
    section: ClassVar[str | None] = None

    @classmethod
    def read_options(cls, cfg: RunConfig):
        if cls.knobs is None:
            return None
        value = cfg.experimental.get(cls.section)
        return value if isinstance(value, cls.knobs) else from_dict(cls.knobs, value or {},
                                                                     f"experimental.{cls.section}.")


# the experimental classes that may replace each main-path part (genenv.signals.MAIN_PARTS), by name: selected by
# experimental.<part>=<name>
PARTS: dict[str, dict[str, type]] = {name: {} for name in MAIN_PARTS}
KINDS = {"signal": Signal}   # what each part is


def replaces(part: str, name: str):
    """``@replaces("signal", "probe_gain")``: the class takes the main path's part ``part`` where the config says
    ``experimental.<part>=<name>``."""
    def wrap(cls):
        if not (issubclass(cls, Experimental) and issubclass(cls, KINDS[part])):
            raise TypeError(f"{cls.__name__}: an Experimental {KINDS[part].__name__} is needed for {part}")
        PARTS[part][name] = cls
        cls.name, cls.setting = name, f"experimental.{part}={name}"
        return cls
    return wrap


def replacement(cfg: RunConfig, part: str) -> type | None:
    """The class ``experimental.<part>`` selects (the hook given to :func:`genenv.signals.add_replacement`)."""
    name = cfg.experimental.get(part)
    if name is None:
        return None
    if name not in PARTS[part]:
        raise ConfigError(f"experimental.{part}: {name!r} is not an experimental {part.replace('_', ' ')}; choose "
                          f"one of {', '.join(PARTS[part])}, or leave it out for the main path's "
                          f"{MAIN_PARTS[part].__name__}")
    return PARTS[part][name]


def experimental_options() -> list[tuple[str, type]]:
    """(the setting that selects it, class) of every experimental strategy: registry by registry, then part by
    part."""
    registered = [(cls.setting, cls) for registry in REGISTRIES for name in registry.names()
                  if issubclass(cls := registry.entries[name], Experimental)]
    return registered + [(cls.setting, cls) for classes in PARTS.values() for cls in classes.values()]


def sections() -> dict[str, tuple[type, list[str]]]:
    """``experimental.<section>`` -> (its knobs dataclass, the ``knob=name`` settings that read it)."""
    out: dict[str, tuple[type, list[str]]] = {}
    for setting, cls in experimental_options():
        if cls.section and cls.knobs is not None:
            out.setdefault(cls.section, (cls.knobs, []))[1].append(setting)
    return out


def check_sections(cfg: RunConfig) -> None:
    """``cfg.experimental`` holds exactly the knob sections of the selected strategies, each validated into its
    dataclass (a section of a strategy not selected is an error unless it only repeats the defaults, as an older run
    folder's config does: then it is dropped)."""
    chosen = {cls.section for cls in selected(cfg)
              if issubclass(cls, Experimental) and cls.section and cls.knobs is not None}
    known = sections()
    out = {}
    for key, value in cfg.experimental.items():
        if key in PARTS:   # a part's selector (checked by replacement, through selected)
            out[key] = value
            continue
        if key not in known:
            raise ConfigError(f"experimental.{key}: no experimental option has this section, nor is it a part one "
                              f"replaces; known: {', '.join([*PARTS, *sorted(known)])}")
        knobs, settings = known[key]
        built = value if isinstance(value, knobs) else from_dict(knobs, value, f"experimental.{key}.")
        if key not in chosen:
            defaults = knobs()
            if built == defaults:
                continue
            changed = next(f.name for f in dataclasses.fields(knobs)
                           if getattr(built, f.name) != getattr(defaults, f.name))
            raise ConfigError(f"experimental.{key}.{changed}: set to {getattr(built, changed)!r}, a knob of "
                              f"{' and '.join(settings)}, which this run does not select; leave it at its default "
                              f"({getattr(defaults, changed)!r}) or select it")
        out[key] = built
    for key in chosen - set(out):
        out[key] = known[key][0]()
    cfg.experimental = {key: out[key] for key in sorted(out)}


HEADING = ("experimental: options measured and not adopted (docs/results-log/), each with the setting that selects it, "
           "its knobs (experimental.<section>) after it")


def describe_options(cfg: RunConfig | None = None) -> tuple[str, list[tuple[str, object, str]]]:
    """The heading and rows of ``genenv config --describe``'s experimental part: each part's selector, then each
    option, named
    ``experimental.<its section>`` (or ``experimental.<its name>`` where it has none, or shares the section of an
    option listed before it), with the setting that selects it and what it does; then its section's knobs (their
    values in ``cfg`` where the run selects it, else the defaults)."""
    rows: list[tuple[str, object, str]] = [
        (f"experimental.{part}", cfg.experimental.get(part, "") if cfg is not None else "",
         f"an experimental {part.replace('_', ' ')} in the place of the main path's {MAIN_PARTS[part].__name__}: "
         f"{', '.join(PARTS[part])} (left out: the main path's)") for part in PARTS]
    listed: set[str] = set()
    for setting, cls in experimental_options():
        has_knobs = bool(cls.section and cls.knobs is not None and cls.section not in listed)
        name = cls.section if has_knobs else setting.rpartition("=")[2]
        rows.append((f"experimental.{name}", "", f"selected by {setting}: {' '.join((cls.__doc__ or '').split())}"))
        if has_knobs:
            listed.add(cls.section)
            values = cfg.experimental.get(cls.section) if cfg is not None else None
            rows += describe(cls.knobs, f"experimental.{cls.section}.", values)
    return HEADING, rows


__all__ = ["PARTS", "Experimental", "check_sections", "describe_options", "experimental_options", "replacement",
           "replaces", "sections"]

"""Task families. Importing this package registers the built-in domains, each a package of its own that owns its
evaluator, its benchmark driver and its data reader (``genenv.domains.<name>``; ``addition`` is one module)."""

import importlib

from genenv.config import ConfigError
from genenv.domains import (
    addition,  # noqa: F401  (registers "addition")
    apibank,  # noqa: F401  (registers "apibank"; needs the API-Bank data when used)
    household,  # noqa: F401  (registers "household")
    multihop,  # noqa: F401  (registers "multihop")
    reasoning_gym,  # noqa: F401  (registers "reasoning_gym"; needs reasoning-gym when used)
    toolcall,  # noqa: F401  (registers "toolcall"; needs bfcl-eval when used)
    travel,  # noqa: F401  (registers "travel"; needs the TravelPlanner data when used)
)
from genenv.domains.base import (
    Domain,
    Invalid,
    StepResult,
    Task,
    TaskShape,
    domain_class,
    make_domain,
    register,
    registered_domains,
)

DOMAIN_PACKAGES = (apibank, household, multihop, reasoning_gym, toolcall, travel)


def benchmark_names() -> dict[str, str]:
    """``genenv eval --benchmark NAME``: every benchmark a domain package declares (its ``BENCHMARKS``: name -> the
    module whose ``from_command_line(args, common)`` runs it), by name, with the domain package declaring it."""
    return {name: package.__name__ for package in DOMAIN_PACKAGES for name in getattr(package, "BENCHMARKS", {})}


def benchmark_module(name: str):
    """The module that runs the benchmark ``name`` (imported now: a driver loads torch and the models), or None
    when no domain package declares it."""
    for package in DOMAIN_PACKAGES:
        target = getattr(package, "BENCHMARKS", {}).get(name)
        if target is not None:
            return importlib.import_module(target)
    return None


def declares_ordered_levels(name: str) -> bool | None:
    """Whether the domain ``domain.name`` names declares ordered difficulty levels (``Domain.ordered_levels``); None
    when there is no such domain (its error comes when the run makes it). ``load_config(ordered_levels=...)``."""
    try:
        return bool(domain_class(name).ordered_levels)
    except ConfigError:
        return None


__all__ = ["DOMAIN_PACKAGES", "Domain", "Invalid", "StepResult", "Task", "TaskShape", "benchmark_module",
           "benchmark_names", "declares_ordered_levels", "make_domain", "register", "registered_domains"]

"""Task families. Importing this package registers the built-in domains, each a package of its own that owns its
evaluator, its benchmark driver and its data reader (``genenv.domains.<name>``; ``addition`` is one module)."""

import importlib
import importlib.metadata

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


BENCHMARK_ENTRY_POINTS = "genenv.benchmarks"   # an installed package's benchmarks: name = "package.module"


def benchmark_modules() -> dict[str, str]:
    """``genenv eval --benchmark NAME``: every benchmark, name -> the module that runs it (its
    ``add_arguments(parser)`` declares its command-line options, its ``from_command_line(args, common)`` runs it,
    an ``auto_sampler(args)`` it may declare says what ``--sampler auto`` decodes with):
    ``heldout`` (a config's own sets, :mod:`genenv.heldout_eval`), each built-in domain package's ``BENCHMARKS``, and
    each installed package's ``genenv.benchmarks`` entry points (a plugin domain's benchmark)."""
    out = {"heldout": "genenv.heldout_eval"}
    out.update({name: target for package in DOMAIN_PACKAGES for name, target in getattr(package, "BENCHMARKS",
                                                                                      {}).items()})
    for point in importlib.metadata.entry_points(group=BENCHMARK_ENTRY_POINTS):
        out.setdefault(point.name, point.value)
    return out


def benchmark_names() -> dict[str, str]:
    """The benchmarks a domain package declares (built-in or a plugin's), by name, with the package declaring it
    (a top-level module's own name)."""
    return {name: target.rpartition(".")[0] or target for name, target in benchmark_modules().items()
            if name != "heldout"}


def benchmark_module(name: str):
    """The module that runs the benchmark ``name`` (imported now: a driver loads torch and the models), or None
    when none is declared under that name."""
    target = benchmark_modules().get(name)
    return importlib.import_module(target) if target else None


__all__ = ["DOMAIN_PACKAGES", "Domain", "Invalid", "StepResult", "Task", "TaskShape", "benchmark_module",
           "benchmark_modules", "benchmark_names", "domain_class", "make_domain", "register",
           "registered_domains"]

"""Task families. Importing this package registers the built-in domains."""

from genenv.domains import (
    addition,  # noqa: F401  (registers "addition")
    apibank,  # noqa: F401  (registers "apibank"; needs the API-Bank data when used)
    household,  # noqa: F401  (registers "household")
    multihop,  # noqa: F401  (registers "multihop")
    reasoning_gym,  # noqa: F401  (registers "reasoning_gym"; needs reasoning-gym when used)
    toolcall,  # noqa: F401  (registers "toolcall"; needs bfcl-eval when used)
    travel,  # noqa: F401  (registers "travel"; needs the TravelPlanner data when used)
)
from genenv.domains.base import Domain, Invalid, StepResult, Task, make_domain, register, registered_domains

__all__ = ["Domain", "Invalid", "StepResult", "Task", "make_domain", "register", "registered_domains"]

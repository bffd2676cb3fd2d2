"""Task families. Importing this package registers the built-in domains."""

from genenv.domains.base import Domain, Invalid, StepResult, Task, make_domain, register, registered_domains
from genenv.domains import addition  # noqa: F401  (registers "addition")
from genenv.domains import household  # noqa: F401  (registers "household")
from genenv.domains import toolcall  # noqa: F401  (registers "toolcall"; needs bfcl-eval when used)

__all__ = ["Domain", "Invalid", "StepResult", "Task", "make_domain", "register", "registered_domains"]

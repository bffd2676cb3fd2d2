"""Task families. Importing this package registers the built-in domains."""

from genenv.domains.base import Domain, Invalid, StepResult, Task, make_domain, register, registered_domains
from genenv.domains import addition  # noqa: F401  (registers "addition")

__all__ = ["Domain", "Invalid", "StepResult", "Task", "make_domain", "register", "registered_domains"]

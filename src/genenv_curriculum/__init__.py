"""`vf-eval genenv-curriculum`: genenv's curriculum as an endless verifiers taskset (docs/verifiers.md)."""

from genenv.integrations.verifiers import DomainEnv
from genenv.integrations.verifiers_curriculum import CurriculumTaskset

__all__ = ["CurriculumTaskset", "DomainEnv"]

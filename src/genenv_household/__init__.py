"""`vf-eval genenv-household`: genenv's household domain as a verifiers taskset (docs/verifiers.md)."""

from genenv.integrations.verifiers import DomainEnv, domain_taskset

HouseholdTaskset = domain_taskset("household", __name__, "Household")

__all__ = ["HouseholdTaskset", "DomainEnv"]

"""`vf-eval genenv-travel`: genenv's travel domain as a verifiers taskset (docs/verifiers.md)."""

from genenv.integrations.verifiers import DomainEnv, domain_taskset

TravelTaskset = domain_taskset("travel", __name__, "Travel")

__all__ = ["TravelTaskset", "DomainEnv"]

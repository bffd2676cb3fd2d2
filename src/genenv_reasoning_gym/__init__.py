"""`vf-eval genenv-reasoning-gym`: genenv's reasoning_gym domain as a verifiers taskset (docs/verifiers.md)."""

from genenv.integrations.verifiers import DomainEnv, domain_taskset

ReasoningGymTaskset = domain_taskset("reasoning_gym", __name__, "ReasoningGym")

__all__ = ["ReasoningGymTaskset", "DomainEnv"]

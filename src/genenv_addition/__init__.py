"""`vf-eval genenv-addition`: genenv's addition domain as a verifiers taskset (docs/verifiers.md)."""

from genenv.integrations.verifiers import DomainEnv, domain_taskset

AdditionTaskset = domain_taskset("addition", __name__, "Addition")

__all__ = ["AdditionTaskset", "DomainEnv"]

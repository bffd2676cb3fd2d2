"""`vf-eval genenv-multihop`: genenv's multihop domain as a verifiers taskset (docs/verifiers.md)."""

from genenv.integrations.verifiers import DomainEnv, domain_taskset

MultihopTaskset = domain_taskset("multihop", __name__, "Multihop")

__all__ = ["MultihopTaskset", "DomainEnv"]

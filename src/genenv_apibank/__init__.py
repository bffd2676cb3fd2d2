"""`vf-eval genenv-apibank`: genenv's apibank domain as a verifiers taskset (docs/verifiers.md)."""

from genenv.integrations.verifiers import DomainEnv, domain_taskset

ApibankTaskset = domain_taskset("apibank", __name__, "Apibank")

__all__ = ["ApibankTaskset", "DomainEnv"]

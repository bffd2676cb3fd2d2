"""`vf-eval genenv-toolcall`: genenv's toolcall domain as a verifiers taskset (docs/verifiers.md)."""

from genenv.integrations.verifiers import DomainEnv, domain_taskset

ToolcallTaskset = domain_taskset("toolcall", __name__, "Toolcall")

__all__ = ["ToolcallTaskset", "DomainEnv"]

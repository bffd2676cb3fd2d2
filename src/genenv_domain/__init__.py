"""`vf-eval genenv-domain --env.taskset.domain NAME`: any registered genenv domain, a plugin's included, as a
verifiers taskset (docs/verifiers.md)."""

from genenv.integrations.verifiers import DomainEnv, DomainTaskset

__all__ = ["DomainTaskset", "DomainEnv"]

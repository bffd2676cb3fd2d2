"""`vf-eval genenv-bamboogle`: Bamboogle's questions, closed-book, as a verifiers taskset (docs/verifiers.md)."""

from genenv.integrations.verifiers_bamboogle import BamboogleEnv, BamboogleTaskset

__all__ = ["BamboogleTaskset", "BamboogleEnv"]

"""reasoning-gym's procedural task families as one co-evolution domain (``domain``)."""

from genenv.domains.reasoning_gym.domain import ReasoningGymDomain

BENCHMARKS: dict[str, str] = {}   # evaluated on its own held-out split (genenv eval --benchmark heldout)

__all__ = ["BENCHMARKS", "ReasoningGymDomain"]

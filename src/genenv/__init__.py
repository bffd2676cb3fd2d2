"""genenv: difficulty-aligned co-evolution of an LLM agent and an environment simulator (GenEnv)."""

__version__ = "0.1.0"

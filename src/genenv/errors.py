"""The error every bad config value or key raises, below every module that reads a config."""


class ConfigError(ValueError):
    """A bad config value or key; the message names the field."""


class SamplerNotAvailable(RuntimeError):
    """A decoder a player or an evaluation asked for (``sampler=llama.cpp`` or ``vllm``) is not installed here."""

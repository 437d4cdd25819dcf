"""Post-mortem of a failed LLM load test, from the logs everyone already has."""

__version__ = "0.1.0"

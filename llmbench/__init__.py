"""llmbench: load-test LLM chat servers and say why they stopped keeping up."""

from llmbench.version import __version__

__all__ = ["__version__"]

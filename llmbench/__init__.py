"""llmbench: load-test LLM chat servers and say why they stopped keeping up."""

__version__ = "0.1.0"

"""Wire formats: build a request body, frame a byte stream into events, classify one event.

Pure functions, no I/O. One module per format (openai, ollama, ...), each building a
``WireFormat`` (format.py); registry.py lists them, ``get(api)`` by name (``get("anthropic")``).
"""

from __future__ import annotations

from llmbench.wire.format import WireFormat
from llmbench.wire.registry import detect, get, names

__all__ = ["WireFormat", "get", "names", "detect"]

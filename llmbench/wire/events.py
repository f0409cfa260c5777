"""What one streamed event means to the client."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

OTHER = 0    # carries no output: the role-only chunk, a finish chunk, a usage chunk
TOKEN = 1    # carries output (METRICS.md "token event")
END = 2      # the stream's clean end: [DONE], or Ollama's done:true line
ERROR = 3    # an error object inside the stream
MALFORMED = 4


@dataclass(slots=True)
class Event:
    kind: int
    text: str = ""
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    server_timing: dict[str, Any] | None = None
    error: str | None = None

"""Where requests go: base URL, API flavour, model, key and headers."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from urllib.parse import urlsplit

API_FLAVOURS = ("openai-chat", "openai", "ollama")

# The path each flavour posts to, relative to the base URL it was detected from.
_ENDPOINTS = {
    "openai-chat": "/chat/completions",
    "openai": "/completions",
    "ollama": "/api/chat",
}


class TargetError(ValueError):
    """A target that cannot be used; the message is one line for the user."""


@dataclass(frozen=True)
class Target:
    base_url: str                 # without the endpoint path, e.g. http://127.0.0.1:11434/v1
    api: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def endpoint(self) -> str:
        return self.base_url + _ENDPOINTS[self.api]

    @property
    def server_root(self) -> str:
        """scheme://host:port, where /metrics, /health and /api/* live."""
        parts = urlsplit(self.base_url)
        return f"{parts.scheme}://{parts.netloc}"

    def request_headers(self) -> dict[str, str]:
        h = {"content-type": "application/json"}
        if self.api_key:
            h["authorization"] = f"Bearer {self.api_key}"
        h.update(dict(self.headers))
        return h

    def describe(self) -> dict[str, object]:
        """What may be saved in results: never the key, never header values (they may hold secrets)."""
        return {
            "url": self.base_url,
            "api": self.api,
            "endpoint": self.endpoint,
            "model": self.model,
            "api_key": "set" if self.api_key else None,
            "headers": sorted(k for k, _ in self.headers),
        }


def detect_api(url: str) -> tuple[str, str]:
    """Return (flavour, base URL) for a user-given URL.

    ``.../v1`` is OpenAI chat; a full endpoint path names its flavour; a bare host (Ollama's
    base URL, e.g. http://localhost:11434) is Ollama's native API.
    """
    url = url.rstrip("/")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise TargetError(f"--url {url!r} is not an http(s) URL; use e.g. http://localhost:11434/v1")
    path = parts.path
    for suffix, api in (("/chat/completions", "openai-chat"), ("/completions", "openai"),
                        ("/api/chat", "ollama"), ("/api/generate", "ollama")):
        if path.endswith(suffix):
            return api, url[: len(url) - len(suffix)]
    if path.endswith("/v1") or "/v1/" in path + "/" or path.endswith("/openai"):
        return "openai-chat", url
    if path in ("", "/", "/api"):
        return "ollama", url[: len(url) - len("/api")] if path == "/api" else url
    return "openai-chat", url


def parse_headers(items: list[str] | None) -> tuple[tuple[str, str], ...]:
    out = []
    for item in items or []:
        if "=" not in item and ":" not in item:
            raise TargetError(f"--header {item!r}: expected KEY=VALUE")
        sep = "=" if "=" in item else ":"
        k, v = item.split(sep, 1)
        if not k.strip():
            raise TargetError(f"--header {item!r}: the header name is empty")
        out.append((k.strip().lower(), v.strip()))
    return tuple(out)


def make_target(url: str, model: str, api: str | None = None, api_key: str | None = None,
                headers: list[str] | None = None) -> Target:
    detected, base = detect_api(url)
    if api is not None and api not in API_FLAVOURS:
        raise TargetError(f"--api {api!r}: choose one of {', '.join(API_FLAVOURS)}")
    flavour = api or detected
    if api == "ollama" and detected != "ollama" and base.endswith("/v1"):
        base = base[: -len("/v1")]
    if api in ("openai", "openai-chat") and detected == "ollama":
        base = base + "/v1"
    key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY") or None
    if not model:
        raise TargetError("--model is empty; name the model the server serves (see GET /v1/models or /api/tags)")
    return Target(base_url=base, api=flavour, model=model, api_key=key, headers=parse_headers(headers))

"""The wire formats llmbench speaks. Adding one = a module that builds a ``WireFormat`` plus
one line in _MODULES. URL detection, --api, its help and the client all read this table."""

from __future__ import annotations

from importlib import import_module

from llmbench.wire.format import WireFormat

# One line per format module; each module's FORMATS lists what it speaks, in detection order.
_MODULES = (
    "openai",       # OpenAI chat completions (.../v1) and completions
    "ollama",       # Ollama's native /api/chat (a bare host URL)
    "tgi",          # Hugging Face TGI's native /generate_stream
    "responses",    # OpenAI's Responses API (/v1/responses)
    "embeddings",   # OpenAI's embeddings API (/v1/embeddings), never streamed
    "anthropic",    # Anthropic's Messages API (/v1/messages)
)
FORMATS: tuple[WireFormat, ...] = tuple(
    f for m in _MODULES for f in import_module(f".{m}", __package__).FORMATS)
# What a URL that no format claims is taken for.
DEFAULT = "openai-chat"

_BY_NAME = {f.name: f for f in FORMATS}
# Suffixes longest first, so /chat/completions wins over /completions and /api/generate over
# any shorter suffix it ends with.
_SUFFIXES = sorted(((s, f) for f in FORMATS for s in f.url_suffixes),
                   key=lambda sf: len(sf[0]), reverse=True)


def names() -> tuple[str, ...]:
    return tuple(_BY_NAME)


def get(name: str) -> WireFormat:
    """The format named ``name``; KeyError for an unknown one."""
    return _BY_NAME[name]


def detect(url: str, path: str) -> tuple[WireFormat, str]:
    """(format, base URL) for a clean URL whose path is ``path``."""
    for suffix, fmt in _SUFFIXES:
        if path.endswith(suffix):
            return fmt, url[: len(url) - len(suffix)]
    for fmt in FORMATS:
        if fmt.claims_base is not None:
            cut = fmt.claims_base(path)
            if cut is not None:
                return fmt, url[: len(url) - cut] if cut else url
    return _BY_NAME[DEFAULT], url

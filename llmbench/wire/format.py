"""The wire-format protocol: what the client and the URL detection know of one API, as one value."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from llmbench.wire.events import Event
from llmbench.wire.framing import NdjsonFramer, SseFramer

# (model, messages, max_tokens, stream, params) -> request body
BodyBuilder = Callable[[str, list[dict[str, str]], "int | None", bool, dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class WireFormat:
    """One API's wire format: its paths, body and how its stream is read."""
    name: str                       # the --api value
    summary: str                    # one phrase for help and errors
    endpoint: str                   # path posted to, appended to the base URL
    body: BodyBuilder
    classify: Callable[[bytes], Event]          # one framed payload -> Event (pure, hot path)
    parse_full: Callable[[dict[str, Any]], Event]   # a whole (non-streamed) JSON body -> Event
    framing: str = "sse"            # "sse" or "ndjson"
    # The path of non-streamed requests when the server has a separate route for them (TGI).
    whole_endpoint: str | None = None
    # The part of a base URL that belongs to this API ("/v1"): dropped or added when --api
    # names another format than the URL suggested (a /v1 URL with --api ollama).
    root_path: str = ""
    # Endpoint paths that, ending a URL, name this format (the base URL: what comes before).
    url_suffixes: tuple[str, ...] = ()
    # A base-URL path this format claims when no suffix matched: returns how many characters to
    # cut from the URL's end to get the base URL, or None when the path is not this format's.
    claims_base: Callable[[str], "int | None"] | None = None
    # Where the server lists its models, relative to the base URL (servers/discover.py reads it).
    models_path: str = "/models"
    # What ends a stream cleanly, for the "stream cut" message.
    end_marker: str = "[DONE]"
    # Takes images with a user turn (--images, datasets with image parts); prompt-text APIs do not
    images: bool = False
    # Streams its replies (every chat API); False: one whole JSON body, sent unstreamed (embeddings)
    streams: bool = True
    # What the reply holds: "tokens", or "embeddings" (no TTFT, no ITL: latency and throughput)
    output: str = "tokens"
    # How many outputs that are not tokens (vectors) the reply to a body must hold; a reply
    # with another count fails its request (bad_vectors). None: not counted
    items_expected: Callable[[dict[str, Any]], int] | None = None
    # How the key goes: None, "Authorization: Bearer KEY"; else the header that carries the
    # bare key (the Messages API's x-api-key). key_env: where --api-key defaults from.
    key_header: str | None = None
    key_env: str = "OPENAI_API_KEY"
    # Headers every request of this API carries (the Messages API's anthropic-version); a
    # --header of the same name replaces one
    headers: tuple[tuple[str, str], ...] = ()
    # An HTTP error body (its first characters) -> the API's own message ("type: message"), or
    # None to keep the body as it is
    error_text: Callable[[str], "str | None"] | None = None
    # Takes --tools (in its own shape, wire/agents.py) and --response-format
    tools: bool = False
    structured: bool = False

    def make_framer(self) -> SseFramer | NdjsonFramer:
        return SseFramer() if self.framing == "sse" else NdjsonFramer()

    def path(self, stream: bool) -> str:
        return self.endpoint if stream or self.whole_endpoint is None else self.whole_endpoint

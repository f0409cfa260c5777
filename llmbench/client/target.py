"""Where requests go: base URL (its query kept apart), API flavour, endpoint, model, key,
headers, and the way there (netconfig.Net: proxy and TLS, resolved once per target).

Secrets (``Target.secrets``) are every value that must never be stored or printed: the key,
header values, the URL's password, the proxy's credentials, query values that look like
secrets (``?key=``, ``?sig=``... netconfig.SECRET_QUERY_WORDS) and whatever ``--redact``
names. Everything written or printed about a target goes through ``redact`` or ``describe``."""

from __future__ import annotations

import base64
import os
import re
from dataclasses import dataclass, field, replace
from urllib.parse import unquote, urlsplit, urlunsplit

from llmbench.client import netconfig
from llmbench import wire
from llmbench.client.netconfig import Net, NetOptions, host_problem

API_FLAVOURS = wire.names()


def api_help() -> str:
    """The --api help text, built from the registry."""
    return " | ".join(wire.names()) + " (default: from the URL)."


class TargetError(ValueError):
    """A target that cannot be used; the message is one line for the user."""


@dataclass(frozen=True)
class Target:
    """One server to load: its URL, API, model and credentials (never saved)."""
    base_url: str                 # without the endpoint path, e.g. http://127.0.0.1:11434/v1
    api: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # user:password from the URL, sent as Basic auth; never part of base_url, never saved
    userinfo: str | None = field(default=None, repr=False)
    # the URL's query (without '?'), kept on every request URL and on the models list (Azure's
    # api-version, a gateway's routing key); not on the server-root probes (/metrics,
    # /tokenize, /health), which are the engine's own, outside the API the query was given for
    query: str = field(default="", repr=False)
    # --endpoint: the path requests go to, from the server root (vLLM's --endpoint), for a
    # deployment whose path does not end in the format's own (/chat/completions)
    endpoint_path: str | None = None
    net: Net = field(default=Net())
    # --redact: query parameter names whose values are secrets, or texts to hide anywhere
    redact_items: tuple[str, ...] = field(default=(), repr=False)

    def for_api(self, api: str) -> "Target":
        """This target in another API of the same server: its base URL moved from this API's
        root ("/v1") to the other's, its own endpoint (an --endpoint path is this API's)."""
        if api == self.api:
            return self
        return replace(self, api=api, base_url=move_root(self.base_url, self.api, api),
                       endpoint_path=None)

    @property
    def wire_format(self) -> wire.WireFormat:
        return wire.get(self.api)

    @property
    def endpoint(self) -> str:
        """Where streamed requests go."""
        return self.endpoint_for(True)

    def endpoint_for(self, stream: bool) -> str:
        """Where requests go; a format may answer whole (non-streamed) replies on another path."""
        if self.endpoint_path is not None:
            return self.server_root + self.endpoint_path + self.query_suffix
        return self.base_url + wire.get(self.api).path(stream) + self.query_suffix

    @property
    def query_suffix(self) -> str:
        return "?" + self.query if self.query else ""

    def shown(self, text: str) -> str:
        """``text`` (a URL, a message) as it may be printed or saved."""
        return redact(redact_query(strip_userinfo(text), self.redact_items),
                      self.secrets()) or ""

    @property
    def server_root(self) -> str:
        """scheme://host:port, where /metrics, /health and /api/* live."""
        parts = urlsplit(self.base_url)
        return f"{parts.scheme}://{parts.netloc}"

    def request_headers(self) -> dict[str, str]:
        fmt = wire.get(self.api)
        h = {"content-type": "application/json", **dict(fmt.headers)}
        if self.userinfo:
            h["authorization"] = "Basic " + base64.b64encode(self.userinfo.encode()).decode()
        if self.api_key:
            if fmt.key_header:
                h[fmt.key_header] = self.api_key        # the Messages API's x-api-key
            else:
                h["authorization"] = f"Bearer {self.api_key}"
        h.update(dict(self.headers))
        return h

    def secrets(self) -> tuple[str, ...]:
        """The module docstring's secrets, and the Authorization values built from them; longest
        first, so a redaction never leaves the tail of a longer secret behind."""
        out: set[str] = set()
        if self.api_key:
            out.add(self.api_key)
        for _, v in self.headers:
            out.add(v)
            # "Basic dXNl...": the credential part alone, as a server might echo it
            out.update(part for part in v.split() if len(part) >= 6)
        if self.userinfo:
            out.add(self.userinfo)
            _, _, password = self.userinfo.partition(":")
            if password:
                out.add(password)
        auth = self.request_headers().get("authorization")
        if auth:
            out.add(auth)
            out.add(auth.split(" ", 1)[-1])
        out.update(self._query_secrets())
        out.update(self.net.secrets())
        return tuple(sorted((s for s in out if len(s) >= 4), key=len, reverse=True))

    def _query_secrets(self) -> set[str]:
        """The values of secret-looking query parameters (raw and decoded), and --redact texts
        that name no query parameter."""
        names = tuple(n.lower().replace("-", "_") for n in self.redact_items)
        out: set[str] = set()
        seen: set[str] = set()
        for item in self.query.split("&") if self.query else ():
            name, _, raw = item.partition("=")
            seen.add(unquote(name).lower().replace("-", "_"))
            if raw and netconfig.secret_query_name(unquote(name), names):
                out.update((raw, unquote(raw.replace("+", " "))))
        out.update(n for n, low in zip(self.redact_items, names) if low not in seen)
        return out

    def redact(self, text: str | None) -> str | None:
        """A server's text with our own secrets taken out (servers echo headers in error bodies)."""
        return redact(text, self.secrets())

    def describe(self) -> dict[str, object]:
        """What may be saved: never the key, never header values (they may hold secrets)."""
        return {
            "url": self.shown(self.base_url + self.query_suffix),
            "api": self.api,
            "endpoint": self.shown(self.endpoint),
            "model": self.model,
            "api_key": "set" if self.api_key else None,
            "headers": sorted(k for k, _ in self.headers),
            **self.net.describe(self.base_url.startswith("https:")),
        }


def redact(text: str | None, secrets: tuple[str, ...]) -> str | None:
    if not text or not secrets:
        return text
    for secret in secrets:
        if secret in text:
            text = text.replace(secret, "***")
    return text


def split_userinfo(url: str) -> tuple[str, str | None]:
    """(URL without user:password@, 'user:password' or None)."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    userinfo, _, hostport = parts.netloc.rpartition("@")
    clean = urlunsplit((parts.scheme, hostport, parts.path, parts.query, parts.fragment))
    return clean, unquote(userinfo)


def strip_userinfo(text: str) -> str:
    """Any http(s) URL in ``text`` without its user:password@ part."""
    return re.sub(r"(https?://)[^/@\s]*@", r"\1", text)


_QUERY_ITEM = re.compile(r"([?&])([^=&#\s?]+)=([^&#\s]*)")


def redact_query(text: str, names: tuple[str, ...] = ()) -> str:
    """Any URL query in ``text`` with the values of secret-looking parameters (key, token,
    sig... and ``names``, given with --redact) replaced by ***."""
    extra = tuple(n.lower().replace("-", "_") for n in names)

    def one(m: re.Match[str]) -> str:
        if m.group(3) and netconfig.secret_query_name(unquote(m.group(2)), extra):
            return f"{m.group(1)}{m.group(2)}=***"
        return m.group(0)
    return _QUERY_ITEM.sub(one, text) if "=" in text else text


def move_root(base: str, have_api: str, want_api: str) -> str:
    """A base URL of ``have_api`` as ``want_api``'s: from the one format's root (".../v1")
    to the other's (a /v1 URL with --api ollama, a bare host with --api openai-chat)."""
    have, want = wire.get(have_api).root_path, wire.get(want_api).root_path
    if have != want:
        if have and base.endswith(have):
            base = base[: -len(have)]
        if want and not base.endswith(want):
            base = base + want
    return base


def detect_api(url: str) -> tuple[str, str]:
    """(flavour, base URL) for a user-given URL: ``.../v1`` is OpenAI chat; a full endpoint
    path names its flavour; a bare host (Ollama's base URL, e.g. http://localhost:11434) is
    Ollama's native API. The rules live with each format (wire/registry.py)."""
    url = url.strip().rstrip("/")
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise TargetError(f"--url {strip_userinfo(url)!r} is not a valid URL ({exc}); use e.g. "
                          "http://localhost:11434/v1")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise TargetError(f"--url {strip_userinfo(url)!r} is not an http(s) URL; use e.g. "
                          "http://localhost:11434/v1")
    try:
        if parts.port == 0:
            raise ValueError("port 0")
    except ValueError:
        raise TargetError(f"--url {strip_userinfo(url)!r}: the port is not a number from 1 to "
                          "65535; use e.g. http://localhost:11434/v1")
    if not parts.hostname:
        raise TargetError(f"--url {strip_userinfo(url)!r}: no host name; use e.g. "
                          "http://localhost:11434/v1")
    if any(c in url for c in "\r\n\t "):
        raise TargetError(f"--url {strip_userinfo(url)!r}: contains spaces or line breaks")
    problem = host_problem(parts.hostname)
    if problem:
        raise TargetError(f"--url {strip_userinfo(url)!r}: the host name {problem}; use e.g. "
                          "http://gpu-box.local:8000/v1")
    fmt, base = wire.detect(url, parts.path)
    return fmt.name, base


# RFC 9110 token characters: a header name holds neither ':' nor '=', so the first of the two
# separates name and value ('Authorization: Basic dXNl...OA==' has '=' only inside the value)
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


def split_header(item: str) -> tuple[str, str] | None:
    """'K=V' or 'K: V' -> (K, V) split at the first separator; None when there is none."""
    cut = min((i for i in (item.find("="), item.find(":")) if i >= 0), default=-1)
    if cut < 0:
        return None
    return item[:cut], item[cut + 1:]


# Headers that say how a message is framed or how its connection is kept: a request has them
# from its transport only. (Host may be given: both transports then send it instead of theirs.)
FRAMING_SHOWN = ("Content-Length", "Transfer-Encoding", "Connection", "Keep-Alive", "TE",
                 "Trailer", "Upgrade", "Expect", "Proxy-Connection", "Content-Encoding")
FRAMING_HEADERS = frozenset(h.lower() for h in FRAMING_SHOWN)


def parse_headers(items: list[str] | None) -> tuple[tuple[str, str], ...]:
    out = []
    for item in items or []:
        kv = split_header(item)
        if kv is None:
            raise TargetError(f"--header {item.split()[0] if item.split() else item!r}...: expected "
                              "KEY=VALUE or 'KEY: VALUE'")
        k, v = kv[0].strip(), kv[1].strip()
        if not k:
            raise TargetError("--header: the header name is empty; expected KEY=VALUE or 'KEY: VALUE'")
        if not _TOKEN.match(k):
            raise TargetError(f"--header {k[:40]!r}: not a valid header name (letters, digits, '-')")
        if any(c in v for c in "\r\n\0"):
            raise TargetError(f"--header {k}: the value contains a line break; give it on one line")
        if k.lower() in FRAMING_HEADERS:
            # sent beside llmbench's own Content-Length, 'Transfer-Encoding: chunked' made a
            # request no server can frame; these are the transport's, not the user's
            raise TargetError(f"--header {k}: llmbench frames and keeps its connections itself "
                              f"(Content-Length, keep-alive); {', '.join(FRAMING_SHOWN)} cannot "
                              "be set")
        out.append((k.lower(), v))
    return tuple(out)


def split_query(url: str) -> tuple[str, str]:
    """(URL without its query and fragment, the query without '?')."""
    parts = urlsplit(url.strip())
    return urlunsplit((parts.scheme, parts.netloc, parts.path, "", "")), parts.query


def check_endpoint(path: str | None) -> str | None:
    if path is None:
        return None
    p = path.strip()
    if not p.startswith("/") or any(c in p for c in " \r\n\t?#") or "://" in p:
        raise TargetError(f"--endpoint {path!r}: expected a path from the server root, e.g. "
                          "/v1/chat/completions (a query goes in --url)")
    return p


def make_target(url: str, model: str, api: str | None = None, api_key: str | None = None,
                headers: list[str] | None = None, *, endpoint: str | None = None,
                net: NetOptions | None = None, redact: list[str] | None = None) -> Target:
    """The target for the user's flags (``net`` None: the command line's, netconfig.current());
    NetError and TargetError are one line for the user."""
    try:
        url, query = split_query(url)
    except ValueError as exc:
        raise TargetError(f"--url {strip_userinfo(url)!r} is not a valid URL ({exc}); use e.g. "
                          "http://localhost:11434/v1")
    detected, base = detect_api(url)
    endpoint = check_endpoint(endpoint)
    if endpoint is not None and api is None:
        # the endpoint names its format when it ends in one's path (/v1/completions)
        fmt, _ = wire.detect(endpoint, endpoint)
        if fmt.name != detected and endpoint.endswith(tuple(fmt.url_suffixes)):
            detected = fmt.name
    base, userinfo = split_userinfo(base)
    if api is not None and api not in API_FLAVOURS:
        raise TargetError(f"--api {api!r}: choose one of {', '.join(API_FLAVOURS)}")
    flavour = api or detected
    base = move_root(base, detected, flavour)
    # the API's own variable: $OPENAI_API_KEY, or $ANTHROPIC_API_KEY for the Messages API
    key = api_key if api_key is not None else os.environ.get(wire.get(flavour).key_env) or None
    if not model:
        raise TargetError("--model is empty; name the model the server serves (see GET /v1/models or /api/tags)")
    names = {unquote(i.partition("=")[0]).lower().replace("-", "_") for i in query.split("&")}
    for item in redact or []:
        if item.strip().lower().replace("-", "_") not in names and len(item.strip()) < 4:
            raise TargetError(f"--redact {item!r}: names no query parameter of --url, and a "
                              "text to hide must have at least 4 characters")
    way = netconfig.resolve(base, net if net is not None else netconfig.current())
    return Target(base_url=base, api=flavour, model=model, api_key=key,
                  headers=parse_headers(headers), userinfo=userinfo, query=query,
                  endpoint_path=endpoint, net=way,
                  redact_items=tuple(i.strip() for i in redact or []))

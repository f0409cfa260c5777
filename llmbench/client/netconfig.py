"""How llmbench reaches a server: the forward proxy and TLS.

Decided once per target (``resolve``, called by target.make_target) and used by everything that
talks to the server (both client transports, the server probes, model discovery, the server
tokenizer), so a probe goes the way the requests go.

The README's "Through proxies, TLS and gateways" has the rules. Their reasons: a loopback
target never takes an environment proxy (as Go's clients do: a proxy elsewhere cannot reach
this machine's 127.0.0.1, and the built-in mock must work in a shell that exports a company
proxy); REQUESTS_CA_BUNDLE and CURL_CA_BUNDLE are added to the trust store, not instead of it
(images often set SSL_CERT_FILE to the system bundle). Credentials in the proxy URL are
secrets (``Net.secrets``): never printed or saved.

Only the standard library here: the CLI imports it for its checks.
"""

from __future__ import annotations

import base64
import ipaddress
import os
import re
import ssl
from dataclasses import dataclass, field
from typing import Any, Mapping
from urllib.parse import quote, unquote, urlsplit


class NetError(ValueError):
    """A proxy or TLS setting that cannot be used; the message is one line for the user."""


class ProxyError(ConnectionError):
    """The proxy refused or could not open the way to the server (CONNECT answered non-2xx)."""


# Query parameter names whose values are secrets (lower case; '-' read as '_'): a name that
# is one of these words or contains one (api_key, x-api-key, access_token, sig, signature...)
SECRET_QUERY_WORDS = ("key", "token", "secret", "sig", "pass", "auth", "credential", "session")

ENV_CA_BUNDLES = ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE")


def secret_query_name(name: str, extra: tuple[str, ...] = ()) -> bool:
    low = name.lower().replace("-", "_")
    return low in extra or any(w in low for w in SECRET_QUERY_WORDS)


@dataclass(frozen=True)
class NetOptions:
    """What the command line asked for (the Network options): ``proxy`` None means the
    environment's, "none" no proxy at all."""

    proxy: str | None = field(default=None, repr=False)
    ca_cert: str | None = None
    insecure: bool = False
    cert: str | None = None
    key: str | None = None

    def validate(self, tls: bool = True) -> "NetOptions":
        """Every file readable and usable, the proxy URL one llmbench can speak to; NetError.
        ``tls`` False: nothing will speak TLS (every URL is http://), so the environment's
        CA bundles are not loaded to be checked (~0.02 s of CPU each); files given are."""
        if self.proxy is not None and self.proxy.strip().lower() != "none":
            parse_proxy(self.proxy, "--proxy")
        if self.key and not self.cert:
            raise NetError(f"--key {self.key}: goes with --cert FILE (the client certificate)")
        if self.insecure and self.ca_cert:
            raise NetError("--insecure checks no certificate: drop --ca-cert, or --insecure")
        for flag, path in (("--ca-cert", self.ca_cert), ("--cert", self.cert),
                           ("--key", self.key)):
            if path is not None and not os.path.isfile(path):
                raise NetError(f"{flag} {path}: no such file; give a PEM file")
        if self.ca_cert or self.cert or tls and any(os.environ.get(v) for v in
                                                    (*ENV_CA_BUNDLES, "SSL_CERT_FILE")):
            # a file to check now (one line, not a failure per request); the default
            # context cannot fail, and loading the system's CAs costs ~0.05 s of CPU
            make_ssl_context(self.ca_cert, self.insecure, self.cert, self.key)
        return self


@dataclass(frozen=True)
class Net:
    """The way to one target, resolved: which proxy (if any, and where that came from) and the
    TLS settings. Frozen and picklable (worker processes get it with the target)."""

    proxy: str | None = field(default=None, repr=False)    # http://user:pw@host:port
    proxy_from: str | None = None          # "--proxy" or the variable's name
    bypassed: str | None = None            # why the environment's proxy was not used
    ca_cert: str | None = None
    insecure: bool = False
    cert: str | None = None
    key: str | None = None

    @property
    def proxy_host(self) -> str:
        return (urlsplit(self.proxy).hostname or "") if self.proxy else ""

    @property
    def proxy_port(self) -> int:
        return (urlsplit(self.proxy).port or 80) if self.proxy else 0

    @property
    def proxy_shown(self) -> str | None:
        """The proxy's URL without its credentials: what may be printed and saved."""
        if not self.proxy:
            return None
        p = urlsplit(self.proxy)
        return f"{p.scheme}://{p.netloc.rpartition('@')[2]}"

    def proxy_credentials(self) -> tuple[str, str] | None:
        if not self.proxy:
            return None
        p = urlsplit(self.proxy)
        if p.username is None:
            return None
        return unquote(p.username), unquote(p.password or "")

    @property
    def proxy_authorization(self) -> str | None:
        """The Proxy-Authorization value (Basic) from the proxy URL's credentials, or None."""
        cred = self.proxy_credentials()
        if cred is None:
            return None
        return "Basic " + base64.b64encode(f"{cred[0]}:{cred[1]}".encode()).decode()

    def secrets(self) -> set[str]:
        out: set[str] = set()
        cred = self.proxy_credentials()
        if cred is not None:
            if cred[1]:
                out.add(cred[1])
                out.add(quote(cred[1], safe=""))
            auth = self.proxy_authorization or ""
            out.update((auth, auth.split(" ", 1)[1]))
            out.add(urlsplit(self.proxy).netloc.rpartition("@")[0])
        return out

    def ssl_context(self) -> ssl.SSLContext:
        return make_ssl_context(self.ca_cert, self.insecure, self.cert, self.key)

    def route(self) -> str:
        """How requests went, for a message: 'through the proxy http://h:3128 (from
        HTTPS_PROXY)', 'not through the proxy in HTTPS_PROXY (NO_PROXY matches it)' or ''."""
        if self.proxy:
            return f"through the proxy {self.proxy_shown} (from {self.proxy_from})"
        if self.bypassed:
            return f"not through the proxy in {self.bypassed}"
        return ""

    def describe(self, https: bool) -> dict[str, Any]:
        """For run.json: no credentials, no key material (paths only)."""
        out: dict[str, Any] = {"proxy": self.proxy_shown, "proxy_from": self.proxy_from}
        if self.bypassed:
            out["proxy_bypassed"] = self.bypassed
        if https:
            out["tls_verify"] = not self.insecure
            out["ca_cert"] = self.ca_cert
            if not self.ca_cert:
                out["ca_env"] = {v: os.environ[v] for v in ("SSL_CERT_FILE", *ENV_CA_BUNDLES)
                                 if os.environ.get(v)}
            out["client_cert"] = self.cert
        return out

    def aiohttp_proxy(self, https: bool) -> tuple[dict[str, Any], dict[str, str]]:
        """(keyword arguments, request headers) of an aiohttp call that goes this way: the
        credentials go on the CONNECT for https://, on the request itself for http:// (aiohttp
        adds proxy_headers to CONNECT requests only)."""
        if not self.proxy:
            return {}, {}
        auth = self.proxy_authorization
        if not auth:
            return {"proxy": self.proxy_shown}, {}
        if https:
            return {"proxy": self.proxy_shown,
                    "proxy_headers": {"Proxy-Authorization": auth}}, {}
        return {"proxy": self.proxy_shown}, {"Proxy-Authorization": auth}

    def aiohttp_connector(self, **kw: Any) -> Any:
        """An aiohttp connector with this TLS setting (the context is made once)."""
        import aiohttp
        return aiohttp.TCPConnector(ssl=self.ssl_context(), **kw)

    def urllib_opener(self) -> Any:
        """A urllib opener that goes this way (ProxyHandler tunnels https:// with CONNECT and
        sends the proxy URL's credentials as Proxy-Authorization) and never follows a
        redirect silently to another origin (urllib's default handler is kept: GET only)."""
        import urllib.request
        proxies = {"http": self.proxy, "https": self.proxy} if self.proxy else {}
        return urllib.request.build_opener(
            urllib.request.ProxyHandler(proxies),
            urllib.request.HTTPSHandler(context=self.ssl_context()))


_CONTEXTS: dict[tuple, ssl.SSLContext] = {}


def make_ssl_context(ca_cert: str | None = None, insecure: bool = False,
                     cert: str | None = None, key: str | None = None) -> ssl.SSLContext:
    """One context per setting (and CA environment) per process; NetError for a bad file."""
    env_ca = () if ca_cert else tuple((v, os.environ[v]) for v in ENV_CA_BUNDLES
                                      if os.environ.get(v))
    k = (ca_cert, insecure, cert, key, env_ca, os.environ.get("SSL_CERT_FILE"),
         os.environ.get("SSL_CERT_DIR"))
    ctx = _CONTEXTS.get(k)
    if ctx is not None:
        return ctx
    flag, cafile = "--ca-cert", ca_cert
    try:
        ctx = ssl.create_default_context(cafile=ca_cert) if ca_cert else \
            ssl.create_default_context()
        for flag, cafile in env_ca:
            ctx.load_verify_locations(cafile=cafile)
    except (ssl.SSLError, OSError) as exc:
        raise NetError(f"{flag} {cafile}: not a PEM certificate bundle "
                       f"({_reason(exc)}); give the CA certificate(s) in PEM form")
    if insecure:
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
    if cert:
        try:
            ctx.load_cert_chain(cert, key)
        except (ssl.SSLError, OSError) as exc:
            what = f"--cert {cert}" + (f" --key {key}" if key else "")
            raise NetError(f"{what}: not a usable client certificate and key ({_reason(exc)}); "
                           "give PEM files, the key unencrypted (or in the --cert file)")
    _CONTEXTS[k] = ctx
    return ctx


def _reason(exc: BaseException) -> str:
    return str(getattr(exc, "reason", None) or getattr(exc, "strerror", None) or exc)[:120]


def host_problem(host: str) -> str | None:
    """What makes ``host`` a name no resolver takes, as a phrase, or None (IP addresses pass):
    a name like ``gpu-box..local`` made the IDNA codec raise deep inside getaddrinfo."""
    import ipaddress
    try:
        ipaddress.ip_address(host)
        return None
    except ValueError:
        pass
    name = host[:-1] if host.endswith(".") else host        # a fully qualified name's dot
    labels = name.split(".")
    if any(not label for label in labels):
        return f"{host[:80]!r} has an empty label (two dots in a row, or a leading dot)"
    if len(name) > 253:
        return f"is {len(name)} characters, over the 253 a host name can be"
    long = next((label for label in labels if len(label) > 63), None)
    if long is not None:
        return f"{host[:80]!r} has a label of {len(long)} characters, over the 63 one can be"
    try:
        name.encode("idna")
    except UnicodeError as exc:
        return f"{host[:80]!r} is not a valid host name ({exc})"
    return None


def parse_proxy(text: str, source: str) -> str:
    """A proxy URL llmbench can speak to, normalized to http://[user:pw@]host:port."""
    raw = text.strip()
    if "://" not in raw:
        raw = "http://" + raw            # curl's reading of "proxy.corp:3128"
    try:
        p = urlsplit(raw)
        port = p.port
    except ValueError as exc:
        raise NetError(f"{source} {hide_credentials(text)!r}: not a proxy URL ({exc}); use e.g. "
                       "http://proxy.example:3128")
    if p.scheme != "http":
        raise NetError(f"{source} {hide_credentials(text)!r}: llmbench speaks to proxies over plain "
                       f"http:// (https:// targets go through a CONNECT tunnel), not "
                       f"{p.scheme}://; give an http:// proxy, or --proxy none")
    if not p.hostname:
        raise NetError(f"{source} {hide_credentials(text)!r}: no host; use e.g. http://proxy.example:3128")
    problem = host_problem(p.hostname)
    if problem:
        raise NetError(f"{source} {hide_credentials(text)!r}: the host name {problem}; use e.g. "
                       "http://proxy.example:3128")
    host = f"[{p.hostname}]" if ":" in p.hostname else p.hostname
    userinfo = p.netloc.rpartition("@")[0]
    return f"http://{userinfo + '@' if userinfo else ''}{host}:{port or 80}"


def hide_credentials(text: str) -> str:
    """A proxy URL as it may be shown: without user:password@."""
    scheme, sep, rest = text.strip().partition("://")
    if not sep:
        scheme, rest = "", scheme
    hostpart = rest.split("/", 1)[0]
    if "@" in hostpart:
        rest = rest.replace(hostpart, hostpart.rpartition("@")[2], 1)
    return f"{scheme}{sep}{rest}"


def _getenv(env: Mapping[str, str], name: str) -> tuple[str, str] | None:
    """(variable, value) for a proxy variable, lower case first; HTTP_PROXY in upper case is
    ignored under CGI (REQUEST_METHOD set: the 'httpoxy' header), as urllib does."""
    for var in (name.lower(), name.upper()):
        if var == "HTTP_PROXY" and "REQUEST_METHOD" in env:
            continue
        value = env.get(var, "").strip()
        if value:
            return var, value
    return None


def is_loopback(host: str) -> bool:
    h = host.lower().strip("[]")
    if h == "localhost" or h.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def no_proxy_matches(host: str, port: int, no_proxy: str) -> bool:
    """curl's NO_PROXY: comma-separated hosts or domains (a leading '.' or '*.' allowed) that
    match the host and its subdomains, '*' for all, an optional :port, IP blocks in CIDR."""
    host = host.lower().strip("[]")
    for entry in no_proxy.split(","):
        e = entry.strip().lower()
        if not e:
            continue
        if e == "*":
            return True
        e_port = None
        if e.startswith("["):                       # [::1]:8080
            e_host, _, rest = e[1:].partition("]")
            e_port = rest[1:] if rest.startswith(":") else None
        elif e.count(":") == 1:
            e_host, e_port = e.split(":")
        else:
            e_host = e
        if e_port and e_port != str(port):
            continue
        e_host = e_host.lstrip("*").lstrip(".")
        if "/" in e_host:
            try:
                if ipaddress.ip_address(host) in ipaddress.ip_network(e_host, strict=False):
                    return True
            except ValueError:
                pass
            continue
        if host == e_host or host.endswith("." + e_host):
            return True
    return False


def resolve(url: str, opts: NetOptions | None = None,
            env: Mapping[str, str] | None = None) -> Net:
    """The way to ``url``: ``opts`` (the flags) over the environment; NetError (one line) for
    a proxy setting that cannot be used."""
    opts = opts or NetOptions()
    env = os.environ if env is None else env
    tls = dict(ca_cert=opts.ca_cert, insecure=opts.insecure, cert=opts.cert, key=opts.key)
    if opts.proxy is not None:
        if opts.proxy.strip().lower() == "none":
            return Net(**tls)
        return Net(proxy=parse_proxy(opts.proxy, "--proxy"), proxy_from="--proxy", **tls)
    parts = urlsplit(url)
    scheme, host = parts.scheme, parts.hostname or ""
    port = parts.port or (443 if scheme == "https" else 80)
    found = _getenv(env, f"{scheme}_proxy") or _getenv(env, "all_proxy")
    if found is None:
        return Net(**tls)
    var, value = found
    no_proxy = _getenv(env, "no_proxy")
    if no_proxy is not None and no_proxy_matches(host, port, no_proxy[1]):
        return Net(bypassed=f"{var} ({no_proxy[0]} matches {host})", **tls)
    if is_loopback(host):
        return Net(bypassed=f"{var} ({host} is this machine)", **tls)
    return Net(proxy=parse_proxy(value, var), proxy_from=var, **tls)


# The network options of this process's command line (the CLI sets them once): what a target
# built without explicit options gets, so code that builds targets from the same command line
# (sweep's readiness check) goes the same way as the run's requests.
_current: NetOptions | None = None


def configure(opts: NetOptions | None) -> None:
    global _current
    _current = opts


def configured() -> NetOptions | None:
    """The options the CLI set (checked), or None before it did."""
    return _current


def current() -> NetOptions:
    return _current or NetOptions()


def certificate_problem(text: str | None) -> str | None:
    """A hint when ``text`` (an error) says the server's certificate was not accepted."""
    low = (text or "").lower()
    if "certificate verify failed" in low or "certificateerror" in low or \
            "sslcertverificationerror" in low:
        return ("the server's TLS certificate was not accepted. If a private CA signed it, "
                "pass --ca-cert FILE (or set SSL_CERT_FILE or REQUESTS_CA_BUNDLE); "
                "--insecure skips the check")
    if "tlsv13 alert certificate required" in low or "alert certificate required" in low or \
            "no required ssl certificate" in low or "bad certificate" in low:
        return ("the server wants a client certificate (mutual TLS): pass --cert FILE "
                "--key FILE")
    return None


def unreachable_hint(net: Net, error: str | None, flag: str = "--url") -> str:
    """What to check when nothing answered: the certificate, the proxy, or the server."""
    cert = certificate_problem(error)
    if cert:
        return cert[0].upper() + cert[1:]
    low = (error or "").lower()
    # a 407 status, not the digits 407 inside a port or an address: "127.0.0.1:40783" is not
    # a proxy asking for credentials (a random port made this hint wrong now and then)
    status_407 = re.search(r"(?<![\d:.])407(?!\d)", low) is not None
    if status_407 or "proxy authentication" in low or (
            "proxy" in low and (re.search(r"(?<![\d:.])401(?!\d)", low) or "unauthorized" in low)):
        return (f"Check the proxy and its credentials ({net.proxy_from or '--proxy'}: "
                "http://USER:PASSWORD@host:port), or pass --proxy none to go direct")
    if net.proxy:
        return (f"Is the server running, is {flag} right, and can the proxy reach it "
                "(--proxy none goes direct)?")
    if net.bypassed:
        return (f"Is the server running, and is {flag} right? If it is reachable only through "
                "the proxy, take it out of NO_PROXY or pass --proxy URL")
    return f"Is the server running, and is {flag} right?"

"""Before a run: wait for a server that is starting (--wait-ready), and ask it which model it
serves when --model is not given. Plain urllib, imported when a page is asked (a run given
--model and no --wait-ready asks none: ~4 ms of start-up); the way there (proxy, TLS) is the
target's (netconfig.Net), as for its requests."""

from __future__ import annotations

import sys
import threading
import time
from typing import TYPE_CHECKING, Any, Callable

from llmbench.errors import EXIT_UNREACHABLE, EXIT_USAGE
from llmbench.client.netconfig import Net, unreachable_hint
from llmbench.client.target import Target
from llmbench.records import safejson

if TYPE_CHECKING:
    import urllib.request


class DiscoverError(Exception):
    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def models_url(target: Target) -> str:
    """Where the API lists its models (the wire format says: <base>/models for OpenAI-style
    servers, /api/tags for Ollama's native API)."""
    return target.base_url + target.wire_format.models_path + target.query_suffix


def _headers(target: Target) -> dict[str, str]:
    return {k: v for k, v in target.request_headers().items() if k != "content-type"}


_OPENERS: dict[Net, urllib.request.OpenerDirector] = {}


def _get(url: str, headers: dict[str, str], timeout_s: float,
         net: Net | None = None) -> tuple[int, bytes]:
    """(status, body); raises OSError (URLError) when nothing answers. ``net``: the target's
    way (servers/managed.py passes none: the default way)."""
    import urllib.error
    import urllib.request
    if net is None:
        from llmbench.client import netconfig
        net = netconfig.resolve(url, netconfig.current())
    opener = _OPENERS.get(net) or _OPENERS.setdefault(net, net.urllib_opener())
    req = urllib.request.Request(url, headers=headers, method="GET")

    def get() -> tuple[int, bytes]:
        try:
            with opener.open(req, timeout=timeout_s) as resp:   # noqa: S310 - user's URL
                return resp.status, resp.read(1 << 20)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read(4096) if exc.fp is not None else b""
    return _within(get, timeout_s + 1.0, url)


def _within(call: Callable[[], tuple[int, bytes]], deadline_s: float, url: str
            ) -> tuple[int, bytes]:
    """``call`` with a deadline for the whole of it. urllib's timeout bounds each socket read
    only, so a server that drips bytes (keep-alive comments, a slow head) held llmbench before
    its run forever, Ctrl-C included. The call runs in a daemon thread that is left behind
    when the deadline passes (it holds one socket; the process does not wait for it)."""
    box: list[Any] = []

    def run() -> None:
        try:
            box.append(("ok", call()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box.append(("err", exc))
    t = threading.Thread(target=run, daemon=True, name="llmbench-get")
    t.start()
    t.join(deadline_s)          # interruptible: Ctrl-C ends the wait at once
    if not box:
        raise TimeoutError(f"GET {url}: no whole answer within {deadline_s:g} s")
    kind, value = box[0]
    if kind == "err":
        raise value
    return value


def wait_ready(target: Target, wait_s: float, say: Callable[[str], None] | None = None,
               poll_s: float = 1.0, give_up: Callable[[], str | None] | None = None,
               flag: str = "--wait-ready") -> float:
    """Poll until the server answers HTTP with anything but a 5xx (a server still loading its
    model answers 503, or nothing at all), like vLLM's ready check; return the seconds waited.
    Raises DiscoverError (exit 3) when ``wait_s`` passes first, or at once when ``give_up``
    says why (``sweep``: the server process it started has exited)."""
    say = say or (lambda m: print(m, file=sys.stderr, flush=True))
    url = models_url(target)
    t0 = time.monotonic()
    said = False
    last = "no answer"
    while True:
        try:
            status, _ = _get(url, _headers(target), min(5.0, max(wait_s, 0.5)), target.net)
            if status < 500:
                return time.monotonic() - t0
            last = f"HTTP {status}"
        except (OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            last = f"{type(reason).__name__}: {reason}"[:120]
        waited = time.monotonic() - t0
        reason = give_up() if give_up is not None else None
        if reason:
            raise DiscoverError(reason, EXIT_UNREACHABLE)
        if waited >= wait_s:
            raise DiscoverError(f"{target.redact(target.server_root)} was not ready after "
                                f"{wait_s:g} s ({flag}; last: {target.redact(last)})",
                                EXIT_UNREACHABLE)
        if not said:
            say(f"waiting up to {wait_s:g} s for {target.shown(target.server_root)} to answer "
                f"({flag}; now: {target.redact(last)})")
            said = True
        time.sleep(min(poll_s, max(wait_s - waited, 0.05)))


def served_models(target: Target, timeout_s: float = 10.0) -> list[str]:
    """The model names the server lists, in its order."""
    url = models_url(target)
    try:
        status, body = _get(url, _headers(target), timeout_s, target.net)
    except (OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        error = f"{type(reason).__name__}: {reason}"
        route = f" {target.net.route()}" if target.net.route() else ""
        raise DiscoverError(target.shown(
            f"cannot reach {target.base_url}{route} to ask which model it serves ({error}). "
            f"{unreachable_hint(target.net, error)}"), EXIT_UNREACHABLE)
    if status >= 400:
        raise DiscoverError(target.shown(
            f"--model is required: GET {url} answered {status}, so the server's models are "
            "unknown; name one with --model"), EXIT_USAGE)
    try:
        doc = safejson.loads(body, f"GET {url}")
    except ValueError:          # not JSON, or nested too deeply to be a models list
        doc = None
    names: list[str] = []
    if isinstance(doc, dict):
        for key, field in (("data", "id"), ("models", "name"), ("models", "model")):
            items = doc.get(key)
            if isinstance(items, list):
                names = [str(m[field]) for m in items if isinstance(m, dict) and m.get(field)]
                if names:
                    break
        if not names and isinstance(doc.get("model_id"), str) and doc["model_id"]:
            names = [doc["model_id"]]       # a server's info document (TGI's /info)
    return list(dict.fromkeys(names))


def pick_model(target: Target) -> str:
    """The one model the server serves; otherwise one line that lists them (exit 2)."""
    names = served_models(target)
    if len(names) == 1:
        return names[0]
    if not names:
        raise DiscoverError(f"--model is required: {target.shown(models_url(target))} lists no "
                            "model; name the model with --model", EXIT_USAGE)
    shown = ", ".join(names[:12]) + (f", ... ({len(names)} in all)" if len(names) > 12 else "")
    raise DiscoverError(f"--model is required: the server serves {len(names)} models ({shown}); "
                        "pick one with --model", EXIT_USAGE)

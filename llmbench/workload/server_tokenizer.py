"""Ask the server to count: vLLM's and llama.cpp's ``/tokenize`` and ``/detokenize``.

The served model's own tokenizer is the only exact count of a prompt, and vLLM (also SGLang) and
llama.cpp expose it over HTTP. This runs before the load starts, never on the hot path, with
short timeouts and an overall time budget, so a slow or absent endpoint costs seconds, not a run.

Shapes (checked against vLLM's ``protocol.py``/``api_server.py`` and llama.cpp's server README):

- vLLM / SGLang: ``POST /tokenize {"model", "prompt", "add_special_tokens"}`` ->
  ``{"count", "max_model_len", "tokens": [...]}``; ``POST /detokenize {"model", "tokens"}`` ->
  ``{"prompt"}``.
- llama.cpp: ``POST /tokenize {"content", "add_special"}`` -> ``{"tokens": [...]}``;
  ``POST /detokenize {"tokens"}`` -> ``{"content"}``. It ignores ``prompt``, answering
  ``{"tokens": []}``, which is how the two are told apart.

Special tokens (BOS) are not added: we count the user's text, as a chat template wraps it anyway.
Standard library HTTP (one keep-alive connection per thread) keeps this usable from the
synchronous CLI without an event loop; it goes the target's way (netconfig.Net: its proxy,
absolute-form or a CONNECT tunnel, and its TLS context), as the requests do.
"""

from __future__ import annotations

import heapq
import itertools
import json
import os
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from llmbench.client import netconfig
from llmbench.client.netconfig import Net
from llmbench.records import safejson
from llmbench.workload import progress
from llmbench.workload.tokenize_error import ServerTokenizeError

if TYPE_CHECKING:
    import http.client

PROBE_TIMEOUT_S = 2.0        # is there a /tokenize at all
CALL_TIMEOUT_S = 5.0         # one tokenize call, whole: connect, send, headers and body
# A call that failed (no whole answer in time, a dropped connection, a 5xx) is tried again
# this many times; a prompt still not counted then is counted locally, the others stay exact
# (one stalled call used to drop exact counting for the whole run: 4 of 10 probes hit it)
RETRIES = 2
BUDGET_S = 30.0              # all tokenizer work for one workload
THREADS = 8
# a /tokenize answer larger than this is not one: a 100,000-token prompt's ids are ~700 KB
MAX_ANSWER_BYTES = 16 << 20


class _OutOfBudget(ServerTokenizeError):
    """The time budget is spent: nothing more is asked of the server."""


class _Refused(ServerTokenizeError):
    """The server answered, and not with a count (4xx, no token list): asking again does not help."""


@dataclass
class ServerTokenizer:
    """Counts tokens with the server's own /tokenize (vLLM, SGLang, llama.cpp)."""
    root: str                       # scheme://host:port
    model: str
    dialect: str                    # "vllm" (also SGLang) or "llamacpp"
    headers: dict[str, str] = field(default_factory=dict)
    budget_s: float = BUDGET_S
    net: Net | None = None
    calls: int = 0
    # texts counted, and texts not counted after RETRIES (counted locally: Tokenizer.count)
    counted: int = 0
    missed: int = 0
    last_error: str | None = None
    _deadline: float = 0.0
    _local: threading.local = field(default_factory=threading.local, repr=False)

    def __post_init__(self) -> None:
        self._deadline = time.monotonic() + self.budget_s

    @property
    def label(self) -> str:
        kind = "vLLM" if self.dialect == "vllm" else "llama.cpp"
        return f"{kind} /tokenize at {self.root}"

    # -- HTTP --------------------------------------------------------------------------------
    def _post(self, path: str, body: dict[str, Any], timeout_s: float | None = None) -> Any:
        timeout_s = CALL_TIMEOUT_S if timeout_s is None else timeout_s
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise _OutOfBudget(
                f"counting with the server's /tokenize used its {self.budget_s:g} s budget "
                f"({self.calls} calls)")
        status, data = _post(self._local, self.root, path, body, self.headers,
                             min(timeout_s, left), self.net)
        self.calls += 1
        if status != 200:
            cls = ServerTokenizeError if status >= 500 else _Refused
            raise cls(f"POST {self.root}{path} answered HTTP {status}: {_short(data)}")
        return data

    def encode(self, text: str) -> list[int]:
        data = self._post("/tokenize", _tokenize_body(self.dialect, self.model, text))
        tokens = data.get("tokens") if isinstance(data, dict) else None
        if not isinstance(tokens, list):
            raise _Refused(f"{self.root}/tokenize answered without a token list")
        # llama.cpp with with_pieces answers objects; we never ask for them, but accept them
        return [t["id"] if isinstance(t, dict) else int(t) for t in tokens]

    def decode(self, ids: list[int]) -> str:
        vllm = self.dialect == "vllm"       # llama.cpp: no model, and the text as "content"
        data = self._post("/detokenize", {"model": self.model, "tokens": list(ids)} if vllm
                          else {"tokens": list(ids)})
        text = data.get("prompt" if vllm else "content") if isinstance(data, dict) else None
        if not isinstance(text, str):
            raise ServerTokenizeError(f"{self.root}/detokenize answered without text")
        return text

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def count_or_none(self, text: str) -> int | None:
        """The server's count, retried (RETRIES) after a failure that may pass; None when it
        still failed. Out of budget, or refused: ServerTokenizeError."""
        for attempt in range(RETRIES + 1):
            try:
                n = self.count(text)
            except (_OutOfBudget, _Refused):
                raise
            except ServerTokenizeError as exc:
                self.last_error = str(exc)
                continue
            self.counted += 1
            return n
        self.missed += 1
        return None

    def count_many(self, texts: list[str], lenient: bool = False) -> list[Any]:
        """Counts of many texts on a few connections at once; fails early when the budget
        cannot hold them all (projected from the first calls), not after waiting it out.
        ``lenient``: a text the server could not count (count_or_none) is None, not an error."""
        if not texts:
            return []
        out: list[Any] = [0] * len(texts)
        t0 = time.monotonic()
        done = 0
        pool = ThreadPoolExecutor(THREADS, thread_name_prefix="tokenize")
        futures = [pool.submit(self.count_or_none if lenient else self.count, t) for t in texts]
        progress.begin(progress.COUNTING, len(texts))
        try:
            for i, f in enumerate(futures):
                out[i] = f.result()
                done += 1
                progress.tick()
                if done == 4 * THREADS:
                    per = (time.monotonic() - t0) / done
                    need = per * (len(texts) - done)
                    left = self._deadline - time.monotonic()
                    if need > left:
                        # the budget is shared with the counting before this batch: say what
                        # is left of it, not the whole, or "3 s over 30 s" reads as a paradox
                        raise ServerTokenizeError(
                            f"counting {len(texts)} prompts with the server's /tokenize would "
                            f"take about {need:.1f} s more ({per * 1000:.1f} ms each), and "
                            f"only {max(left, 0.0):.1f} s of the {self.budget_s:g} s budget "
                            "is left")
        except BaseException:
            # Ctrl-C or a failure: do not wait for the calls in flight (each ends by its own
            # deadline, CALL_TIMEOUT_S at most)
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        finally:
            progress.end()
        pool.shutdown(wait=True)
        return out


def _tokenize_body(dialect: str, model: str, text: str) -> dict[str, Any]:
    if dialect == "vllm":
        return {"model": model, "prompt": text, "add_special_tokens": False}
    return {"content": text, "add_special": False}          # llama.cpp


def _short(data: Any) -> str:
    if isinstance(data, dict):
        err = data.get("error", data.get("detail", data.get("message")))
        if isinstance(err, dict):
            err = err.get("message", err)
        if err is not None:
            return str(err)[:160]
    return str(data)[:160].replace("\n", " ")


def _connection(local: threading.local, root: str, timeout_s: float,
                net: Net) -> "http.client.HTTPConnection | _PlainConn":
    conn = getattr(local, "conn", None)
    if conn is None or getattr(local, "root", None) != root:
        parts = urlsplit(root)
        host, port = parts.hostname or "127.0.0.1", parts.port
        if net.proxy:
            # http://: absolute-form requests to the proxy (_post); https://: a tunnel
            host, port = net.proxy_host, net.proxy_port
        if parts.scheme == "https" or net.proxy:
            import http.client
        if parts.scheme == "https":
            conn = http.client.HTTPSConnection(host, port, timeout=timeout_s,
                                               context=net.ssl_context())
            if net.proxy:
                auth = net.proxy_authorization
                conn.set_tunnel(parts.hostname or "", parts.port or 443,
                                headers={"Proxy-Authorization": auth} if auth else None)
        elif net.proxy:
            conn = http.client.HTTPConnection(host, port, timeout=timeout_s)
        else:
            conn = _PlainConn(host, port or 80, timeout_s)
        local.conn, local.root = conn, root
    conn.timeout = timeout_s
    if conn.sock is not None:
        conn.sock.settimeout(timeout_s)
    return conn


class HTTPException(Exception):
    """A broken answer on the plain connection, named as http.client names it (_PlainConn)."""


class RemoteDisconnected(ConnectionResetError, HTTPException):
    pass


class BadStatusLine(HTTPException):
    pass


class IncompleteRead(HTTPException):
    """Worded as http.client's: how much was read, never the bytes themselves (up to 16 MB)."""

    def __init__(self, partial: bytes, expected: int | None = None) -> None:
        self.partial, self.expected = partial, expected
        more = f", {expected} more expected" if expected is not None else ""
        super().__init__(f"IncompleteRead({len(partial)} bytes read{more})")


class LineTooLong(HTTPException):
    def __init__(self, what: str) -> None:
        super().__init__(f"got more than 65536 bytes when reading {what}")


def _faults() -> tuple[type[BaseException], ...]:
    """What a broken answer raises: the plain connection's errors, the socket's, and
    http.client's once a proxy or TLS connection has imported it."""
    client = sys.modules.get("http.client")
    return (HTTPException, OSError) + ((client.HTTPException,) if client is not None else ())


class _PlainConn:
    """http.client's HTTPConnection as far as ``_post`` uses it, for a plain http:// server
    with no proxy between: the request written and the answer read on the socket here.
    http.client parsed each answer's headers with the email package, ~130 of a call's ~155 us
    of CPU, and importing the two is ~10 ms of every run's start-up; a run's start-up and its
    prompt checks make one call per prompt (issue 50 §2). Its errors are named as
    http.client's, so ``_post`` retries and words them the same."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.host, self.port, self.timeout = host, port, timeout
        self.sock: socket.socket | None = None
        name = f"[{host}]" if ":" in host else host.encode("idna").decode("ascii")
        self._host = name if port == 80 else f"{name}:{port}"     # as http.client sends it

    def request(self, method: str, url: str, body: bytes, headers: dict[str, str]) -> None:
        if self.sock is None:
            self.sock = socket.create_connection((self.host, self.port), self.timeout)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        head = [f"{method} {url} HTTP/1.1", f"Host: {self._host}", "Accept-Encoding: identity",
                f"Content-Length: {len(body)}", *(f"{k}: {v}" for k, v in headers.items())]
        self.sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)

    def getresponse(self) -> "_PlainResponse":
        assert self.sock is not None
        return _PlainResponse(self.sock)

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


class _PlainResponse:
    """One answer read whole: the status line, the headers, the body (Content-Length,
    chunked, or until the server closes)."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock, self._buf = sock, b""
        while True:
            line = self._line()
            if not line:
                raise RemoteDisconnected("Remote end closed connection without "
                                                     "response")
            parts = line.decode("latin-1").split(None, 2)
            if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
                raise BadStatusLine(line.decode("latin-1").strip())
            self.status = int(parts[1])
            self.headers: dict[str, str] = {}
            while (h := self._line()) not in (b"\r\n", b"\n"):
                if not h:
                    raise IncompleteRead(b"")
                k, _, v = h.decode("latin-1").partition(":")
                self.headers[k.strip().lower()] = v.strip()
            if self.status >= 200:
                return                      # a 1xx (100 Continue) is followed by the answer

    def getheader(self, name: str, default: str = "") -> str:
        return self.headers.get(name.lower(), default)

    def read(self, limit: int) -> bytes:
        if "chunked" in self.headers.get("transfer-encoding", "").lower():
            out = b""
            while len(out) <= limit:
                line = self._line()
                if not line:
                    raise IncompleteRead(out)
                try:
                    size = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise HTTPException(f"bad chunk size {line[:40]!r}") from None
                if size == 0:
                    while self._line() not in (b"\r\n", b"\n", b""):
                        pass                # trailers
                    break
                out += self._exactly(size)
                self._exactly(2)            # the chunk's CRLF
            return out
        length = self.headers.get("content-length")
        if length is not None:
            return self._exactly(min(int(length), limit))
        while len(self._buf) <= limit and (data := self._sock.recv(65536)):
            self._buf += data               # no length: the answer ends when the server closes
        return self._buf[:limit]

    def _line(self) -> bytes:
        while b"\n" not in self._buf:
            if len(self._buf) > 65536:
                raise LineTooLong("header line")
            data = self._sock.recv(65536)
            if not data:
                line, self._buf = self._buf, b""
                return line
            self._buf += data
        line, _, self._buf = self._buf.partition(b"\n")
        return line + b"\n"

    def _exactly(self, n: int) -> bytes:
        while len(self._buf) < n:
            data = self._sock.recv(max(65536, n - len(self._buf)))
            if not data:
                raise IncompleteRead(self._buf, n - len(self._buf))
            self._buf += data
        out, self._buf = self._buf[:n], self._buf[n:]
        return out


class _Deadline:
    """Shuts a connection's socket down when a call runs past ``timeout_s`` in all: the read
    in progress then ends with an error, whatever the server is sending."""

    def __init__(self, conn: "http.client.HTTPConnection | _PlainConn", timeout_s: float) -> None:
        self.fired = False
        self.done = False
        self._conn = conn
        # the socket the response reads from: http.client lets go of it (conn.sock = None)
        # once a response that closes the connection has begun, but reads on through it
        self.sock: socket.socket | None = None
        _WATCH.add(time.monotonic() + timeout_s, self)

    def _fire(self) -> None:
        self.fired = True
        sock = self.sock or self._conn.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cancel(self) -> None:
        self.done = True


class _Watchdog:
    """One thread for every call's deadline: a threading.Timer per call started a thread per
    call, half of each call's CPU (prepare_unit_words makes ~1,000 calls before a run).
    A cancelled deadline is dropped when it comes up."""

    def __init__(self) -> None:
        self._cv = threading.Condition()
        self._heap: list[tuple[float, int, _Deadline]] = []
        self._seq = itertools.count()
        self._pid = -1                      # the process its thread runs in (not a fork's)

    def add(self, when: float, guard: _Deadline) -> None:
        with self._cv:
            if self._pid != os.getpid():
                self._pid, self._heap = os.getpid(), []
                threading.Thread(target=self._run, name="tokenize-deadlines",
                                 daemon=True).start()
            heapq.heappush(self._heap, (when, next(self._seq), guard))
            if self._heap[0][2] is guard:
                self._cv.notify()

    def _run(self) -> None:
        with self._cv:
            while True:
                heap = self._heap
                while heap and heap[0][2].done:
                    heapq.heappop(heap)
                if not heap:
                    self._cv.wait()
                    continue
                left = heap[0][0] - time.monotonic()
                if left > 0:
                    self._cv.wait(left)
                    continue
                heapq.heappop(heap)[2]._fire()


_WATCH = _Watchdog()


def _post(local: threading.local, root: str, path: str, body: dict[str, Any],
          headers: dict[str, str], timeout_s: float, net: Net | None = None) -> tuple[int, Any]:
    payload = json.dumps(body).encode()
    h = {**headers, "content-type": "application/json", "accept": "application/json"}
    net = net or netconfig.resolve(root, netconfig.current())
    where = path
    if net.proxy and root.startswith("http:"):
        where = root + path                 # absolute form, to the proxy
        if net.proxy_authorization:
            h["proxy-authorization"] = net.proxy_authorization
    last: Exception | None = None
    for attempt in range(2):     # a kept-alive connection the server closed: reconnect once
        conn = _connection(local, root, timeout_s, net)
        # the socket timeout bounds each read only: a server that drips keep-alive bytes
        # would hold a read forever (and Ctrl-C with it); this bounds the whole call
        guard = _Deadline(conn, timeout_s)
        try:
            conn.request("POST", where, payload, h)
            guard.sock = conn.sock
            resp = conn.getresponse()
            raw = resp.read(MAX_ANSWER_BYTES + 1)
            if len(raw) > MAX_ANSWER_BYTES:
                conn.close()
                local.conn = None
                raise ServerTokenizeError(f"POST {root}{path}: the answer is larger than "
                                          f"{MAX_ANSWER_BYTES >> 20} MB; not a /tokenize answer")
            if resp.getheader("connection", "").lower() == "close":
                conn.close()
                local.conn = None
        except _faults() as exc:
            conn.close()
            local.conn = None
            last = exc
            if guard.fired:
                raise ServerTokenizeError(f"POST {root}{path}: no whole answer within "
                                          f"{timeout_s:g} s")
            broken = not isinstance(exc, OSError) or isinstance(exc, ConnectionError)
            if (broken and attempt == 0
                    and not isinstance(exc, ConnectionRefusedError)):
                continue
            if broken:
                raise ServerTokenizeError(f"POST {root}{path}: {type(exc).__name__}: {exc}")
            # a timeout, an unreachable host
            raise ServerTokenizeError(f"POST {root}{path}: {type(exc).__name__} "
                                      f"{exc or ''}".strip())
        finally:
            guard.cancel()
        try:
            data = safejson.loads(raw, f"POST {root}{path}") if raw else None
        except ValueError:          # not JSON, or nested too deeply to be a count
            data = raw[:160].decode("utf-8", "replace")
        return resp.status, data
    raise ServerTokenizeError(f"POST {root}{path}: {last}")


def detect(root: str, model: str, headers: dict[str, str] | None = None,
           net: Net | None = None) -> ServerTokenizer:
    """The server's tokenizer, or ServerTokenizeError saying in one line why not. ``net``: the
    target's way (None: resolved from ``root`` and this command line's options)."""
    headers = dict(headers or {})
    net = net or netconfig.resolve(root, netconfig.current())
    local = threading.local()
    sample = "Hello world, how are you?"
    status, data = _post(local, root, "/tokenize", _tokenize_body("vllm", model, sample),
                         headers, PROBE_TIMEOUT_S, net)
    if status in (401, 403):
        raise ServerTokenizeError(f"{root}/tokenize refused the request (HTTP {status}); "
                                  "check --api-key / --header")
    if status in (404, 405, 501) and not (isinstance(data, dict) and "model" in _short(data)):
        raise ServerTokenizeError(f"{root} has no /tokenize (HTTP {status})")
    tokens = data.get("tokens") if isinstance(data, dict) else None
    if status == 200 and isinstance(tokens, list) and tokens:
        tok = ServerTokenizer(root, model, "vllm", headers, BUDGET_S, net)
    else:
        status2, data2 = _post(local, root, "/tokenize", _tokenize_body("llamacpp", model, sample),
                               headers, PROBE_TIMEOUT_S, net)
        tokens2 = data2.get("tokens") if isinstance(data2, dict) else None
        if status2 == 200 and isinstance(tokens2, list) and tokens2:
            tok = ServerTokenizer(root, model, "llamacpp", headers, BUDGET_S, net)
        else:
            raise ServerTokenizeError(f"{root}/tokenize answered HTTP {status}: {_short(data)}")
    tok._local = local
    return tok

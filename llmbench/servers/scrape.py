"""Server probes: poll a server's own view of its load about once a second.

Each kind of server is one adapter in llmbench/servers/ (detect, poll -> ServerSample); this
module runs them. Detection asks at most four cheap URLs once (``/metrics``, ``/api/usage``,
``/props``, ``/api/version``), then polls only what answered, so a server is never flooded
with 404s. Each sample is one JSON line in the run folder's ``server.jsonl``. Probes go the
way the requests go (netconfig.Net: the target's proxy and TLS; resolved from the root and
this command line's network options when the caller gives none). An http:// root is asked
by servers/plainget.py (asyncio streams); aiohttp, ~0.15 s of CPU to import, only for https://.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import aiohttp      # imported for an https:// probe only: an http:// one never loads it

from llmbench.client import netconfig
from llmbench import servers
from llmbench.servers.base import Poller
from llmbench.servers.plainget import PlainSession

# one server-state page (/metrics, /slots, /api/ps ...), read bounded: a /metrics page is
# ~100 KB; 100 MB of one is not metrics
MAX_PAGE_BYTES = 8 << 20
PAGE_DEADLINE_S = 3.0


def needs_aiohttp(root: str | None) -> bool:
    """Whether probing ``root`` goes by aiohttp (https://; http:// goes by plainget)."""
    return bool(root) and not str(root).startswith("http://")


def errors() -> tuple[type[BaseException], ...]:
    """What a failed GET raises: OSError (plainget's too), a deadline, a page that does not
    parse, and aiohttp's once an https:// probe has loaded it (until then nothing raises them)."""
    base: tuple[type[BaseException], ...] = (asyncio.TimeoutError, OSError, ValueError)
    aio = sys.modules.get("aiohttp")
    return base + (aio.ClientError,) if aio is not None else base


@dataclass
class ServerProbe:
    """Finds what serves a URL and reads its queue and cache state."""
    root: str                                   # scheme://host:port
    kind: str = "auto"
    interval_s: float = 1.0
    headers: dict[str, str] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)
    note: str | None = None
    net: netconfig.Net | None = None
    # called with the note when detection finds nothing to poll (the harness prints it when
    # the user named the kind: asked for, and silently absent, it would be a surprise later)
    on_note: Any = None
    _poller: Poller | None = None

    def __post_init__(self) -> None:
        if self.net is None:
            self.net = netconfig.resolve(self.root, netconfig.current())

    def session(self) -> PlainSession | aiohttp.ClientSession:
        """A session that goes the target's way: plainget's for http:// (the proxy, if any,
        in absolute form), else aiohttp's (its TLS; the proxy is per call)."""
        if not needs_aiohttp(self.root):
            return PlainSession(self.root, self.net)
        import aiohttp
        return aiohttp.ClientSession(connector=self.net.aiohttp_connector(), trust_env=False)

    async def _get(self, session: PlainSession | aiohttp.ClientSession, path: str
                   ) -> tuple[int, str]:
        if isinstance(session, PlainSession):
            return await asyncio.wait_for(session.get(path, self.headers, MAX_PAGE_BYTES),
                                          PAGE_DEADLINE_S)
        import aiohttp
        kw, proxy_headers = self.net.aiohttp_proxy(self.root.startswith("https:"))
        async with session.get(self.root + path, headers={**self.headers, **proxy_headers},
                               timeout=aiohttp.ClientTimeout(total=PAGE_DEADLINE_S), **kw) as r:
            parts, size = [], 0
            while True:
                part = await r.content.read(1 << 16)
                if not part:
                    break
                size += len(part)
                if size > MAX_PAGE_BYTES:
                    raise aiohttp.ClientPayloadError(
                        f"{self.root}{path}: larger than {MAX_PAGE_BYTES >> 20} MB")
                parts.append(part)
            return r.status, b"".join(parts).decode(r.charset or "utf-8", "replace")

    async def detect(self, session: PlainSession | aiohttp.ClientSession) -> str | None:
        """Decide what to poll, asking each path at most once."""
        if self.kind == "off":
            return None
        seen: dict[str, tuple[int, str]] = {}

        async def get_once(path: str) -> tuple[int, str]:
            if path not in seen:
                seen[path] = await self._get(session, path)
            return seen[path]

        wanted = [a for a in servers.ADAPTERS if self.kind in ("auto", a.name)]
        try:
            for adapter in wanted:
                poller = await adapter.detect(get_once, forced=self.kind != "auto")
                if poller is not None:
                    self.kind, self._poller = adapter.name, poller
                    return self.kind
        except errors() as exc:
            self.note = f"server probe: {self.root} did not answer ({type(exc).__name__})"
            if self.on_note is not None:
                self.on_note(self.note)
            return None
        paths = list(dict.fromkeys(p for a in wanted for p in a.paths))
        asked = ", ".join(paths[:-1]) + (" or " if len(paths) > 1 else "") + paths[-1] if paths else ""
        self.note = f"server probe: nothing to poll at {self.root} (no {asked})"
        if self.kind != "auto":
            # the user named the kind: say what answered, and what that means
            got = ", ".join(f"GET {p} answered {st}" for p, (st, _) in seen.items())
            self.note = (f"server probe {self.kind}: nothing to poll at {self.root} ({got}): "
                         f"not a {self.kind} server, or one whose state pages are off; a router "
                         "in front of one does not show its backend's (point --server-probe at "
                         "the backend, or leave it auto); the run has no server-side view")
        if self.on_note is not None:
            self.on_note(self.note)
        return None

    async def poll_once(self, session: PlainSession | aiohttp.ClientSession) -> dict[str, Any]:
        t = time.perf_counter()
        sample: dict[str, Any] = {"t": t, "wall": time.time(), "kind": self.kind}
        if self._poller is not None:
            polled = await self._poller.poll(lambda path: self._get(session, path))
            sample.update(polled.to_dict())
        return sample

    async def run(self, stop: asyncio.Event, out: Path | None = None) -> None:
        """Poll until ``stop``; give up after 5 failures in a row (and say so)."""
        async with self.session() as session:
            if await self.detect(session) is None:
                return
            fh = open(out, "a", encoding="utf-8") if out else None
            failures = 0
            try:
                while not stop.is_set():
                    t0 = time.perf_counter()
                    try:
                        sample = await self.poll_once(session)
                        failures = 0 if "error" not in sample else failures + 1
                    except errors() as exc:
                        sample = {"t": t0, "wall": time.time(), "kind": self.kind,
                                  "error": type(exc).__name__}
                        failures += 1
                    self.samples.append(sample)
                    if fh:
                        try:
                            fh.write(json.dumps(sample) + "\n")
                            fh.flush()
                        except OSError as exc:      # the disk: keep polling, in memory only
                            self.note = (f"server probe: cannot write {out} "
                                         f"({exc.strerror or exc}); samples kept in memory")
                            with suppress(OSError):
                                fh.close()
                            fh = None
                    if failures >= 5:
                        self.note = f"server probe: stopped after 5 failed polls of {self.root}"
                        return
                    with suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(stop.wait(),
                                               max(self.interval_s - (time.perf_counter() - t0), 0.05))
            finally:
                if fh:
                    fh.close()

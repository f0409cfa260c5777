"""What a server adapter is: how to detect one kind of server and poll it into a typed sample."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Awaitable, Callable, Protocol

from llmbench.servers.prometheus import parse_prometheus
from llmbench.records import safejson

# GET a path on the server's root -> (status, body text); raises on transport errors.
Get = Callable[[str], Awaitable[tuple[int, str]]]
Metrics = dict[str, list[tuple[dict[str, str], float]]]


@dataclass
class ServerSample:
    """One poll of a server's own view of its load, named the same for every server."""
    running: float | None = None
    waiting: float | None = None
    kv_cache_usage: float | None = None
    queue_time_sum_s: float | None = None
    queue_time_count: float | None = None
    prefix_cache_queries: float | None = None
    prefix_cache_hits: float | None = None
    preemptions: float | None = None
    cache_hit_rate: float | None = None
    slots: float | None = None
    models_loaded: list[str] | None = None
    size_bytes: int | None = None
    vram_bytes: int | None = None
    ram_bytes: int | None = None
    backends_in_flight: dict[str, float] | None = None
    # a router's in-flight count, not a backend's running count (nomyo.py says why)
    in_flight: float | None = None
    # the prompt cache as the server counts it (analysis.cachebound reads their change over a
    # window): prompt tokens it computed and took from its cache, the KV it has for them (the
    # mock's budget, llama.cpp's context per slot, Ollama's context length) and what it evicted
    prefilled_tokens_total: float | None = None
    cached_tokens_total: float | None = None
    kv_budget_tokens: float | None = None
    ctx_per_slot: float | None = None
    context_length: float | None = None
    kv_evicted_tokens_total: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The fields that were seen (one JSON line in server.jsonl)."""
        return {f.name: v for f in fields(self) if (v := getattr(self, f.name)) is not None}


class Poller(Protocol):
    async def poll(self, get: Get) -> ServerSample: ...


class ServerAdapter(Protocol):
    name: str
    paths: tuple[str, ...]          # what detection may ask, for the "nothing to poll" note

    async def detect(self, get: Get, forced: bool) -> Poller | None:
        """A poller when this is the server (``forced``: the user named this kind, so any
        answer of the right sort will do), else None."""


def total(metrics: Metrics, *names: str) -> float | None:
    for name in names:
        if name in metrics:
            return sum(v for labels, v in metrics[name] if "le" not in labels)
    return None


def biggest(metrics: Metrics, *names: str) -> float | None:
    for name in names:
        if name in metrics:
            return max(v for _, v in metrics[name])
    return None


@dataclass(frozen=True)
class MetricsAdapter:
    """A server with a Prometheus /metrics page, recognised by a metric-name marker."""
    name: str
    marker: str                                 # text only this server's page holds
    metric_names: tuple[str, ...]               # what ``extract`` reads: only these are parsed
    extract: Callable[[Metrics], ServerSample]
    paths: tuple[str, ...] = ("/metrics",)

    def sample(self, text: str) -> ServerSample:
        return self.extract(parse_prometheus(text, self.metric_names))

    async def detect(self, get: Get, forced: bool) -> Poller | None:
        status, text = await get("/metrics")
        if status == 200 and (forced or self.marker in text):
            return MetricsPoller(self)
        return None


@dataclass
class MetricsPoller:
    """Polls a server's metrics endpoint through its adapter while the load runs."""
    adapter: MetricsAdapter
    slots: float | None = None                  # known once (llama.cpp's /props)
    ctx_per_slot: float | None = None           # known once (llama.cpp's /props n_ctx)

    async def poll(self, get: Get) -> ServerSample:
        status, text = await get("/metrics")
        if status != 200:
            return ServerSample(error=f"HTTP {status}")
        s = self.adapter.sample(text)
        if self.slots:
            s.slots = self.slots
        if self.ctx_per_slot:
            s.ctx_per_slot = self.ctx_per_slot
        return s


@dataclass
class JsonPoller:
    """Polls one JSON document and turns it into a sample."""
    path: str
    extract: Callable[[Any], ServerSample]

    async def poll(self, get: Get) -> ServerSample:
        status, text = await get(self.path)
        if status != 200:
            return ServerSample(error=f"HTTP {status}")
        doc = safejson.loads(text, f"GET {self.path}")       # too deep: a ValueError
        try:
            return self.extract(doc)
        except (TypeError, AttributeError, KeyError, IndexError, ValueError) as exc:
            # a document of other shapes or types than this server's: this poll's error,
            # never the run's
            return ServerSample(error=f"GET {self.path}: unexpected JSON ({type(exc).__name__})")


@dataclass(frozen=True)
class JsonAdapter:
    """A server recognised by one JSON page (``paths[0]`` answers 200 with a text ``knows``
    takes, given whether the user forced this kind), then polled at ``poll_path`` (that page
    when None) into a sample by ``extract``."""
    name: str
    paths: tuple[str, ...]
    knows: Callable[[str, bool], bool]
    extract: Callable[[Any], ServerSample]
    poll_path: str | None = None

    async def detect(self, get: Get, forced: bool) -> Poller | None:
        status, text = await get(self.paths[0])
        if status == 200 and self.knows(text, forced):
            return JsonPoller(self.poll_path or self.paths[0], self.extract)
        return None

"""Server probes: poll a server's own view of its load about once a second.

Detection asks at most four cheap URLs once (``/metrics``, ``/api/usage``, ``/props``,
``/api/version``), then polls only the one that answered, so a server is never flooded
with 404s. Each sample is one JSON line in the run folder's ``server.jsonl``.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

import aiohttp

KINDS = ("auto", "vllm", "sglang", "llamacpp", "ollama", "tgi", "mock", "nomyo", "off")
# quoted values as "unrolled loops" ([^"\\]*(?:\\.[^"\\]*)*): several times faster in re than
# an alternation tried at every character
_LABEL_SET = re.compile(r'(?:\s*[a-zA-Z_][a-zA-Z0-9_]*\s*=\s*"[^"\\]*(?:\\.[^"\\]*)*"\s*,?)*\s*')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"([^"\\]*(?:\\.[^"\\]*)*)"')
_ESCAPE = re.compile(r"\\(.)")
_NAME_END = re.compile(r"[{\s]")


def _unescape(value: str) -> str:
    """The text format escapes three characters in label values: \\\\, \\" and \\n."""
    return _ESCAPE.sub(lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def _parse_line(line: str) -> tuple[str, dict[str, str], float] | None:
    """One sample line -> (name, labels, value), or None when it is not one.

    The label set ends at the line's last `}` (the value and timestamp after it are numbers),
    so a quoted value may hold `}`, `,` or an escaped quote and the series is still kept."""
    m = _NAME_END.search(line)
    if m is None or m.start() == 0:
        return None
    name, i = line[:m.start()], m.start()
    labels: dict[str, str] = {}
    if line[i] == "{":
        j = line.rfind("}")
        body = line[i + 1:j]
        if j < 0 or _LABEL_SET.fullmatch(body) is None:
            return None                         # malformed or unterminated label set
        if "\\" in body:
            labels = {k: _unescape(v) for k, v in _LABEL.findall(body)}
        else:
            labels = dict(_LABEL.findall(body))
        i = j + 1
    parts = line[i:].split()
    if not parts:
        return None
    try:
        return name, labels, float(parts[0])    # float() reads NaN, +Inf, -Inf; a timestamp may follow
    except ValueError:
        return None


def _lines_named(text: str, names: Iterable[str]) -> Iterator[str]:
    """The sample lines of these metrics, found with str.find (C speed) instead of a Python
    loop over every line of the page."""
    for name in names:
        n = len(name)
        k = 0 if text.startswith(name) else text.find("\n" + name) + 1
        while k > 0 or (k == 0 and text.startswith(name)):
            after = k + n
            if after < len(text) and text[after] in "{ \t":
                end = text.find("\n", after)
                yield text[k:end if end >= 0 else len(text)]
            k = text.find("\n" + name, after) + 1


def parse_prometheus(text: str, names: Iterable[str] | None = None
                     ) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Prometheus text exposition -> {metric: [(labels, value), ...]}.

    With ``names``, only those metrics are parsed: their lines are found without looping over
    the page in Python, so a vLLM-sized page (about 2,900 lines) costs well under a millisecond
    inside the load generator's event loop (scripts/bench_prometheus_parse.py)."""
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    if names is None:
        lines: Iterable[str] = (ln for ln in text.splitlines() if ln and ln[0] != "#")
    else:
        lines = _lines_named(text, names)
    for line in lines:
        parsed = _parse_line(line)
        if parsed is not None:
            name, labels, value = parsed
            out.setdefault(name, []).append((labels, value))
    return out


# The metrics ``extract`` reads, per kind: a scrape parses only these.
METRIC_NAMES: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
             "vllm:gpu_cache_usage_perc", "vllm:request_queue_time_seconds_sum",
             "vllm:request_queue_time_seconds_count", "vllm:prefix_cache_queries_total",
             "vllm:gpu_prefix_cache_queries_total", "vllm:prefix_cache_hits_total",
             "vllm:gpu_prefix_cache_hits_total", "vllm:num_preemptions_total",
             "llmbench_mock:slots"),
    "sglang": ("sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
               "sglang:cache_hit_rate"),
    "llamacpp": ("llamacpp:requests_processing", "llamacpp:requests_deferred",
                 "llamacpp:kv_cache_usage_ratio"),
    "tgi": ("tgi_batch_current_size", "tgi_queue_size"),
}
METRIC_NAMES["mock"] = METRIC_NAMES["vllm"]


def wanted_metrics(kind: str) -> tuple[str, ...] | None:
    """The names to parse for ``kind``; None (parse all) for a kind with no list."""
    return METRIC_NAMES.get(kind)


def _total(metrics: dict[str, list[tuple[dict[str, str], float]]], *names: str) -> float | None:
    for name in names:
        if name in metrics:
            return sum(v for labels, v in metrics[name] if "le" not in labels)
    return None


def _max(metrics: dict[str, list[tuple[dict[str, str], float]]], *names: str) -> float | None:
    for name in names:
        if name in metrics:
            return max(v for _, v in metrics[name])
    return None


def extract(kind: str, metrics: dict[str, list[tuple[dict[str, str], float]]]) -> dict[str, Any]:
    """The fields llmbench uses, from one scrape, named the same for every server."""
    s: dict[str, Any] = {}
    if kind in ("vllm", "mock"):
        s["running"] = _total(metrics, "vllm:num_requests_running")
        s["waiting"] = _total(metrics, "vllm:num_requests_waiting")
        s["kv_cache_usage"] = _max(metrics, "vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")
        s["queue_time_sum_s"] = _total(metrics, "vllm:request_queue_time_seconds_sum")
        s["queue_time_count"] = _total(metrics, "vllm:request_queue_time_seconds_count")
        s["prefix_cache_queries"] = _total(metrics, "vllm:prefix_cache_queries_total",
                                           "vllm:gpu_prefix_cache_queries_total")
        s["prefix_cache_hits"] = _total(metrics, "vllm:prefix_cache_hits_total",
                                        "vllm:gpu_prefix_cache_hits_total")
        s["preemptions"] = _total(metrics, "vllm:num_preemptions_total")
        slots = _total(metrics, "llmbench_mock:slots")
        if slots:
            s["slots"] = slots
    elif kind == "sglang":
        s["running"] = _total(metrics, "sglang:num_running_reqs")
        s["waiting"] = _total(metrics, "sglang:num_queue_reqs")
        s["kv_cache_usage"] = _max(metrics, "sglang:token_usage")
        s["cache_hit_rate"] = _max(metrics, "sglang:cache_hit_rate")
    elif kind == "llamacpp":
        s["running"] = _total(metrics, "llamacpp:requests_processing")
        s["waiting"] = _total(metrics, "llamacpp:requests_deferred")
        s["kv_cache_usage"] = _max(metrics, "llamacpp:kv_cache_usage_ratio")
    elif kind == "tgi":
        s["running"] = _total(metrics, "tgi_batch_current_size")
        s["waiting"] = _total(metrics, "tgi_queue_size")
    return {k: v for k, v in s.items() if v is not None}


def extract_ollama_ps(obj: dict[str, Any]) -> dict[str, Any]:
    models = obj.get("models") or []
    size = sum(int(m.get("size") or 0) for m in models)
    vram = sum(int(m.get("size_vram") or 0) for m in models)
    return {"models_loaded": [m.get("name") for m in models], "size_bytes": size,
            "vram_bytes": vram, "ram_bytes": max(size - vram, 0)}


def extract_nomyo_usage(obj: dict[str, Any]) -> dict[str, Any]:
    counts = obj.get("usage_counts") or {}
    backends = {}
    for endpoint, per_model in counts.items():
        if isinstance(per_model, dict):
            backends[endpoint] = sum(v for v in per_model.values() if isinstance(v, (int, float)))
        elif isinstance(per_model, (int, float)):
            backends[endpoint] = per_model
    return {"backends_in_flight": backends, "running": sum(backends.values())}


def extract_llamacpp_slots(slots: Any, props: dict[str, Any] | None) -> dict[str, Any]:
    s: dict[str, Any] = {}
    if isinstance(slots, list):
        s["running"] = sum(1 for x in slots if isinstance(x, dict) and
                           (x.get("is_processing") or x.get("state") == 1))
        s["slots"] = len(slots)
    if props and props.get("total_slots"):
        s["slots"] = props["total_slots"]
    return s


@dataclass
class ServerProbe:
    root: str                                   # scheme://host:port
    kind: str = "auto"
    interval_s: float = 1.0
    headers: dict[str, str] = field(default_factory=dict)
    samples: list[dict[str, Any]] = field(default_factory=list)
    note: str | None = None
    _props: dict[str, Any] | None = None
    _mode: str | None = None                    # "metrics", "ps", "usage", "slots"

    async def _get(self, session: aiohttp.ClientSession, path: str) -> tuple[int, str]:
        async with session.get(self.root + path, headers=self.headers,
                               timeout=aiohttp.ClientTimeout(total=3)) as r:
            return r.status, await r.text()

    async def detect(self, session: aiohttp.ClientSession) -> str | None:
        """Decide what to poll with at most four requests."""
        kind = self.kind
        if kind == "off":
            return None
        try:
            if kind in ("auto", "vllm", "sglang", "llamacpp", "tgi", "mock"):
                status, text = await self._get(session, "/metrics")
                if status == 200:
                    found = self._kind_of(text)
                    if kind == "auto" and found:
                        kind = found
                    if kind != "auto":
                        self._mode = "metrics"
                        if kind == "llamacpp":
                            await self._load_props(session)
                        self.kind = kind
                        return kind
            if kind in ("auto", "nomyo"):
                status, text = await self._get(session, "/api/usage")
                if status == 200 and "usage_counts" in text:
                    self.kind, self._mode = "nomyo", "usage"
                    return self.kind
            if kind in ("auto", "llamacpp"):
                if await self._load_props(session):
                    self.kind, self._mode = "llamacpp", "slots"
                    return self.kind
            if kind in ("auto", "ollama"):
                status, text = await self._get(session, "/api/version")
                if status == 200 and "version" in text:
                    self.kind, self._mode = "ollama", "ps"
                    return self.kind
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as exc:
            self.note = f"server probe: {self.root} did not answer ({type(exc).__name__})"
            return None
        self.note = (f"server probe: nothing to poll at {self.root} (no /metrics, /api/usage, "
                     "/props or /api/version)")
        return None

    async def _load_props(self, session: aiohttp.ClientSession) -> bool:
        try:
            status, text = await self._get(session, "/props")
            if status == 200:
                obj = json.loads(text)
                if isinstance(obj, dict) and "total_slots" in obj:
                    self._props = obj
                    return True
        except (ValueError, aiohttp.ClientError, asyncio.TimeoutError):
            pass
        return False

    @staticmethod
    def _kind_of(text: str) -> str | None:
        if "llmbench_mock:" in text:
            return "mock"
        for prefix, kind in (("vllm:", "vllm"), ("sglang:", "sglang"), ("llamacpp:", "llamacpp"),
                             ("tgi_", "tgi")):
            if prefix in text:
                return kind
        return None

    async def poll_once(self, session: aiohttp.ClientSession) -> dict[str, Any]:
        t = time.perf_counter()
        sample: dict[str, Any] = {"t": t, "wall": time.time(), "kind": self.kind}
        if self._mode == "metrics":
            status, text = await self._get(session, "/metrics")
            sample.update(extract(self.kind, parse_prometheus(text, wanted_metrics(self.kind)))
                          if status == 200
                          else {"error": f"HTTP {status}"})
            if self._props and self._props.get("total_slots"):
                sample["slots"] = self._props["total_slots"]
        elif self._mode == "ps":
            status, text = await self._get(session, "/api/ps")
            sample.update(extract_ollama_ps(json.loads(text)) if status == 200
                          else {"error": f"HTTP {status}"})
        elif self._mode == "usage":
            status, text = await self._get(session, "/api/usage")
            sample.update(extract_nomyo_usage(json.loads(text)) if status == 200
                          else {"error": f"HTTP {status}"})
        elif self._mode == "slots":
            status, text = await self._get(session, "/slots")
            sample.update(extract_llamacpp_slots(json.loads(text), self._props) if status == 200
                          else {"error": f"HTTP {status}"})
        return sample

    async def run(self, stop: asyncio.Event, out: Path | None = None) -> None:
        """Poll until ``stop``; give up after 5 failures in a row (and say so)."""
        async with aiohttp.ClientSession() as session:
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
                    except (aiohttp.ClientError, asyncio.TimeoutError, ValueError, OSError) as exc:
                        sample = {"t": t0, "wall": time.time(), "kind": self.kind,
                                  "error": type(exc).__name__}
                        failures += 1
                    self.samples.append(sample)
                    if fh:
                        fh.write(json.dumps(sample) + "\n")
                        fh.flush()
                    if failures >= 5:
                        self.note = f"server probe: stopped after 5 failed polls of {self.root}"
                        return
                    try:
                        await asyncio.wait_for(stop.wait(),
                                               max(self.interval_s - (time.perf_counter() - t0), 0.05))
                    except asyncio.TimeoutError:
                        pass
            finally:
                if fh:
                    fh.close()

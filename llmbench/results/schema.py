"""The results contract: what a run is, as typed objects, and the table of its summary's keys.

run.json holds the summary as vLLM's flat dict (``p95_ttft_ms``, ``output_throughput``...), so
that a run folder compares key by key with ``vllm bench serve --save-result``. Everything that
reads a summary reads it through this module: ``Summary.ttft.p95``, ``Summary.value("ttft",
"p95")`` (what a threshold reads), ``key("ttft", "p95")`` (the on-disk name). The dataclasses are
views over the dict run.json holds (``.data``), made by ``from_dict``; nothing is computed here
(the one summary function is ``llmbench.analysis.metrics.summarize``).

Schema versions: 1 is the only one written so far; ``Run.from_dict`` reads it (and folders
written before ``schema_version`` existed, which are version 1 too).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

from llmbench.results.telemetry import ServerIdentity, Telemetry

SCHEMA_VERSION = 1
READABLE_SCHEMAS = (1,)

# -- the key table ---------------------------------------------------------------------------

LATENCY = ("ttft", "tpot", "itl", "e2el")                       # vLLM's four
EXTRA_LATENCY = ("client_queue", "e2el_from_schedule", "itl_per_token", "max_gap")
CENSORED = ("ttft", "e2el", "e2el_from_schedule")               # also with failures as +inf
# reasoning models: time to first output (answer) token, reasoning time, the answer's own ITL
REASONING = ("ttfo", "reasoning_time", "output_itl")
COUNTS = ("reasoning_tokens",)         # statistics of a count: keys without "_ms"
# measured by the client or the server, not per vLLM: the send delay, the server's own queue
# (a header), the time Ollama's final line says a request waited for a slot
OTHER_LATENCY = ("send_delay", "server_queue", "server_slot_wait")
# agents: time to the first token of a tool call (replies that called a tool)
AGENTS = ("ttft_tool",)
METRICS = LATENCY + EXTRA_LATENCY + REASONING + OTHER_LATENCY + AGENTS + COUNTS

# threshold and compare names of the summary's scalars -> their keys
SCALARS = {
    "errors": "failed", "failed": "failed", "error_rate": "error_rate", "requests": "requests",
    "completed": "completed", "completed_share": "completed_share", "stalls": "stalls",
    "output_throughput": "output_throughput", "tok_s": "output_throughput",
    "request_throughput": "request_throughput", "req_s": "request_throughput",
    "total_token_throughput": "total_token_throughput", "request_goodput": "request_goodput",
    "requests_with_reasoning": "requests_with_reasoning",
    "total_reasoning_tokens": "total_reasoning_tokens",
    # agents and RAG: the share of replies that called a tool, of structured replies that
    # validated; embeddings and input tokens per second
    "tool_call_share": "tool_call_share", "valid_output_share": "valid_output_share",
    "embeddings_throughput": "embeddings_throughput", "emb_s": "embeddings_throughput",
    "input_throughput": "input_throughput",
}
SHARES = ("error_rate", "completed_share", "tool_call_share", "valid_output_share")
# which direction is worse (compare's gate)
HIGHER_IS_BETTER = ("output_throughput", "request_throughput", "total_token_throughput",
                    "request_goodput", "completed", "completed_share", "held",
                    "valid_output_share", "embeddings_throughput", "input_throughput")

VLLM_SCALARS = ("duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
                "request_throughput", "request_goodput", "output_throughput",
                "total_token_throughput", "max_output_tokens_per_s", "max_concurrent_requests")


def pct_word(p: float) -> str:
    """vLLM's key spelling: 99 -> '99', 99.9 -> '99.9'."""
    return str(int(p)) if int(p) == p else str(p)


def key(metric: str, stat: str | None = None) -> str:
    """The summary key of METRIC.STAT: ('ttft', 'p95') -> 'p95_ttft_ms', ('ttft', 'p50') and
    ('ttft', 'median') -> 'median_ttft_ms', ('ttft', 'p95_all') -> 'p95_all_ttft_ms',
    ('ttft', 'n') -> 'n_ttft'; a scalar (no stat) is its own key ('output_throughput')."""
    if stat is None:
        return SCALARS.get(metric, metric)
    if stat == "n":
        return f"n_{metric}"
    all_ = stat.endswith("_all")
    base = stat.removesuffix("_all")
    if base == "p50":
        base = "median"
    if metric in COUNTS:
        return f"{base}_{metric}"
    return f"{base}{'_all' if all_ else ''}_{metric}_ms"


def within_key(metric: str, limit_ms: float) -> str:
    """Summary key of "the share of all requests that succeeded with METRIC <= limit"."""
    return f"within_{metric}_{limit_ms:g}ms"


def value(summary: Mapping[str, Any] | "Summary", metric: str, stat: str | None = None) -> Any:
    """METRIC.STAT read from a summary (None when absent): what a threshold and compare read."""
    data = summary.data if isinstance(summary, Summary) else summary
    return data.get(key(metric, stat))


def to_vllm(summary: Mapping[str, Any] | "Summary", percentile_metrics: Sequence[str],
            metric_percentiles: Sequence[float]) -> dict[str, Any]:
    """The part of a summary ``vllm bench serve --save-result`` writes, with its keys."""
    data = summary.data if isinstance(summary, Summary) else summary
    out = {k: data.get(k) for k in VLLM_SCALARS}
    for m in percentile_metrics:
        for stat in ("mean", "median", "std"):
            out[key(m, stat)] = data.get(key(m, stat))
        for p in metric_percentiles:
            k = f"p{pct_word(p)}_{m}_ms"        # vLLM writes p50 as p50, not median
            out[k] = data.get(k)
    return out


def _jsonl_rows(path: Path) -> Iterator[dict[str, Any]]:
    """One dict per line of a JSON-lines file; a torn line (a crash mid-write) is skipped.
    (Here, not results.latencies.read_jsonl: the reader of run folders imports this module.)"""
    import json
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                yield json.loads(line)
            except json.JSONDecodeError:
                continue


# -- the typed view --------------------------------------------------------------------------

_STAT = re.compile(r"^(mean|median|std|min|max|p\d+(?:\.\d+)?)(_all)?_(.+?)(_ms)?$")


@dataclass(frozen=True)
class Metric:
    """One distribution of a summary, in milliseconds (``reasoning_tokens``: in tokens).

    ``p50`` is the median (vLLM writes both ``median_`` and ``p50_``; they are equal).
    ``percentiles`` holds every percentile the run asked for (``--percentiles 50,99.9``), and
    ``all_percentiles`` the censored ones: failures counted as never answering (TTFT, E2EL).
    A metric nothing was measured for has ``n == 0`` and every statistic None, never 0."""

    name: str
    n: int | None = None
    mean: float | None = None
    median: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    percentiles: dict[float, float | None] = field(default_factory=dict)
    all_percentiles: dict[float, float | None] = field(default_factory=dict)
    n_all: int | None = None        # requests the failure-aware percentiles stand on

    @property
    def p50(self) -> float | None:
        return self.percentiles.get(50.0, self.median)

    @property
    def p90(self) -> float | None:
        return self.percentiles.get(90.0)

    @property
    def p95(self) -> float | None:
        return self.percentiles.get(95.0)

    @property
    def p99(self) -> float | None:
        return self.percentiles.get(99.0)

    def at(self, p: float) -> float | None:
        """The p-th percentile (None when the run did not ask for it)."""
        return self.median if p == 50.0 and p not in self.percentiles else self.percentiles.get(p)

    @classmethod
    def from_summary(cls, data: Mapping[str, Any], name: str) -> "Metric":
        fields: dict[str, Any] = {}
        pct: dict[float, float | None] = {}
        pct_all: dict[float, float | None] = {}
        unit = "" if name in COUNTS else "_ms"
        for k, v in data.items():
            if not k.endswith(f"_{name}{unit}"):
                continue
            m = _STAT.match(k)
            if m is None or m.group(3) != name or (m.group(4) or "") != unit:
                continue
            stat, is_all = m.group(1), bool(m.group(2))
            if stat.startswith("p"):
                (pct_all if is_all else pct)[float(stat[1:])] = v
            elif stat == "median" and is_all:
                pct_all[50.0] = v
            elif not is_all:
                fields[stat] = v
        n = data.get(f"n_{name}")
        return cls(name=name, n=n, n_all=data.get(f"n_{name}_all"),
                   percentiles=dict(sorted(pct.items())),
                   all_percentiles=dict(sorted(pct_all.items())), **fields)


@dataclass(frozen=True)
class Within:
    """A share asked for by a ``within`` threshold: of all measured requests, the share that
    succeeded with ``metric`` at or under the limit (key ``within_<metric>_<limit>``, e.g.
    ``within_ttft_2000ms``; ``limit`` is that text, ``2000ms``)."""

    metric: str
    limit: str
    share: float | None
    key: str

    @property
    def limit_ms(self) -> float:
        return float(self.limit.removesuffix("ms"))

    @classmethod
    def from_key(cls, k: str, share: float | None) -> "Within":
        metric, _, limit = k.removeprefix("within_").rpartition("_")
        return cls(metric=metric, limit=limit, share=share, key=k)


@dataclass(frozen=True)
class Summary:
    """A run's (or a ramp step's) summary. Named fields for what every run has; ``data`` is the
    dict exactly as run.json holds it, for anything this class does not name."""

    completed: int
    failed: int
    requests: int
    duration_s: float | None
    error_rate: float | None
    total_input_tokens: int | None
    total_output_tokens: int | None
    request_throughput: float | None
    request_goodput: float | None
    output_throughput: float | None
    total_token_throughput: float | None
    errors: dict[str, int]
    stalls: int | None
    ttft: Metric
    tpot: Metric
    itl: Metric
    e2el: Metric
    client_queue: Metric
    e2el_from_schedule: Metric
    itl_per_token: Metric
    max_gap: Metric
    send_delay: Metric
    server_queue: Metric
    server_slot_wait: Metric
    ttfo: Metric
    reasoning_time: Metric
    output_itl: Metric
    reasoning_tokens: Metric
    ttft_tool: Metric
    data: dict[str, Any] = field(repr=False)
    # vLLM's 1-second-bucket peaks; llmbench's true peak in flight (``run`` only)
    max_output_tokens_per_s: float | None = None
    max_concurrent_requests: int | None = None
    peak_in_flight_requests: int | None = None
    completed_share: float | None = None
    error_statuses: dict[str, int] = field(default_factory=dict)
    error_samples: list[dict[str, Any]] = field(default_factory=list)
    stall_threshold_s: float | None = None
    requests_with_stalls: int | None = None
    output_tokens_source: str | None = None
    non_streaming: bool = False
    # metrics._bunching_store's verdict on how the token events arrived (None: not recorded)
    stream_bunching: dict[str, Any] | None = None
    served_by: dict[str, int] = field(default_factory=dict)
    backends: dict[str, Any] | None = None
    cached_prompt_tokens: int | None = None
    # the share of prompt tokens the server reported cached, over the requests that reported
    # it (cached_reported of them); None: no request said
    cached_prompt_share: float | None = None
    cached_reported: int = 0
    within: list[Within] = field(default_factory=list)
    # reasoning models (0 / None when no reply reasoned)
    requests_with_reasoning: int = 0
    total_reasoning_tokens: int | None = None
    answered_after_reasoning: int | None = None
    # agents (0 / None when no request offered tools or asked for a format)
    requests_with_tool_calls: int = 0
    tool_call_share: float | None = None
    structured_checked: int = 0
    valid_output_share: float | None = None
    # embeddings (None unless the replies were embeddings)
    total_embeddings: int | None = None
    embeddings_throughput: float | None = None
    input_throughput: float | None = None
    # multi-turn: the same summary of first turns and of later turns ("first", "later")
    by_turn: dict[str, "Summary"] = field(default_factory=dict)

    @property
    def duration(self) -> float | None:
        """vLLM's name for ``duration_s``."""
        return self.duration_s

    @classmethod
    def of(cls, summary: "Mapping[str, Any] | Summary") -> "Summary":
        """``summary`` as a Summary: itself, or made from its dict (run.json's)."""
        return summary if isinstance(summary, Summary) else cls.from_dict(summary)

    def metric(self, name: str) -> Metric:
        """A distribution by name (``'ttft'``); an unknown name is a ValueError."""
        if name not in METRICS:
            raise ValueError(f"unknown metric {name!r}; one of {', '.join(METRICS)}")
        return getattr(self, name)

    def value(self, metric: str, stat: str | None = None) -> Any:
        """METRIC.STAT as a threshold reads it (``value('ttft', 'p95')``, ``value('error_rate')``,
        ``value('ttft', 'p95_all')``, ``value('ttft', 'n')``)."""
        return value(self.data, metric, stat)

    def has(self, metric: str, stat: str | None = None) -> bool:
        """Whether the summary holds METRIC.STAT at all (a statistic with no data is held, as
        None): a run where no reply reasoned has no TTFO; a summary written before a count
        existed has no ``n_``."""
        return key(metric, stat) in self.data

    def within_share(self, metric: str, limit_ms: float) -> float | None:
        """The share of all requests that succeeded with METRIC <= limit_ms (None when the
        summary was not asked for it)."""
        return self.data.get(within_key(metric, limit_ms))

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Summary":
        d = dict(data)
        metrics = {name: Metric.from_summary(d, name) for name in METRICS}
        return cls(completed=int(d.get("completed") or 0), failed=int(d.get("failed") or 0),
                   requests=int(d.get("requests") or (d.get("completed") or 0) + (d.get("failed") or 0)),
                   duration_s=d.get("duration"), error_rate=d.get("error_rate"),
                   total_input_tokens=d.get("total_input_tokens"),
                   total_output_tokens=d.get("total_output_tokens"),
                   request_throughput=d.get("request_throughput"),
                   request_goodput=d.get("request_goodput"),
                   output_throughput=d.get("output_throughput"),
                   total_token_throughput=d.get("total_token_throughput"),
                   errors=dict(d.get("errors") or {}), stalls=d.get("stalls"),
                   max_output_tokens_per_s=d.get("max_output_tokens_per_s"),
                   max_concurrent_requests=d.get("max_concurrent_requests"),
                   peak_in_flight_requests=d.get("peak_in_flight_requests"),
                   completed_share=d.get("completed_share"),
                   error_statuses=dict(d.get("error_statuses") or {}),
                   error_samples=list(d.get("error_samples") or []),
                   stall_threshold_s=d.get("stall_threshold_s"),
                   requests_with_stalls=d.get("requests_with_stalls"),
                   output_tokens_source=d.get("output_tokens_source"),
                   non_streaming=bool(d.get("non_streaming")),
                   stream_bunching=d.get("stream_bunching"),
                   served_by=dict(d.get("served_by") or {}), backends=d.get("backends"),
                   cached_prompt_tokens=d.get("cached_prompt_tokens"),
                   cached_prompt_share=d.get("cached_prompt_share"),
                   cached_reported=int(d.get("cached_reported") or 0),
                   within=[Within.from_key(k, d[k]) for k in sorted(d) if k.startswith("within_")],
                   requests_with_reasoning=int(d.get("requests_with_reasoning") or 0),
                   total_reasoning_tokens=d.get("total_reasoning_tokens"),
                   answered_after_reasoning=d.get("answered_after_reasoning"),
                   requests_with_tool_calls=int(d.get("requests_with_tool_calls") or 0),
                   tool_call_share=d.get("tool_call_share"),
                   structured_checked=int(d.get("structured_checked") or 0),
                   valid_output_share=d.get("valid_output_share"),
                   total_embeddings=d.get("total_embeddings"),
                   embeddings_throughput=d.get("embeddings_throughput"),
                   input_throughput=d.get("input_throughput"),
                   by_turn={k: cls.from_dict(v) for k, v in (d.get("by_turn") or {}).items()
                            if isinstance(v, dict)},
                   data=d, **metrics)


@dataclass(frozen=True)
class Verdict:
    """Why a ramp stopped (or that every step held): ``kind`` is one of verdict.KINDS
    (held, queueing, compute, errors, router, generator, buffered, outage, ...), ``text`` the
    sentence the console prints, ``evidence`` and ``advice`` the lines under it."""

    kind: str
    text: str
    evidence: list[str]
    advice: list[str]
    data: dict[str, Any] = field(repr=False)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Verdict":
        d = dict(data)
        return cls(kind=str(d.get("kind") or ""), text=str(d.get("result") or ""),
                   evidence=list(d.get("evidence") or []), advice=list(d.get("advice") or []),
                   data=d)


@dataclass(frozen=True)
class Step:
    """One load level of a ramp (or a probe's slice): its load (users, or requests/s for an
    open-loop ramp), whether it held its thresholds, and its summary."""

    index: int
    load: float
    held: bool | None
    summary: Summary
    checks: list[dict[str, Any]]
    hold_start: float | None
    hold_end: float | None
    data: dict[str, Any] = field(repr=False)
    # the server's machine over the hold window (None: not sampled)
    telemetry: Telemetry | None = None

    @property
    def users(self) -> float:
        """The step's load under the name a closed-loop ramp gives it."""
        return self.load

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Step":
        d = dict(data)
        return cls(index=int(d.get("index") or 0), load=float(d.get("load") or 0.0),
                   held=d.get("held"), summary=Summary.from_dict(d.get("summary") or {}),
                   checks=list(d.get("checks") or []), hold_start=d.get("hold_start"),
                   hold_end=d.get("hold_end"), data=d,
                   telemetry=Telemetry.from_dict(d.get("telemetry")))


@dataclass(frozen=True)
class Run:
    """One run folder's run.json, typed: a ``run`` has a ``summary``; a ``ramp`` has ``steps``
    and a ``verdict``; a ``sweep`` (sweep.json) has ``results``. ``path`` is the folder (None for
    a run not written to disk); ``requests()`` reads its requests.jsonl."""

    kind: str
    status: str
    schema_version: int
    path: Path | None
    summary: Summary | None
    steps: list[Step]
    verdict: Verdict | None
    config: dict[str, Any]
    labels: dict[str, str]
    data: dict[str, Any] = field(repr=False)
    # what the server was, and its machine over the whole run (None: not known, not sampled)
    server: ServerIdentity | None = None
    telemetry: Telemetry | None = None

    @property
    def partial(self) -> bool:
        """True when the run was interrupted or cut short: its numbers cover part of the plan."""
        return self.status != "complete"

    @property
    def held(self) -> float | None:
        """A ramp's answer: the most users (or the highest rate) whose step held; None when no
        step held or this is not a ramp."""
        loads = [s.load for s in self.steps if s.held]
        return max(loads) if loads else None

    def requests_path(self) -> Path | None:
        return None if self.path is None else self.path / "requests.jsonl"

    def iter_request_rows(self) -> Iterator[dict[str, Any]]:
        """requests.jsonl, one dict per request, as written (token times in microseconds)."""
        p = self.requests_path()
        if p is None or not p.exists():
            return iter(())
        return _jsonl_rows(p)

    def requests(self) -> Any:
        """A pandas DataFrame, one row per request (pandas comes with ``datasets``)."""
        from llmbench.results.table import request_frame
        return request_frame(self)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.data)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str | Path | None = None) -> "Run":
        d = dict(data)
        version = int(d.get("schema_version") or 1)
        if version not in READABLE_SCHEMAS:
            raise ValueError(f"run.json schema_version {version}: this llmbench reads "
                             f"{', '.join(map(str, READABLE_SCHEMAS))}; upgrade llmbench")
        summary = d.get("summary")
        verdict = d.get("verdict")
        return cls(kind=str(d.get("kind") or "run"), status=str(d.get("status") or ""),
                   schema_version=version, path=None if path is None else Path(path),
                   summary=Summary.from_dict(summary) if isinstance(summary, dict) else None,
                   steps=[Step.from_dict(s) for s in d.get("steps") or [] if isinstance(s, dict)],
                   verdict=Verdict.from_dict(verdict) if isinstance(verdict, dict) else None,
                   config=dict(d.get("config") or {}), labels=dict(d.get("labels") or {}),
                   data=d, server=ServerIdentity.from_dict(d.get("server")),
                   telemetry=Telemetry.from_dict((d.get("telemetry") or {}).get("window")
                                                 if isinstance(d.get("telemetry"), dict) else None))

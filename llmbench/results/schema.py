"""The results contract: what a run is, as the typed objects the pipeline builds, and the table
of its summary's keys.

The pipeline builds these objects (``metrics.summarize`` a ``Summary``, the ramp's judge a
``Step`` with its ``Check``s and ``Steady`` state, ``verdict.explain`` a ``Verdict``, each
command a ``Run``) and writes them with ``to_dict()``; every reader loads them with
``Run.load(folder)``. ``to_dict()`` writes run.json's keys as they have always been (a summary
is vLLM's flat dict, ``p95_ttft_ms``, ``output_throughput``..., so that a run folder compares key
by key with ``vllm bench serve --save-result``), and every folder written so far reads back
unchanged (``Run.load(folder).to_dict()`` is its run.json). The machinery (a field is a key; new
typed fields are one line each) is ``llmbench.results.contract``.

Reading a statistic by name (a threshold's ``ttft.p95``): ``Summary.value("ttft", "p95")``;
its on-disk name: ``key("ttft", "p95")``. Nothing is computed here (the one summary function is
``llmbench.analysis.metrics.summarize``).

Schema versions: 1 is the only one written so far (``SCHEMA_VERSION``, the one constant);
``Run.from_dict`` reads it, and folders written before ``schema_version`` existed, which are
version 1 too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Iterator, Literal, Mapping, Sequence

from llmbench.errors import (EXIT_EXPECTATION, EXIT_INTERRUPTED, EXIT_OK, EXIT_OVERLOADED,
                             EXIT_NOT_JUDGED, EXIT_THRESHOLD, EXIT_UNREACHABLE,
                             EXIT_WRITE)
from llmbench.results.abandon import Abandonment
from llmbench.results.cache import PromptCache
from llmbench.results.network import NetworkFloor
from llmbench.results.contract import (JSONObject, JSONValue, Part, WrongType, decode, encode,
                                       kind_of, mismatch, ordered, part, read_part, specs)
from llmbench.results.jsonfile import RunFolderError, read_object, write_json
from llmbench.results.reset import CacheReset
from llmbench.results.search import Search

from llmbench.results.sessions import CacheBound, Sessions
from llmbench.results.telemetry import RunTelemetry, ServerIdentity, Telemetry

if TYPE_CHECKING:
    import pandas

    from llmbench.results.latencies import Latencies

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
    # --abandon: requests the users cancelled (not failures), and their share of all
    "cancelled": "cancelled", "cancel_rate": "cancel_rate",
}
SHARES = ("error_rate", "completed_share", "tool_call_share", "valid_output_share",
          "cancel_rate")
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
    if isinstance(summary, Summary):
        return summary.value(metric, stat)
    return summary.get(key(metric, stat))


def to_vllm(summary: Mapping[str, Any] | "Summary", percentile_metrics: Sequence[str],
            metric_percentiles: Sequence[float]) -> dict[str, Any]:
    """The part of a summary ``vllm bench serve --save-result`` writes, with its keys."""
    data = summary.flat() if isinstance(summary, Summary) else summary
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
    from llmbench.records.record import json_lines
    yield from json_lines(path)         # a torn or damaged line: skipped and counted


# -- distributions ---------------------------------------------------------------------------

_STAT = re.compile(r"^(mean|median|std|min|max|p\d+(?:\.\d+)?)(_all)?_(.+?)(_ms)?$")
STATS = ("mean", "median", "std", "min", "max")


def _unit(name: str) -> str:
    return "" if name in COUNTS else "_ms"


def stat_key(name: str, stat: str) -> str:
    """The summary key of one statistic of a distribution, as ``Metric.stats`` names it:
    'mean', 'median', 'std', 'min', 'max', 'pQ' (vLLM's spelling: p50 too, beside the median),
    'n'; the failure-aware 'pQ_all' (p50: ``median_all_``) and 'n_all'."""
    if stat == "n":
        return f"n_{name}"
    if stat == "n_all":
        return f"n_{name}_all"
    if stat.endswith("_all"):
        return key(name, stat)
    return f"{stat}_{name}{_unit(name)}"


def _number(v: Any) -> Any:
    """A statistic as run.json may hold it ("inf", "-inf") as a float; NaN as None."""
    if isinstance(v, str) and v in ("inf", "-inf"):
        return float(v)
    if isinstance(v, float) and v != v:
        return None
    return v


@dataclass
class Metric:
    """One distribution of a summary, in milliseconds (``reasoning_tokens``: in tokens).

    ``p50`` is the median (vLLM writes both ``median_`` and ``p50_``; they are equal).
    ``percentiles`` holds every percentile the run asked for (``--percentiles 50,99.9``), and
    ``all_percentiles`` the censored ones: failures counted as never answering (TTFT, E2EL).
    A metric nothing was measured for has ``n == 0`` and every statistic None, never 0.
    ``stats`` names the statistics the summary holds, in the order it writes them (a run where
    no reply reasoned holds no TTFO at all; the send delay has a mean, p50, p99 and max)."""

    name: str = ""
    n: int | None = None
    mean: float | None = None
    median: float | None = None
    std: float | None = None
    min: float | None = None
    max: float | None = None
    percentiles: dict[float, float | None] = field(default_factory=dict)
    all_percentiles: dict[float, float | None] = field(default_factory=dict)
    n_all: int | None = None        # requests the failure-aware percentiles stand on
    stats: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # one number, two spellings: a distribution summarized by its p50 (the send delay's
        # "p50_send_delay_ms") has that median too; what is written stays ``stats``
        if self.median is None and self.percentiles.get(50.0) is not None:
            self.median = self.percentiles[50.0]

    @classmethod
    def of(cls, name: str, stats: Mapping[str, Any]) -> "Metric":
        """A distribution from its statistics as the summary computes them: 'mean', 'median',
        'std', 'min', 'max', 'count' (its n) and 'pQ', in the order given."""
        kw: dict[str, Any] = {}
        pct: dict[float, float | None] = {}
        order = []
        for stat, v in stats.items():
            v = _number(v)
            if stat == "count":
                kw["n"], stat = v, "n"
            elif stat in STATS:
                kw[stat] = v
            else:
                pct[float(stat[1:])] = v
            order.append(stat)
        return cls(name=name, percentiles=pct, stats=tuple(order), **kw)

    def with_all(self, n_all: int, percentiles: Mapping[float, float | None]) -> "Metric":
        """The same with its failure-aware percentiles (every failed request as +inf)."""
        pcts = {float(p): _number(v) for p, v in percentiles.items()}
        return replace(self, n_all=n_all, all_percentiles=pcts,
                       stats=self.stats + ("n_all",) + tuple(f"p{pct_word(p)}_all" for p in pcts))

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

    def _value(self, stat: str) -> Any:
        if stat == "n":
            return self.n
        if stat == "n_all":
            return self.n_all
        if stat.endswith("_all"):
            return self.all_percentiles.get(float(stat[1:-4]))
        if stat in STATS:
            return getattr(self, stat)
        return self.percentiles.get(float(stat[1:]))

    def to_dict(self) -> dict[str, Any]:
        """The distribution on its own, by statistic (``{"n": 12, "mean": 80.5, "p95": 131.0}``):
        how a part other than the flat summary holds one (a session's duration, a class's
        TTFT). Infinities as "inf", as everywhere in run.json."""
        return {stat: encode(self._value(stat)) for stat in self.stats}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], name: str = "") -> "Metric":
        return _metric_from(name, {k: _number(v) for k, v in data.items()})

    def items(self, censored: bool | None = None) -> Iterator[tuple[str, Any]]:
        """(summary key, value) of the statistics it holds; ``censored``: only the
        failure-aware ones (True) or only the others (False)."""
        for stat in self.stats:
            is_all = stat.endswith("_all")
            if censored is None or censored == is_all:
                yield stat_key(self.name, stat), self._value(stat)


@dataclass
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

    @classmethod
    def of(cls, metric: str, limit_ms: float, share: float | None) -> "Within":
        return cls.from_key(within_key(metric, limit_ms), share)


@dataclass
class ErrorSample(Part):
    """One kind of failure of a summary (metrics._error_samples): its error kind, HTTP status,
    the first words of its body, and how many requests failed so."""

    kind: str | None = None
    status: int | None = None
    error: str | None = None
    count: int = 1


# -- the summary -----------------------------------------------------------------------------
# Its scalars in the order run.json has them: vLLM's headline first; (field, key, written)
# where written is "always", "set" (only when not None: a run where no reply called a tool
# has no tool_call_share at all) or "with:<field>" (when that field is not None).
_HEAD = (("completed", "completed", "always"), ("failed", "failed", "always"),
         ("duration_s", "duration", "always"),
         ("total_input_tokens", "total_input_tokens", "always"),
         ("total_output_tokens", "total_output_tokens", "always"),
         ("request_throughput", "request_throughput", "always"),
         ("request_goodput", "request_goodput", "always"),
         ("output_throughput", "output_throughput", "always"),
         ("total_token_throughput", "total_token_throughput", "always"),
         ("max_output_tokens_per_s", "max_output_tokens_per_s", "always"),
         ("max_concurrent_requests", "max_concurrent_requests", "always"))
_MAIN_METRICS = ("ttft", "tpot", "itl", "e2el", "client_queue", "e2el_from_schedule",
                 "itl_per_token", "max_gap")
_REASONING = (("requests_with_reasoning", "requests_with_reasoning", "set"),
              ("total_reasoning_tokens", "total_reasoning_tokens", "set"),
              ("answered_after_reasoning", "answered_after_reasoning", "set"))
_TOOLS = (("requests_with_tool_calls", "requests_with_tool_calls", "set"),
          ("tool_call_share", "tool_call_share", "set"))
_STRUCTURED = (("structured_checked", "structured_checked", "set"),
               ("valid_output_share", "valid_output_share", "set"),
               ("total_embeddings", "total_embeddings", "set"),
               ("embeddings_throughput", "embeddings_throughput", "set"),
               ("input_throughput", "input_throughput", "set"))
_TAIL = (("requests", "requests", "always"), ("completed_share", "completed_share", "always"),
         ("error_rate", "error_rate", "always"), ("errors", "errors", "always"),
         ("error_statuses", "error_statuses", "always"),
         ("error_samples", "error_samples", "always"), ("stalls", "stalls", "always"),
         ("stall_threshold_s", "stall_threshold_s", "always"),
         ("requests_with_stalls", "requests_with_stalls", "always"),
         ("output_tokens_source", "output_tokens_source", "always"),
         ("non_streaming", "non_streaming", "always"),
         ("stream_bunching", "stream_bunching", "always"),
         ("served_by", "served_by", "always"), ("backends", "backends", "set"))
# --abandon: cancelled by the user, of them before any token, and their share of all requests
_CANCELLED = (("cancelled", "cancelled", "set"), ("cancelled_waiting", "cancelled_waiting", "set"),
              ("cancel_rate", "cancel_rate", "set"))
_LAST = (("cached_prompt_tokens", "cached_prompt_tokens", "set"),
         ("cached_reported", "cached_reported", "set"),
         # written beside cached_reported, a share of None included (no prompt tokens told)
         ("cached_prompt_share", "cached_prompt_share", "with:cached_reported"))
_AFTER = (("peak_in_flight_requests", "peak_in_flight_requests", "set"),)
_SCALAR_FIELDS = {k: f for f, k, _ in _HEAD + _REASONING + _TOOLS + _STRUCTURED + _TAIL
                  + _CANCELLED + _LAST + _AFTER}
_SCALAR_DEFAULTS = {"completed": 0, "failed": 0, "requests": 0, "errors": {},
                    "error_statuses": {}, "error_samples": [], "non_streaming": False,
                    "served_by": {}}


@dataclass
class Summary(Part):
    """A run's (or a ramp step's) summary, as ``metrics.summarize`` builds it: vLLM's headline,
    one ``Metric`` per distribution and the scalars every summary has, each a named field.
    ``to_dict()`` is vLLM's flat dict (``p95_ttft_ms``...), as run.json holds it."""

    completed: int = 0
    failed: int = 0
    requests: int = 0
    duration_s: float | None = None
    error_rate: float | None = None
    total_input_tokens: int | None = None
    total_output_tokens: int | None = None
    request_throughput: float | None = None
    request_goodput: float | None = None
    output_throughput: float | None = None
    total_token_throughput: float | None = None
    errors: dict[str, int] = field(default_factory=dict)
    stalls: int | None = None
    ttft: Metric = field(default_factory=Metric)
    tpot: Metric = field(default_factory=Metric)
    itl: Metric = field(default_factory=Metric)
    e2el: Metric = field(default_factory=Metric)
    client_queue: Metric = field(default_factory=Metric)
    e2el_from_schedule: Metric = field(default_factory=Metric)
    itl_per_token: Metric = field(default_factory=Metric)
    max_gap: Metric = field(default_factory=Metric)
    send_delay: Metric = field(default_factory=Metric)
    server_queue: Metric = field(default_factory=Metric)
    server_slot_wait: Metric = field(default_factory=Metric)
    ttfo: Metric = field(default_factory=Metric)
    reasoning_time: Metric = field(default_factory=Metric)
    output_itl: Metric = field(default_factory=Metric)
    reasoning_tokens: Metric = field(default_factory=Metric)
    ttft_tool: Metric = field(default_factory=Metric)
    # vLLM's 1-second-bucket peaks; llmbench's true peak in flight (``run`` only)
    max_output_tokens_per_s: float | None = None
    max_concurrent_requests: int | None = None
    peak_in_flight_requests: int | None = None
    completed_share: float | None = None
    error_statuses: dict[str, int] = field(default_factory=dict)
    error_samples: list[ErrorSample] = field(default_factory=list)
    stall_threshold_s: float | None = None
    requests_with_stalls: int | None = None
    output_tokens_source: str | None = None
    non_streaming: bool = False
    # metrics._bunching_store's verdict on how the token events arrived (None: not recorded)
    stream_bunching: JSONObject | None = None
    served_by: dict[str, int] = field(default_factory=dict)
    backends: JSONObject | None = None
    cached_prompt_tokens: int | None = None
    # the share of prompt tokens the server reported cached, over the requests that reported
    # it (cached_reported of them); None: no request said
    cached_prompt_share: float | None = None
    cached_reported: int | None = None
    within: list[Within] = field(default_factory=list)
    # reasoning models (None when no reply reasoned)
    requests_with_reasoning: int | None = None
    total_reasoning_tokens: int | None = None
    answered_after_reasoning: int | None = None
    # agents (None when no request offered tools or asked for a format)
    requests_with_tool_calls: int | None = None
    tool_call_share: float | None = None
    structured_checked: int | None = None
    valid_output_share: float | None = None
    # embeddings (None unless the replies were embeddings)
    total_embeddings: int | None = None
    embeddings_throughput: float | None = None
    input_throughput: float | None = None
    # --abandon (None when no user gave up): requests the users cancelled, not failures and
    # not in ``failed`` or ``error_rate``; of them, those cancelled before any token; their
    # share of all requests. The failure-aware percentiles (``_all``) count them as not
    # answered in time (a reply stopped mid-stream keeps its real TTFT there)
    cancelled: int | None = None
    cancelled_waiting: int | None = None
    cancel_rate: float | None = None
    # multi-turn: the same summary of first turns and of later turns ("first", "later")
    by_turn: dict[str, "Summary"] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in METRICS:
            m = getattr(self, name)
            if not m.name:
                m.name = name

    @property
    def duration(self) -> float | None:
        """vLLM's name for ``duration_s``."""
        return self.duration_s

    def metric(self, name: str) -> Metric:
        """A distribution by name (``'ttft'``); an unknown name is a ValueError."""
        if name not in METRICS:
            raise ValueError(f"unknown metric {name!r}; one of {', '.join(METRICS)}")
        return getattr(self, name)

    # -- the flat dict ------------------------------------------------------------------------
    def _scalars(self, table: Sequence[tuple[str, str, str]]) -> Iterator[tuple[str, Any]]:
        loaded = self.read_keys
        for f, k, rule in table:
            v = getattr(self, f)
            if loaded is not None:
                # read from a file: what it held, and what was set since (``requests`` of a
                # file that had none is the sum from_dict made, not a value set)
                if k not in loaded and (k == "requests" or v == _SCALAR_DEFAULTS.get(k)):
                    continue
            elif rule == "set" and v is None:
                continue
            elif rule.startswith("with:") and getattr(self, rule[5:]) is None:
                continue
            yield k, v

    def _items(self) -> Iterator[tuple[str, Any]]:
        """(key, value) of the flat dict, in the order ``summarize`` has always written it."""
        yield from self._scalars(_HEAD)
        for name in _MAIN_METRICS:
            yield from getattr(self, name).items(censored=False)
        yield from self.ttfo.items(censored=False)
        yield from self.reasoning_time.items(censored=False)
        yield from self.output_itl.items(censored=False)
        yield from self.reasoning_tokens.items(censored=False)
        yield from self._scalars(_REASONING)
        yield from self._scalars(_TOOLS)
        yield from self.ttft_tool.items(censored=False)
        yield from self._scalars(_STRUCTURED)
        for name in METRICS:
            yield from getattr(self, name).items(censored=True)
        for w in self.within:
            yield w.key, w.share
        yield from self._scalars(_TAIL)
        yield from self._scalars(_CANCELLED)
        yield from self.server_slot_wait.items(censored=False)
        yield from self.send_delay.items(censored=False)
        yield from self.server_queue.items(censored=False)
        yield from self._scalars(_LAST)
        if self.by_turn or (self.read_keys is not None and "by_turn" in self.read_keys):
            yield "by_turn", self.by_turn
        yield from self._scalars(_AFTER)

    def flat(self) -> dict[str, Any]:
        """The flat dict with Python values (infinities as floats), for reading by key."""
        out = dict(self._items())
        for k, v in self.extra.items():
            out.setdefault(k, v)
        return ordered(out, self.read_keys)

    def to_dict(self) -> dict[str, Any]:
        return {k: encode(v) for k, v in self.flat().items()}

    def value(self, metric: str, stat: str | None = None) -> Any:
        """METRIC.STAT as a threshold reads it (``value('ttft', 'p95')``, ``value('error_rate')``,
        ``value('ttft', 'p95_all')``, ``value('ttft', 'n')``); None when the summary has none."""
        return self.flat().get(key(metric, stat))

    def has(self, metric: str, stat: str | None = None) -> bool:
        """Whether the summary holds METRIC.STAT at all (a statistic with no data is held, as
        None): a run where no reply reasoned has no TTFO; a summary written before a count
        existed has no ``n_``."""
        return key(metric, stat) in self.flat()

    def within_share(self, metric: str, limit_ms: float) -> float | None:
        """The share of all requests that succeeded with METRIC <= limit_ms (None when the
        summary was not asked for it)."""
        k = within_key(metric, limit_ms)
        return next((w.share for w in self.within if w.key == k), None)

    def slim(self, keys: Sequence[str], **extra: Any) -> "Summary":
        """The same summary holding only ``keys`` (as None when it has none), and ``extra``:
        what a probe's path keeps of it."""
        flat = self.flat()
        return Summary.from_dict({**{k: flat.get(k) for k in keys}, **extra})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Summary":
        """A summary from its flat dict (run.json's, any version written so far)."""
        kw: dict[str, Any] = {}
        stats: dict[str, dict[str, Any]] = {}
        within: list[Within] = []
        extra: dict[str, Any] = {}
        types = _scalar_types()
        for k, v in data.items():
            f = _SCALAR_FIELDS.get(k)
            if f is not None:
                kw[f] = _number(v) if types[f] in (int, float) else v
                wrong = mismatch(types[f], kw[f])
                if wrong is not None:
                    raise WrongType(k, wrong)
                if f in ("errors", "error_statuses", "served_by", "error_samples"):
                    kw[f] = decode(types[f], v)
                continue
            if k == "by_turn" and isinstance(v, Mapping):
                kw["by_turn"] = {n: read_part(cls, t) for n, t in v.items()
                                 if isinstance(t, Mapping)}
                continue
            got = _metric_stat(k) if not k.startswith("within_") else None
            if k.startswith("within_") or got is not None:
                # a statistic or a share: a number, "inf", or nothing
                v = _number(v)
                wrong = mismatch(float, v)
                if wrong is not None:
                    raise WrongType(k, wrong)
            if k.startswith("within_"):
                within.append(Within.from_key(k, v))
                continue
            if got is None:
                extra[k] = v
                continue
            name, stat = got
            stats.setdefault(name, {})[stat] = v
        metrics = {name: _metric_from(name, st) for name, st in stats.items()}
        for f in ("completed", "failed"):
            kw[f] = int(kw.get(f) or 0)
        if "requests" not in data:
            kw["requests"] = kw["completed"] + kw["failed"]
        kw["requests"] = int(kw.get("requests") or 0)
        for f in ("errors", "error_statuses", "served_by"):
            kw[f] = dict(kw.get(f) or {})
        kw["error_samples"] = list(kw.get("error_samples") or [])
        kw["non_streaming"] = bool(kw.get("non_streaming"))
        return cls(**kw, **metrics, within=within, extra=extra, read_keys=tuple(data))


_SCALAR_TYPES: dict[str, Any] = {}


def _scalar_types() -> dict[str, Any]:
    """The annotation of each of the summary's scalar fields (what from_dict checks a value
    against), once."""
    if not _SCALAR_TYPES:
        _SCALAR_TYPES.update((sp.name, sp.type) for sp in specs(Summary))
    return _SCALAR_TYPES


# the sections of run.json's config that are objects (commands' config dicts)
_CONFIG_SECTIONS = frozenset(("target", "router", "direct", "load", "request", "timeouts", "ramp"))


def _at_key(key: str, fn: Any, *args: Any) -> Any:
    try:
        return fn(*args)
    except WrongType as exc:
        raise exc.under(key) from None


def _metric_stat(k: str) -> tuple[str, str] | None:
    """(metric, stat) of a distribution's key ('p95_all_ttft_ms' -> ('ttft', 'p95_all'))."""
    if k.startswith("n_"):
        rest = k[2:]
        if rest in METRICS:
            return rest, "n"
        if rest.endswith("_all") and rest[:-4] in METRICS:
            return rest[:-4], "n_all"
        return None
    m = _STAT.match(k)
    if m is None:
        return None
    stat, is_all, name, unit = m.group(1), bool(m.group(2)), m.group(3), m.group(4) or ""
    if name not in METRICS or unit != _unit(name):
        return None
    if is_all:
        return name, ("p50_all" if stat == "median" else f"{stat}_all")
    return name, stat


def _metric_from(name: str, stats: dict[str, Any]) -> Metric:
    kw: dict[str, Any] = {}
    pct: dict[float, Any] = {}
    pct_all: dict[float, Any] = {}
    for stat, v in stats.items():
        if stat == "n":
            kw["n"] = v
        elif stat == "n_all":
            kw["n_all"] = v
        elif stat.endswith("_all"):
            pct_all[float(stat[1:-4])] = v
        elif stat in STATS:
            kw[stat] = v
        else:
            pct[float(stat[1:])] = v
    return Metric(name=name, percentiles=pct, all_percentiles=pct_all, stats=tuple(stats), **kw)


# -- a step: its checks, its steady state ----------------------------------------------------

StepState = Literal["held", "over", "not enough data"]
HELD: StepState = "held"
OVER: StepState = "over"
NO_DATA: StepState = "not enough data"


@dataclass
class Check(Part):
    """One threshold against one summary (analysis.slo.check_all), or a check of the same shape
    a step fails on its own: no request in its hold window, an outage in it. ``ok`` is False
    also when the statistic is missing; ``reason`` says why, and ``insufficient`` whether that
    is for lack of requests (nothing failed: "not enough data") rather than failures."""

    threshold: str = ""
    ok: bool = False
    actual: float | None = None
    limit: float | None = None
    metric: str | None = None
    stat: str | None = None
    op: str | None = part(None, omit="none")
    reason: str | None = None
    insufficient: bool | None = part(None, omit="none")
    text: str | None = None
    # an outage (analysis.outages.step_check): the step measured a server that was not there
    outage: bool | None = part(None, omit="none")
    outages: list[JSONObject] | None = part(None, omit="none")
    start_s: float | None = part(None, omit="none")
    # --scenario: the traffic class whose threshold this is (None: the whole step's own check)
    traffic_class: str | None = part(None, omit="none")


@dataclass
class Steady(Part):
    """Whether a step had settled: its hold window's first half against its second
    (analysis.stepstats.steady_state)."""

    in_flight: list[float] = field(default_factory=list)
    ttft_p50_ms: list[float | None] = field(default_factory=lambda: [None, None])
    ttft_p95_ms: list[float | None] = field(default_factory=lambda: [None, None])
    p_value: float | None = None
    drifting: bool = False
    why: str | None = None


@dataclass
class ClassStep(Part):
    """One traffic class (``--scenario``) at one ramp step: its own load (``unit``: users, a
    whole number, or req/s), its thresholds' checks and state, the summary of its own requests
    that started in the step's hold, and its steady state. A class broke the step when its
    state is ``over``."""

    load: float = 0.0
    unit: str = "users"
    held: bool = False
    state: StepState = HELD
    checks: list[Check] = field(default_factory=list)
    unfinished: int = 0
    steady: Steady | None = None
    summary: Summary = field(default_factory=Summary)

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    def as_step(self, parent: "Step") -> "Step":
        """This class's view of the step, a Step of its own (the verdict's machinery reads
        one): the parent's index, load, window and monitor; its own checks and summary."""
        return Step(index=parent.index, load=parent.load, ramp_start=parent.ramp_start,
                    hold_start=parent.hold_start, hold_end=parent.hold_end, held=self.held,
                    state=self.state, checks=list(self.checks), monitor=parent.monitor,
                    unfinished=self.unfinished, steady=self.steady, summary=self.summary)


@dataclass
class Step(Part):
    """One load level of a ramp: its load (users, a whole number, or requests/s for an
    open-loop ramp), its hold window, whether it held its thresholds (``state``), the checks
    that say so, its summary (from the requests that started in the hold), the load
    generator's monitor and its steady state. With ``--scenario``, ``classes`` holds each
    traffic class's own part of it, and the step held only if every class did."""

    index: int = 0
    load: float = 0.0
    ramp_start: float | None = None
    hold_start: float | None = None
    hold_end: float | None = None
    held: bool = False
    state: StepState = HELD
    checks: list[Check] = field(default_factory=list)
    monitor: JSONObject = field(default_factory=dict)
    unfinished: int = 0
    steady: Steady | None = None
    summary: Summary = field(default_factory=Summary)
    classes: dict[str, ClassStep] = part(default_factory=dict, omit="empty")
    # the server's machine over the hold window (None: not sampled; analysis.telemetry)
    telemetry: Telemetry | None = part(None, omit="none")
    # the agent sessions that started in the hold, with all their calls (None: no agents;
    # analysis.sessions.step_sessions)
    sessions: Sessions | None = part(None, omit="none")

    def __post_init__(self) -> None:
        if self.read_keys is not None and "state" not in self.read_keys:
            # a run saved before the state existed: it follows from held
            self.state = HELD if self.held else OVER

    def derived(self) -> frozenset[str]:
        return frozenset({"state"}) if "state" not in (self.read_keys or ()) else frozenset()

    @property
    def users(self) -> float:
        """The step's load under the name a closed-loop ramp gives it."""
        return self.load

    def _repr_html_(self) -> str | None:
        """In Jupyter: its thresholds and its summary (llmbench/report/notebook.py)."""
        from llmbench.results.display import html_of
        return html_of("step", self)

    @property
    def failed_checks(self) -> list[Check]:
        return [c for c in self.checks if not c.ok]

    @property
    def drifting(self) -> bool:
        return bool(self.steady is not None and self.steady.drifting)


def last_held(steps: Sequence[Step]) -> Step | None:
    """The last step that held (its load is the ramp's answer)."""
    return next((s for s in reversed(steps) if s.held), None)


def deciding_step(steps: Sequence[Step]) -> Step | None:
    """The step the verdict explains and the exit code follows: the first step that broke
    after the last one that held (a step with too few requests broke nothing: it is that step
    only when no later one broke). None when nothing after the last held step broke or lacked
    data (every step held, or the ramp stopped there)."""
    steps = list(steps)
    top = last_held(steps)
    after = steps if top is None else steps[steps.index(top) + 1:]
    return (next((s for s in after if s.state == OVER), None)
            or next((s for s in after if s.state == NO_DATA), None))


def amount(load: float, unit: str = "users") -> str:
    """'1 user', '4 users', '2.5 req/s': a load with its unit, singular when it is one."""
    if unit == "users":
        return f"{load:g} user" + ("" if load == 1 else "s")
    return f"{load:g} {unit}"


def held_load(steps: Sequence[Step]) -> float:
    """The most users (or the highest rate) whose step held; 0 when none did."""
    return max((s.load for s in steps if s.held), default=0)


def ramp_code(steps: Sequence[Step], verdict_kind: str | None, expect: float | None = None,
              planned: int | None = None) -> int:
    """The exit code of a ramp that ran to its end, from the step its verdict explains
    (``deciding_step``: the first that broke after the last that held).

    A ramp is meant to break at some step: that is its answer, exit 0. It fails as a gate when
    it held fewer than --expect-users (1), or, without --expect-users, when no step held and one
    broke: no load level met the thresholds (99, k6's code for failed thresholds). A step with
    too few requests broke nothing: it is never a threshold failure. Only a step the load
    generator's own lag (or a buffering proxy) could have broken is "not trustworthy" (4); one
    with an outage in it measured no capacity (3)."""
    steps = list(steps)
    deciding = deciding_step(steps)
    reached_top = bool(steps) and all(s.held for s in steps) and (
        planned is None or len(steps) == planned)
    if deciding is not None and verdict_kind in ("load_generator", "buffered"):
        return EXIT_OVERLOADED       # the break is not the server's to be judged by
    if deciding is not None and verdict_kind == "outage":
        return EXIT_UNREACHABLE      # the server went away: no capacity was measured there
    if steps and all(s.state == NO_DATA for s in steps):
        return EXIT_NOT_JUDGED       # no answer: each step had too few requests, even held longer
    if expect is not None:
        return EXIT_EXPECTATION if held_load(steps) < expect and not reached_top else EXIT_OK
    if deciding is not None and last_held(steps) is None and deciding.state == OVER:
        return EXIT_THRESHOLD
    return EXIT_OK


def _repeat_code(rep: Mapping[str, Any], expect: float | None, planned: int | None) -> int:
    """One repeat's exit code from what run.json keeps of it (its steps, verdict, search)."""
    steps = [Step.from_dict(s) for s in rep.get("steps") or []]
    found = rep.get("search")
    if isinstance(found, Mapping):
        search = Search.from_dict(found)
        return search_code(search, ladder(steps, search), rep.get("verdict_kind"), expect)
    return ramp_code(steps, rep.get("verdict_kind"), expect, planned)


def ladder(steps: Sequence[Any], search: Search | None) -> list[Any]:
    """``Run.ladder`` from a run's steps and its search."""
    if search is None:
        return list(steps)
    by_index = {s.index: s for s in steps if isinstance(s, Step)}
    at: dict[float, Any] = {}
    for t in search.trials:
        st = by_index.get(t.index) if t.index is not None else None
        if st is not None and t.counted:
            at[float(st.load)] = st
    return [at[k] for k in sorted(at)]


def search_code(search: Search, ladder_steps: Sequence[Step], verdict_kind: str | None,
                expect: float | None = None) -> int:
    """A search's exit code: as a ramp's (``ramp_code`` over its ladder), with the limit it
    found as the load held (a load that broke its sustain did not hold). The load generator
    breaking a step is exit 4 whatever else held."""
    if search.stopped == "load_generator":
        return EXIT_OVERLOADED
    if expect is not None:
        return EXIT_EXPECTATION if search.limit < expect and search.stopped != "ceiling" \
            else EXIT_OK
    return ramp_code(ladder_steps, verdict_kind)


# -- the verdict -----------------------------------------------------------------------------

# every kind analysis.verdict.explain gives
VerdictKind = Literal["held", "none", "queuing", "saturation", "cache_bound", "errors", "outage",
                      "buffered", "not_enough_data", "load_generator", "network", "other"]


@dataclass
class Knee(Part):
    """Where between the last step that held and the first that broke the broken threshold is
    crossed (analysis.stepstats.knee): ``estimate`` and ``ci`` interpolated in load (a fraction,
    for the chart); for users, ``users`` and ``users_ci``, the whole users that hold. ``text``
    is what the verdict says (None: nothing beyond held and broke)."""

    threshold: str | None = None
    between: list[float] = field(default_factory=list)
    limit: float | None = part(None, omit="none")
    values: list[float | None] | None = part(None, omit="none")
    estimate: float | None = None
    ci: list[float] | None = None
    reason: str | None = None
    not_monotone_share: float | None = part(None, omit="none")
    users: int | None = part(None, omit="none")
    users_ci: list[int] | None = part(None, omit="none")
    text: str | None = None


def _analysed(v: "Verdict") -> bool:
    return v.kind != "none"


@dataclass
class ClassVerdict(Part):
    """One traffic class's own reading of the ramp: ``kind`` as a Verdict's (from its own
    requests: queuing, saturation...), ``text`` what became of it ("held at every step", "broke
    at 8 users: TTFT p95 was 2.55 s, over 2 s"), ``held_load`` its own load at the last step
    that held overall, ``broke`` whether it broke the deciding step."""

    kind: str = "held"
    text: str = ""
    broke: bool = False
    held_load: float | None = None
    unit: str = "users"
    evidence: list[str] = field(default_factory=list)


@dataclass
class Compared(Part):
    """One threshold's statistic of a class, in the broken step (``mixed``: with every class)
    and run alone at the same load (``alone``); ``added``: what the others added
    (mixed - alone, in the statistic's units: ms for latencies)."""

    threshold: str = ""
    metric: str | None = None
    stat: str | None = None
    mixed: float | None = None
    alone: float | None = None
    added: float | None = None
    limit: float | None = None
    ok_mixed: bool | None = None
    ok_alone: bool | None = None


@dataclass
class IsolatedClass(Part):
    """A traffic class run alone (``--isolate``) at the load it had in the broken step: its
    window (``step``: its own step index in requests.jsonl), whether it held alone, its checks
    and summary alone, each threshold mixed against alone, and the sentence that says it."""

    name: str = ""
    load: float = 0.0
    unit: str = "users"
    step: int = 0
    ramp_start: float | None = None
    hold_start: float | None = None
    hold_end: float | None = None
    held: bool = False
    state: StepState = HELD
    broke_mixed: bool = False
    checks: list[Check] = field(default_factory=list)
    compared: list[Compared] = field(default_factory=list)
    summary: Summary = field(default_factory=Summary)
    text: str = ""


@dataclass
class Isolation(Part):
    """``--isolate``: each traffic class run alone at its load in the first step that broke
    (``of_step``, at ``load`` in the ramp's unit), and what that says: ``cause`` the classes
    that break even alone (their own requests are the limit), ``victims`` those that broke
    only with the others present; ``text`` the sentences. ``note``: why it did not run."""

    of_step: int | None = None
    load: float | None = None
    classes: list[IsolatedClass] = field(default_factory=list)
    cause: list[str] = field(default_factory=list)
    victims: list[str] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    note: str | None = part(None, omit="none")


@dataclass
class Verdict(Part):
    """Why a ramp stopped (or that every step held): ``kind``, ``text`` the sentence the console
    prints (run.json's "result"), ``evidence`` and ``advice`` the lines under it; the figures it
    stands on (``compared``: the steps; TTFT and ITL at each; Little's law; the server's own
    view) and the knee between the steps."""

    text: str = part("", key="result")
    kind: VerdictKind = "held"
    evidence: list[str] = field(default_factory=list)
    advice: list[str] = field(default_factory=list)
    knee: Knee | None = part(None, when=_analysed)
    drifting: list[float] = part(default_factory=list, when=_analysed)
    steady_note: list[str | None] = part(default_factory=list, when=_analysed)
    compared: JSONObject | None = part(None, when=_analysed)
    ttft_p95_ms: list[float | None] = part(default_factory=list, when=_analysed)
    # the median gap at the two steps (folders before the one percentile rule: "itl_median_ms",
    # kept as read in ``extra``)
    itl_p50_ms: list[float | None] = part(default_factory=list, when=_analysed)
    itl_p95_ms: list[float | None] = part(default_factory=list, when=_analysed)
    itl_grew: bool = part(False, when=_analysed)
    ttft_grew: bool = part(False, when=_analysed)
    served_at_once: JSONObject | None = part(None, when=_analysed)
    server: JSONObject | None = part(None, when=_analysed)
    slots_estimate: int | None = part(None, omit="none")
    generator_cause: str | None = part(None, omit="none")
    # what the server's machine named as the cause (analysis.telemetry.verdict_part)
    cause: str | None = part(None, omit="none")
    # kind "saturation" whose slots were full too: the share of TTFT p95 spent waiting for a
    # slot (the console's "Why:" names both causes from it)
    slot_wait_share: float | None = part(None, omit="none")
    interrupted: bool | None = part(None, omit="none")
    incomplete: bool | None = part(None, omit="none")
    # the KV cache as the limit (kind "cache_bound"; analysis.cachebound)
    cache: CacheBound | None = part(None, omit="none")
    # --scenario: each traffic class's own reading, and the classes that broke the deciding
    # step (with --isolate: the classes that break even alone, analysis.classes)
    classes: dict[str, ClassVerdict] = part(default_factory=dict, omit="empty")
    blamed: list[str] = part(default_factory=list, omit="empty")

    @property
    def headline(self) -> str:
        """The one sentence the result states, said once (run.json's "result"): what every
        renderer prints as its answer. The knee between the steps is a clause of it, never a
        second number."""
        return self.text


# -- a probe's step ----------------------------------------------------------------------------

@dataclass
class Overhead(Part):
    """Router minus direct for one statistic of a probe step, with its 95 % interval."""

    router_ms: float | None = None
    direct_ms: float | None = None
    overhead_ms: float | None = None
    ci_ms: list[float] | None = None
    significant: bool = False


@dataclass
class ProbeStep(Part):
    """One step of ``llmbench probe``: the same users through the router and straight to the
    backend, each path's (slim) summary, and the overhead of four statistics."""

    index: int = 0
    users: int = 0
    router: Summary = field(default_factory=Summary)
    direct: Summary = field(default_factory=Summary)
    ttft_p50: Overhead = field(default_factory=Overhead)
    ttft_p95: Overhead = field(default_factory=Overhead)
    e2el_p50: Overhead = field(default_factory=Overhead)
    itl_p50: Overhead = field(default_factory=Overhead)
    monitor: JSONObject = field(default_factory=dict)

    def overhead(self, name: str) -> Overhead:
        """'ttft_p50', 'ttft_p95', 'e2el_p50' or 'itl_p50'."""
        return getattr(self, name)


# -- a sweep ---------------------------------------------------------------------------------

@dataclass
class StepBrief(Part):
    """A ramp step as sweep.json keeps it: its load, held, and a few numbers of its summary
    (flat, beside them)."""

    load: float = 0.0
    held: bool | None = None
    summary: Summary = field(default_factory=Summary)

    def to_dict(self) -> dict[str, Any]:
        return ordered({"load": self.load, "held": self.held, **self.summary.to_dict(),
                        **self.extra}, self.read_keys)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "StepBrief":
        rest = {k: v for k, v in data.items() if k not in ("load", "held")}
        return cls(load=data.get("load", 0.0), held=data.get("held"),
                   summary=Summary.from_dict(rest), read_keys=tuple(data))


def _probed(s: "ServerState") -> bool:
    return s.samples is not None


@dataclass
class ServerState(Part):
    """A sweep setting's server in its own words during the ramp (commands.sweep.server_state,
    from the probe's samples in server.jsonl): the most it ran and kept waiting at once, its
    slots, KV cache and memory; or, when the probe found nothing, only why (``note``)."""

    kind: str | None = None
    note: str | None = part(None, omit="none")
    samples: int | None = part(None, when=_probed)
    max_running: float | None = part(None, when=_probed)
    max_waiting: float | None = part(None, when=_probed)
    slots: float | None = part(None, when=_probed)
    max_kv_cache_usage: float | None = part(None, when=_probed)
    max_vram_bytes: float | None = part(None, when=_probed)
    max_ram_bytes: float | None = part(None, when=_probed)
    preemptions: float | None = part(None, when=_probed)
    models_loaded: list[str] | None = part(None, when=_probed)


@dataclass
class SweepSetting(Part):
    """One setting of a sweep: its server's fate (``status``), the ramp's folder and answer
    (``held``, its interval over repeats, its verdict and knee), its steps in brief and the
    server's own state."""

    setting: dict[str, str] = field(default_factory=dict)
    name: str = ""
    status: str = "starting"
    run_dir: str | None = None
    log: str | None = None
    held: float | None = None
    held_interval: JSONObject | None = None
    exit_code: int | None = None
    error: str | None = None
    log_tail: list[str] | None = None
    server_pid: int | None = part(None, omit="none")
    ready_s: float | None = part(None, omit="none")
    verdict: str | None = part(None, omit="none")
    verdict_kind: str | None = part(None, omit="none")
    knee: Knee | None = part(None, omit="none")
    steps: list[StepBrief] | None = part(None, omit="none")
    server_state: ServerState | None = part(None, omit="none")
    server_exit_code: int | None = part(None, omit="none")
    # what the server said it was
    server: ServerIdentity | None = part(None, omit="none")
    # ramp --find: the setting's search (its limit is ``held``)
    search: Search | None = part(None, omit="none")
    # the step at the sweep's common load, once the sweep finished (``finished``)
    at_common_load: StepBrief | None = part(None, when=lambda s: s.finished)
    finished: bool = field(default=False, repr=False, compare=False,
                           metadata={"internal": True})


@dataclass
class ServerProbe(Part):
    """What the server's own metrics probe found (``--server-probe``): its kind (None when it
    found nothing), why not (``note``), how many samples (in server.jsonl), and a run's view
    of them (``verdict.server_view``)."""

    kind: str | None = None
    note: str | None = None
    samples: int = 0
    view: JSONObject | None = part(None, omit="none")


# -- the run ---------------------------------------------------------------------------------

RunKind = Literal["run", "ramp", "probe"]


def _measured(r: "Run") -> bool:
    return r.measured


def _run_body(r: "Run") -> bool:
    return r.measured and r.kind == "run"


def _ramp_body(r: "Run") -> bool:
    return r.measured and r.kind == "ramp"


def _probe_body(r: "Run") -> bool:
    return r.measured and r.kind == "probe"


def _ramp_steps(r: "Run") -> bool:
    return r.measured and r.kind == "ramp"


def _outages_body(r: "Run") -> bool:
    return r.measured and r.kind in ("run", "ramp")


def _one_probe(r: "Run") -> bool:
    return r.measured and r.kind != "probe"


@dataclass
class RunState(Part):
    """What a run is and where it stands: its kind, its status ("running", "complete",
    "partial", "failed", "interrupted"), when it started (wall clock, and the perf clock its
    records count from), its labels, the process writing it (``pid``, while running), why it
    measured nothing (``error``), a rebuilt summary's note and time, and the exit code a
    command saved. Written as run.json's top-level keys (an inline part of ``Run``)."""

    schema_version: int = SCHEMA_VERSION
    kind: RunKind = "run"
    status: str = "complete"
    started_at: float = 0.0
    t0_perf: float | None = part(None, omit="none")
    labels: dict[str, str] = field(default_factory=dict)
    pid: int | None = part(None, omit="none")
    error: str | None = part(None, omit="none")
    # a killed run whose summary ``report`` rebuilt from requests.jsonl
    note: str | None = part(None, omit="none")
    rebuilt_at: float | None = part(None, omit="none")
    finished_at: float | None = part(None, omit="none")
    exit_code: int | None = part(None, omit="none")


@dataclass
class Router(Part):
    """A probe's findings about the router in front of the backends: where the overhead is
    bound (``bound``), the spread over backends (``backends``; the router's own counters when
    no reply named one, and what that means: ``unidentified``), each path's server probe."""

    bound: JSONObject | None = part(None, key="router_bound", when=_probe_body)
    backends: JSONObject | None = part(None, when=_probe_body)
    counters: JSONValue = part(None, key="router_counters", when=_probe_body)
    unidentified: str | None = part(None, key="backends_unidentified", omit="none")
    # each path's server probe: {"router": ServerProbe, "direct": ...} (run.json's server_probe)
    server_probes: dict[str, ServerProbe] = part(default_factory=dict, key="server_probe",
                                                 when=_probe_body, shared=True)
    # the probe's steps (run.json's steps): each load on both paths
    steps: list[ProbeStep] = part(default_factory=list, key="steps", when=_probe_body,
                                  shared=True)


@dataclass
class Findings(Part):
    """Everything a run found beside its summary, steps and verdict, each a typed member
    (None or empty: not found, not asked): the load generator's monitor, outages, the client's
    view (output length, streaming, resends, prompt cache), the thresholds, traffic classes,
    agent sessions, the server and its machine, traces, the prefix cache, the network floor,
    worker processes, repeats, the router (a probe), abandonment, isolation and cache resets.
    Written as run.json's top-level keys (an inline part of ``Run``)."""

    monitor: JSONObject | None = part(None, when=_run_body)
    router: Router = part(default_factory=Router, inline=True)
    user_changes: list[JSONValue] = part(default_factory=list, when=_ramp_body)
    outages: list[JSONObject] = part(default_factory=list, when=_outages_body)
    # what every measured run.json carries about the client's view (analysis.checks)
    output_length: JSONObject | None = part(None, when=_measured)
    not_streamed: int = part(0, when=_measured)
    connection_resends: int = part(0, when=_measured)
    # how much of the prompts the server took from its prefix cache (analysis.checks)
    prompt_cache: PromptCache | None = part(None, when=_measured)
    thresholds: list[Check] = part(default_factory=list, when=_run_body)
    # run --scenario: each traffic class at its part of the load, its own summary and checks
    # (its checks are among ``thresholds`` too, tagged with the class)
    classes: dict[str, ClassStep] = part(default_factory=dict, omit="empty")
    # agent sessions over the run (None: no request belonged to one; analysis.sessions)
    sessions: Sessions | None = part(None, omit="none")
    # what the server's metrics probe found (a probe has one per path: router.server_probes)
    server_probe: ServerProbe | None = part(default_factory=ServerProbe, when=_one_probe,
                                            shared=True)
    # what the server was, and its machine over the whole run (None: not known, not sampled)
    server: ServerIdentity | None = part(None, omit="none")
    run_telemetry: RunTelemetry | None = part(None, key="telemetry", omit="none")
    closed_loop_note: str | None = part(None, when=_ramp_body)
    trace: JSONObject | None = part(None, omit="none")
    prefix_cache: JSONObject | None = part(None, omit="none")
    # the network's round trip measured apart from the server, before and after the load
    # (client/floor.py; analysis/network.py judges its share of TTFT)
    network: NetworkFloor | None = part(None, omit="none")
    workers: JSONObject | None = part(None, omit="none")
    repeat: JSONObject | None = part(None, omit="none")
    repeats: JSONObject | None = part(None, omit="none")
    # --abandon: what the users cancelled and whether the server let go (results.abandon)
    abandonment: Abandonment | None = part(None, omit="none")
    # --scenario --isolate: each class alone at its load in the first step that broke
    isolation: Isolation | None = part(None, omit="none")
    # --reset-cache: each time the server's prompt cache was emptied, and whether it took
    cache_resets: list[CacheReset] = part(default_factory=list, omit="empty")

    @property
    def telemetry(self) -> Telemetry | None:
        """The server's machine over the whole run (run.json's telemetry.window)."""
        return self.run_telemetry.window if self.run_telemetry is not None else None


# run.json's keys in the order llmbench has always written them (the parts' fields are
# grouped by what they hold; the file keeps one order)
RUN_KEYS = ("schema_version", "kind", "status", "started_at", "t0_perf", "labels", "config",
            "workload", "environment", "pid", "error", "monitor", "summary", "steps", "verdict",
            "search", "router_bound", "backends", "router_counters", "user_changes", "outages",
            "output_length", "not_streamed", "connection_resends", "prompt_cache", "thresholds",
            "classes", "sessions", "server_probe", "server", "telemetry", "closed_loop_note",
            "trace", "prefix_cache", "network", "workers", "repeat", "repeats",
            "backends_unidentified", "abandonment", "isolation", "cache_resets", "note",
            "rebuilt_at", "finished_at", "exit_code")


@dataclass
class Run(Part):
    """One run folder's run.json, typed, made of parts: what it is and where it stands
    (``state``), the configuration it ran with (``config``, ``workload``), the machine that
    ran it (``environment``), a ``run``'s ``summary``, a ramp's ``steps`` and ``verdict`` (and
    ``--find``'s ``search``), and everything else it found (``findings``; a probe's steps are
    ``findings.router.steps``). ``path`` is the folder (None for a run not written to disk);
    ``requests()`` reads its requests.jsonl. ``exit_code`` is the command line's for it,
    ``passed`` whether that is 0.

    A run the pipeline makes writes the keys of its kind; ``measured=False`` is the run.json of
    a run that has not measured anything yet (status "running", with its ``pid``) or never will
    (a failed preflight, with its ``error``). A sweep is its own type (``Sweep``)."""

    KEY_ORDER: ClassVar[tuple[str, ...]] = RUN_KEYS

    state: RunState = part(default_factory=RunState, inline=True)
    config: JSONObject = field(default_factory=dict)
    workload: JSONObject | None = part(None, omit="none")
    environment: JSONObject = field(default_factory=dict)
    summary: Summary | None = part(None, when=_run_body)
    steps: list[Step] = part(default_factory=list, when=_ramp_steps, shared=True)
    verdict: Verdict | None = part(None, when=_ramp_body)
    # ramp --find: the search for the limit (its steps are ``steps``, in the order tried)
    search: Search | None = part(None, omit="none")
    findings: Findings = part(default_factory=Findings, inline=True)
    # each repeat's exit code, when the ramp ran them here (run.json has their steps only)
    repeat_codes: list[int] | None = field(default=None, repr=False, compare=False,
                                           metadata={"internal": True})
    path: Path | None = field(default=None, repr=False, compare=False,
                              metadata={"internal": True})
    # the run is still in progress: who writes it (results.lock.writer_text), read from its
    # folder's lock, never saved: a reader reports what has finished and leaves run.json be
    live_writer: str | None = field(default=None, repr=False, compare=False,
                                    metadata={"internal": True})
    measured: bool = field(default=True, repr=False, compare=False,
                           metadata={"internal": True})
    # interrupted by a signal: known in memory (run.json says "partial")
    interrupted: bool | None = field(default=None, repr=False, compare=False,
                                     metadata={"internal": True})

    @property
    def kind(self) -> RunKind:
        """"run", "ramp" or "probe" (``state.kind``)."""
        return self.state.kind

    @property
    def status(self) -> str:
        """How the run stands (``state.status``)."""
        return self.state.status

    # -- what a run says -----------------------------------------------------------------------
    @property
    def partial(self) -> bool:
        """True when the run was interrupted or cut short: its numbers cover part of the plan."""
        return self.status != "complete"

    @property
    def held(self) -> float | None:
        """A ramp's answer: the most users (or the highest rate) whose step held; None when no
        step held or this is not a ramp. A search's is the limit it found (a load that held
        a short hold and broke its sustain is not it)."""
        if self.search is not None:
            return self.search.limit if self.search.limit else None
        loads = [s.load for s in self.steps if s.held]
        return max(loads) if loads else None

    def ladder(self) -> list[Step]:
        """The steps as a ramp that climbed: for a search, each load's last counted step
        (a drifting step run again counts once; the confirmation is its load's), by load; for
        a ramp over fixed steps, its steps. What the verdict, the charts against load and
        compare read."""
        return ladder(self.steps, self.search)

    @property
    def held_interval(self) -> JSONObject | None:
        """A ramp run with ``--repeat``: users held over the repeats (median, min, max)."""
        got = (self.findings.repeats or {}).get("held")
        return got if isinstance(got, dict) else None

    @property
    def load_config(self) -> JSONObject:
        """A run's load level as configured (concurrency, rate, arrival, requests...)."""
        return _section(self.config, "load")

    @property
    def load_level(self) -> float | None:
        """A run's load in one figure: its concurrency, else its rate."""
        got = self.load_config.get("concurrency") or self.load_config.get("rate")
        return got if isinstance(got, (int, float)) and not isinstance(got, bool) else None

    @property
    def thresholds_asked(self) -> list[str]:
        """A ramp's thresholds, as given."""
        return [str(t) for t in _list(_section(self.config, "ramp").get("thresholds"))]

    @property
    def repeats_per_ramp(self) -> int:
        """A ramp's ``--repeat``, 1 when not given."""
        got = _section(self.config, "ramp").get("repeat", 1)
        return got if isinstance(got, int) else 1

    @property
    def load_unit(self) -> str:
        """What a ramp's load counts: "users", or "req/s" for ``--by rate``."""
        by = _section(self.config, "ramp").get("by", "users")
        return "users" if by == "users" else "req/s"

    @property
    def passed(self) -> bool:
        """Whether the command line exits 0 for this run (``exit_code``)."""
        return self.exit_code == EXIT_OK

    @property
    def exit_code(self) -> int:
        """The command line's exit code for this run, from what run.json holds (the one rule
        ``llmbench run`` and ``ramp`` exit with): 6 when its results could not be written, 130
        when it was interrupted, 4 when a worker process died; a ``run`` 99 when a threshold
        failed; a ``ramp`` by its deciding step (``ramp_code``, with its --expect-users). A
        partial run read back from a folder counts as interrupted (a lost worker says so in
        run.json). A run that measured nothing (a failed preflight) exits 1 here: which of 3,
        5 or 2 the command gave is in its error line, not in run.json."""
        f = self.findings
        if self.status in ("failed", "interrupted") and self.summary is None and not (
                self.steps or f.router.steps):
            return EXIT_INTERRUPTED if self.status == "interrupted" else 1
        if self.status == "failed":
            return EXIT_WRITE
        if self.interrupted:
            return EXIT_INTERRUPTED
        if (f.workers or {}).get("crashed"):
            return EXIT_OVERLOADED
        if self.status == "partial" and self.interrupted is None and self._interrupted():
            return EXIT_INTERRUPTED
        if self.kind == "run":
            return EXIT_THRESHOLD if any(not c.ok for c in f.thresholds) else EXIT_OK
        if self.kind == "ramp":
            ramp = _section(self.config, "ramp")
            want = ramp.get("expect")
            expect = float(want) if isinstance(want, (int, float)) else None
            planned = len(_list(ramp.get("steps"))) or None
            rep = _int(f.repeats.get("representative") if f.repeats else None, 1) - 1
            if f.repeats and self.repeat_codes:
                codes = self.repeat_codes
                return (EXIT_OVERLOADED if EXIT_OVERLOADED in codes else
                        codes[rep] if 0 <= rep < len(codes) else codes[-1])
            if f.repeats:
                codes = [_repeat_code(r, expect, planned) for r in _runs(f.repeats)]
                if EXIT_OVERLOADED in codes:
                    return EXIT_OVERLOADED
                if 0 <= rep < len(codes):
                    return codes[rep]
            if self.search is not None:
                return search_code(self.search, self.ladder(),
                                   self.verdict.kind if self.verdict else None, expect)
            return ramp_code(self.steps, self.verdict.kind if self.verdict else None, expect,
                             planned)
        if self.kind == "probe" and f.router.steps and not any(
                s.ttft_p50.ci_ms for s in f.router.steps):
            return EXIT_NOT_JUDGED      # no step had enough requests on both paths to compare
        return EXIT_OK

    def _interrupted(self) -> bool:
        """A partial run stopped by a signal (not cut short by a later repeat's failure)."""
        if self.findings.repeats:
            return any(r.get("status") == "partial" for r in _runs(self.findings.repeats))
        return True

    # -- its folder ------------------------------------------------------------------------------
    def requests_path(self) -> Path | None:
        return None if self.path is None else self.path / "requests.jsonl"

    def iter_request_rows(self) -> Iterator[dict[str, Any]]:
        """requests.jsonl, one dict per request, as written (token times in microseconds)."""
        p = self.requests_path()
        if p is None or not p.exists():
            return iter(())
        return _jsonl_rows(p)

    def requests(self) -> "pandas.DataFrame":
        """A pandas DataFrame, one row per request (pandas comes with ``datasets``)."""
        from llmbench.results.table import request_frame
        return request_frame(self)

    def latencies(self) -> "Latencies":
        """Per-request latencies, as columns (``results.latencies.Latencies``): what reports
        and compare read beside the summaries."""
        from llmbench.results.latencies import read_latencies
        p = self.requests_path()
        return read_latencies(p if p is not None else Path("/nonexistent/requests.jsonl"))

    def file_name(self) -> str:
        return "run.json"

    def save(self, folder: str | Path | None = None) -> dict[str, Any]:
        """Write run.json into ``folder`` (default: ``path``), atomically; returns the dict
        written. No folder: nothing is written."""
        data = self.to_dict()
        where = Path(folder) if folder is not None else self.path
        if where is not None:
            write_json(where / self.file_name(), data)
            self.path = where
        return data

    @classmethod
    def load(cls, folder: str | Path) -> "Run":
        """The run in ``folder``, as its run.json holds it, every schema version written so
        far; a RunFolderError, one line, for anything else (a sweep folder: ``load_result``)."""
        folder = Path(folder)
        f = folder / "run.json"
        if f.is_file():
            return cls.from_dict(read_object(f, "run.json"), folder)
        if (folder / "sweep.json").is_file():
            raise RunFolderError(f"{folder}: a sweep folder, not a run's; give one of its "
                                 "settings' run folders")
        raise RunFolderError(f"{folder}: no run.json here; give a run folder made by llmbench "
                             "run/ramp")

    def _repr_html_(self) -> str | None:
        """In Jupyter: the verdict, the summary table and the main charts, inline SVG, no
        network (llmbench/report/notebook.py)."""
        from llmbench.results.display import html_of
        return html_of("run", self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str | Path | None = None) -> "Run":
        """The run a run.json holds; a value of another kind than its key holds is one
        RunFolderError naming the file and the key, not a raw exception later."""
        try:
            return cls._from_dict(data, path)
        except WrongType as exc:
            where = f"{Path(path) / 'run.json'}: " if path is not None else "run.json: "
            raise RunFolderError(f"{where}{exc.key}: {exc.what}; fix or remove that key") \
                from None

    @classmethod
    def _from_dict(cls, data: Mapping[str, Any], path: str | Path | None = None) -> "Run":
        d = dict(data)
        _version(d, path)
        kind = d.get("kind") or "run"
        steps = d.get("steps")
        if ("steps" in d and not isinstance(steps, list)) or (
                kind == "ramp" and "steps" not in d
                and d.get("status") not in ("running", "failed", "interrupted")):
            raise RunFolderError(f"{path}: run.json has no list of steps; it was cut short or "
                                 "edited by hand")
        run = super().from_dict(d)
        for k, v in run.config.items():
            # the config's sections (target, load, request, ramp...) are objects, its leaves
            # anything: a section of another kind would trip every reader of it
            if k in _CONFIG_SECTIONS and v is not None and not isinstance(v, Mapping):
                raise WrongType(f"config.{k}", f"{kind_of(v)} where an object belongs")
        probe = d.get("server_probe")
        if isinstance(probe, Mapping):
            if kind == "probe":
                run.findings.server_probe = None
                run.findings.router.server_probes = {
                    k: _at_key(f"server_probe.{k}", read_part, ServerProbe, v)
                    for k, v in probe.items() if isinstance(v, Mapping)}
                if any(not isinstance(v, Mapping) for v in probe.values()):
                    raise WrongType("server_probe", "a path's probe that is not an object")
            else:
                run.findings.server_probe = _at_key("server_probe", read_part, ServerProbe,
                                                    probe)
        elif "server_probe" in d:
            run.findings.server_probe = None
            if probe is not None:
                raise WrongType("server_probe", f"{kind_of(probe)} where an object belongs")
        if isinstance(steps, list):
            for i, st in enumerate(steps):
                if not isinstance(st, dict) or (kind != "probe" and not isinstance(
                        st.get("summary"), dict)):
                    raise RunFolderError(f"{path}: step {i + 1} in run.json has no summary; it "
                                         "was cut short or edited by hand")
            if kind == "probe":
                run.findings.router.steps = [_at_key(f"steps.{i + 1}", read_part, ProbeStep, st)
                                             for i, st in enumerate(steps)]
            else:
                run.steps = [_at_key(f"steps.{i + 1}", read_part, Step, st)
                             for i, st in enumerate(steps)]
        if isinstance(run.extra.get("interrupted"), bool):
            run.interrupted = run.extra["interrupted"]      # kept as read, and known
        run.path = None if path is None else Path(path)
        return run


@dataclass
class RunResult(Run):
    """What ``llmbench.run(...)`` returns: a ``run`` that measured, so its ``summary`` is
    always there (``run.summary.ttft.p50`` with no None check); written and read as any Run."""

    summary: Summary = part(default_factory=Summary, when=_run_body)

    @classmethod
    def of(cls, run: Run) -> "RunResult":
        """``run`` as a RunResult (the same parts, not copies); a run with no summary is a
        ValueError (the API raises before: a run that measured nothing is an error)."""
        if run.summary is None:
            raise ValueError("a run with no summary measured nothing")
        got = cls(**{f.name: getattr(run, f.name) for f in fields(Run)})
        return got


def _version(d: Mapping[str, Any], path: str | Path | None) -> None:
    """A schema version this llmbench reads (none: a folder from before it existed, 1)."""
    raw = d.get("schema_version")
    version = 1 if raw is None else raw
    if not isinstance(version, int) or version not in READABLE_SCHEMAS:
        where = f"{path}/run.json: " if path is not None else ""
        raise RunFolderError(f"{where}schema version {raw} is not the {SCHEMA_VERSION} this "
                             "llmbench reads; re-run it or use a matching llmbench version")


def _section(config: JSONObject, name: str) -> JSONObject:
    """A section of a run's config (``load``, ``ramp``...), empty when absent."""
    got = config.get(name)
    return got if isinstance(got, dict) else {}


def _list(v: JSONValue) -> list[JSONValue]:
    return v if isinstance(v, list) else []


def _int(v: JSONValue, default: int) -> int:
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v else default


def _runs(repeats: JSONObject) -> list[JSONObject]:
    """``--repeat``'s runs, as run.json's repeats.runs holds them."""
    return [r for r in _list(repeats.get("runs")) if isinstance(r, dict)]


# -- the sweep -------------------------------------------------------------------------------

@dataclass
class Sweep(Part):
    """A sweep folder's sweep.json, typed: the settings it tried (``settings``, ``grid``), each
    setting's ramp and fate (``results``), and the answer (``answer``, ``best``; a tie broken at
    the sweep's common load: ``common_load``, ``tie_break``, and how the servers differed:
    ``server_differences``). ``interrupted``: stopped by a signal; ``resumed_at``: when
    ``--resume`` took it up again; ``exit_code`` the command line's."""

    schema_version: int = SCHEMA_VERSION
    kind: Literal["sweep"] = "sweep"
    status: str = "complete"
    started_at: float = 0.0
    settings: dict[str, list[str]] | None = None
    grid: list[dict[str, str]] | None = None
    labels: dict[str, str] = field(default_factory=dict)
    config: JSONObject = field(default_factory=dict)
    unit: str | None = None
    results: list[SweepSetting] = field(default_factory=list)
    environment: JSONObject = field(default_factory=dict)
    pid: int | None = part(None, omit="none")
    error: str | None = part(None, omit="none")
    answer: str | None = part(None, omit="none")
    best: dict[str, str] | None = part(None, when=lambda r: r.answer is not None)
    interrupted: bool | None = part(None, omit="none")
    finished_at: float | None = part(None, omit="none")
    resumed_at: list[float] | None = part(None, omit="none")
    exit_code_saved: int | None = part(None, key="exit_code", omit="none")
    common_load: float | None = part(None, when=lambda r: r.tie_break is not None)
    server_differences: list[JSONObject] | None = part(None, omit="none")
    tie_break: list[JSONObject] | None = part(None, omit="none")
    path: Path | None = field(default=None, repr=False, compare=False,
                              metadata={"internal": True})

    KEY_ORDER: ClassVar[tuple[str, ...]] = (
        "schema_version", "kind", "status", "started_at", "t0_perf", "labels", "config",
        "workload", "environment", "pid", "error", "settings", "grid", "unit", "results",
        "answer", "best", "interrupted", "finished_at", "resumed_at", "exit_code",
        "common_load", "server_differences", "tie_break")

    @property
    def partial(self) -> bool:
        return self.status != "complete"

    @property
    def exit_code(self) -> int:
        """The sweep command's exit code, as sweep.json saved it (0 when it did not)."""
        return self.exit_code_saved if self.exit_code_saved is not None else EXIT_OK

    @property
    def passed(self) -> bool:
        return self.exit_code == EXIT_OK

    @property
    def load_unit(self) -> str:
        """What the ramps' load counts: "users" or "req/s"."""
        return self.unit or "users"

    @property
    def thresholds_asked(self) -> list[str]:
        """The sweep's ramps' thresholds, as given."""
        return [str(t) for t in _list(_section(self.config, "ramp").get("thresholds"))]

    @property
    def repeats_per_ramp(self) -> int:
        """The sweep's ramps' ``--repeat``, 1 when not given."""
        got = _section(self.config, "ramp").get("repeat", 1)
        return got if isinstance(got, int) else 1

    def file_name(self) -> str:
        return "sweep.json"

    def save(self, folder: str | Path | None = None) -> dict[str, Any]:
        """Write sweep.json into ``folder`` (default: ``path``), atomically; returns the dict
        written. No folder: nothing is written."""
        data = self.to_dict()
        where = Path(folder) if folder is not None else self.path
        if where is not None:
            write_json(where / "sweep.json", data)
            self.path = where
        return data

    @classmethod
    def load(cls, folder: str | Path) -> "Sweep":
        """The sweep in ``folder``; a RunFolderError, one line, for anything else."""
        folder = Path(folder)
        f = folder / "sweep.json"
        if not f.is_file():
            raise RunFolderError(f"{folder}: no sweep.json here; give a folder made by "
                                 "llmbench sweep")
        return cls.from_dict(read_object(f, "sweep.json"), folder)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], path: str | Path | None = None) -> "Sweep":
        """The sweep a sweep.json holds; a value of the wrong kind is one RunFolderError."""
        try:
            _version(data, path)
            sweep = super().from_dict(data)
        except WrongType as exc:
            where = f"{Path(path) / 'sweep.json'}: " if path is not None else "sweep.json: "
            raise RunFolderError(f"{where}{exc.key}: {exc.what}; fix or remove that key") \
                from None
        sweep.path = None if path is None else Path(path)
        return sweep

    def _repr_html_(self) -> str | None:
        """In Jupyter: the sweep's answer and its settings."""
        from llmbench.results.display import html_of
        return html_of("run", self)


def load_result(folder: str | Path) -> "Run | Sweep":
    """What ``folder`` holds: its run (run.json), else its sweep (sweep.json)."""
    folder = Path(folder)
    if not (folder / "run.json").is_file() and (folder / "sweep.json").is_file():
        return Sweep.load(folder)
    return Run.load(folder)

"""The summary of a run or a step: the table of its keys (vLLM's names), a
distribution (``Metric``) and the ``Summary`` itself (part of the results contract, see
``llmbench.results.schema``)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping, Sequence

from llmbench.results.contract import (JSONObject, Part, WrongType, decode, encode, mismatch,
                                       ordered, read_part, specs)

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
    ``stats`` names the statistics the summary holds, in the order it writes them (the send
    delay has only a mean, p50, p99 and max)."""

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
        return _metric_from(name, {"n" if k == "count" else k: _number(v)
                                   for k, v in stats.items()})

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
# has no tool_call_share at all) or "with:<field>" (when that field is not None). Each key is
# its field's name, but ``duration`` (``duration_s``).
def _rows(rule: str, *keys: str) -> tuple[tuple[str, str, str], ...]:
    return tuple(("duration_s" if k == "duration" else k, k, rule) for k in keys)


_HEAD = _rows("always", "completed", "failed", "duration", "total_input_tokens",
              "total_output_tokens", "request_throughput", "request_goodput",
              "output_throughput", "total_token_throughput", "max_output_tokens_per_s",
              "max_concurrent_requests")
_REASONING = _rows("set", "requests_with_reasoning", "total_reasoning_tokens",
                   "answered_after_reasoning")
_TOOLS = _rows("set", "requests_with_tool_calls", "tool_call_share")
_STRUCTURED = _rows("set", "structured_checked", "valid_output_share", "total_embeddings",
                    "embeddings_throughput", "input_throughput")
_TAIL = _rows("always", "requests", "completed_share", "error_rate", "errors",
              "error_statuses", "error_samples", "stalls", "stall_threshold_s",
              "requests_with_stalls", "output_tokens_source", "non_streaming",
              "stream_bunching", "served_by") + _rows("set", "backends")
_CANCELLED = _rows("set", "cancelled", "cancelled_waiting", "cancel_rate")
# cached_prompt_share is written beside cached_reported, a share of None included (no prompt
# tokens told)
_LAST = _rows("set", "cached_prompt_tokens", "cached_reported") + _rows(
    "with:cached_reported", "cached_prompt_share")
_AFTER = _rows("set", "peak_in_flight_requests")
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
    # --abandon (None when no user gave up): requests the users cancelled (not in ``failed``
    # or ``error_rate``), of them those cancelled before any token, their share of all requests
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
        for name in LATENCY + EXTRA_LATENCY + REASONING + COUNTS:
            yield from getattr(self, name).items(censored=False)
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
        types = {sp.name: sp.type for sp in specs(cls)}    # what a value is checked against
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


# the sections of run.json's config that are objects (commands' config dicts)
_CONFIG_SECTIONS = frozenset(("target", "router", "direct", "load", "request", "timeouts", "ramp"))


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

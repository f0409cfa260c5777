"""A run's requests as a table: one row per line of requests.jsonl, every scalar field a column.

``request_rows(run)`` yields plain dicts (the CSV writer needs nothing more); ``request_frame(run)``
is the same rows as a typed pandas DataFrame (``Run.requests()``; pandas comes with
``datasets``). Times are named with their unit: ``*_ms`` durations, ``*_s`` seconds since the
run's start (run.json's ``t0_perf``). Token event times are summarised (``token_events``,
``itl_mean_ms``, ``itl_max_ms``), not dumped as lists.

Nothing is dropped: warm-up requests and those our own interrupt cut short are rows with
``measured`` False, which is exactly the set the run's summary leaves out (records.measured);
``df[df.measured]`` is what the summary's figures stand on.

Per-request latencies use the one definition the summary uses (llmbench.analysis.metrics.
per_request, which llmbench.results.latencies reads the same way from the JSON; METRICS.md):
a request has a TTFT and an E2EL only when it succeeded and carried token events.
"""

from __future__ import annotations

import math
from typing import Any, Iterator

from llmbench.records.phases import PHASES, new_connection, phases_ms
from llmbench.records.record import check_line, Record

# (column, kind): the table's columns in order; kind is the pandas dtype family
COLUMNS: tuple[tuple[str, str], ...] = (
    ("request_id", "str"),
    ("measured", "bool"),          # counted by the summary: not warm-up, not interrupted
    ("ok", "bool"),
    ("status", "int"),
    ("error_kind", "str"),
    ("error", "str"),              # the server's text (first 200 characters of a body)
    ("step", "int"),
    ("user", "int"),
    ("conversation", "str"),
    ("turn", "int"),
    ("path", "str"),               # probe: router or direct
    ("worker", "int"),
    ("served_by", "str"),          # the server's own header: replica, backend
    ("warmup", "bool"),
    ("stream", "bool"),
    ("scheduled_s", "float"),      # seconds since the run's start
    ("start_s", "float"),
    ("done_s", "float"),
    ("client_queue_ms", "float"),  # start - scheduled (the load generator's lag)
    ("send_delay_ms", "float"),
    ("ttft_ms", "float"),
    ("ttfo_ms", "float"),          # first answer token (reasoning models); = TTFT otherwise
    ("e2el_ms", "float"),
    ("tpot_ms", "float"),
    ("token_events", "int"),
    ("itl_mean_ms", "float"),
    ("itl_max_ms", "float"),
    ("prompt_tokens", "int"),
    ("prompt_tokens_source", "str"),
    ("output_tokens", "int"),
    ("output_tokens_source", "str"),
    ("cached_tokens", "int"),
    ("reasoning_tokens", "int"),
    ("max_tokens", "int"),
    ("finish_reason", "str"),
    ("server_queue_ms", "float"),
    ("backoff_ms", "float"),
    ("retries", "int"),
    ("note", "str"),
    # the request's phases (records/phases.py): empty where it had none (a reused connection
    # has no dns/connect/tls; runs before they were stamped have none at all)
    ("new_connection", "bool?"),
    *((f"{name}_ms", "float") for name in PHASES),
)
COLUMN_NAMES = tuple(name for name, _ in COLUMNS)


def _t0(run: Any, rows: list[dict[str, Any]]) -> float:
    t0 = run.data.get("t0_perf") if hasattr(run, "data") else None
    if isinstance(t0, (int, float)) and math.isfinite(t0):
        return float(t0)
    return min((float(r["scheduled"]) for r in rows if "scheduled" in r), default=0.0)


def request_row(rec: Record, t0: float) -> dict[str, Any]:
    """One request as a flat dict of the COLUMNS."""
    times = rec.token_times
    timed = bool(rec.ok) and bool(times)           # the summary's successful requests
    gaps = rec.itls
    ttft, e2el, tpot, ttfo = (rec.ttft, rec.e2el, rec.tpot, rec.ttfo) if timed else \
        (None, None, None, None)
    send_delay = rec.send_delay
    phases = phases_ms(rec) or {}
    computed = {
        "measured": rec.measured,
        "ok": bool(rec.ok),
        "warmup": bool(rec.warmup),
        "stream": bool(rec.stream),
        "scheduled_s": rec.scheduled - t0,
        "start_s": rec.start - t0,
        "done_s": rec.done - t0 if rec.done else None,
        "client_queue_ms": rec.client_queue * 1000.0,
        "send_delay_ms": send_delay * 1000.0 if send_delay is not None else None,
        # the Record's definitions (records/definitions.py), successful requests only
        "ttft_ms": ttft * 1000.0 if ttft is not None else None,
        "ttfo_ms": ttfo * 1000.0 if ttfo is not None else None,
        "e2el_ms": e2el * 1000.0 if e2el is not None else None,
        "tpot_ms": tpot * 1000.0 if tpot is not None else None,
        "token_events": len(times),
        "itl_mean_ms": sum(gaps) / len(gaps) * 1000.0 if timed and gaps else None,
        "itl_max_ms": max(gaps) * 1000.0 if timed and gaps else None,
        "new_connection": new_connection(rec),
        **{f"{name}_ms": phases.get(name) for name in PHASES},
    }
    # every other column is the record's field of that name, as it holds it
    return {n: computed[n] if n in computed else getattr(rec, n) for n in COLUMN_NAMES}


def request_rows(run: Any) -> Iterator[dict[str, Any]]:
    """One plain dict per request of the run folder's requests.jsonl, in file order. ``run``:
    a results.schema.Run (not imported here: ``Run.requests`` imports this module). A torn
    line (a crash mid-write) is skipped."""
    raw = list(run.iter_request_rows())
    t0 = _t0(run, raw)
    for d in raw:
        try:
            check_line(d)
            rec = Record.from_json(d)
        except (TypeError, ValueError):
            continue                     # not a record llmbench wrote
        yield request_row(rec, t0)


def request_frame(run: Any) -> Any:
    """The requests as a pandas DataFrame, its columns typed by ``typed_frame``."""
    return typed_frame(request_rows(run), COLUMNS)


def typed_frame(rows: Any, columns: Any) -> Any:
    """Rows (dicts) as a pandas DataFrame whose columns have the kinds ``columns`` names:
    "int" nullable Int64, "float" float64 (NaN: no value), "bool", "bool?" nullable boolean,
    anything else a string. The per-request table and export's summary rows both use it."""
    import pandas as pd
    df = pd.DataFrame.from_records(list(rows), columns=[n for n, _ in columns])
    for name, kind in columns:
        if kind == "int":
            df[name] = pd.array(df[name].tolist(), dtype="Int64")
        elif kind == "float":
            df[name] = pd.to_numeric(df[name], errors="coerce").astype("float64")
        elif kind == "bool":
            df[name] = df[name].astype(bool)
        elif kind == "bool?":
            df[name] = pd.array(df[name].tolist(), dtype="boolean")
        else:
            df[name] = df[name].astype("string")
    return df

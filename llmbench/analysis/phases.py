"""The phases of a run's requests (records/phases.py), summarised: p50/p95/p99 of each.

Over the successful measured requests whose transport stamped them. The connection phases
(blocked, dns, connect, tls) stand on the requests that opened a connection only: with
connections kept alive that is a handful per user, and their percentiles say what a new
connection costs, not what the average request paid (``new_connections`` says how many).
Computed on the store's columns (no Record per request): the first byte is a column, the
connection stamps are sparse (new connections only), the token times are the store's.
In run.json as docs/whole-path.md says; absent when no request was stamped (older runs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Mapping

import numpy as np

from llmbench.analysis import percentile
from llmbench.records import definitions
from llmbench.records.phases import PHASES
from llmbench.records.store import RecordStore

PHASE_PERCENTILES = (50.0, 95.0, 99.0)
KEY = "phases_ms"


@dataclass(frozen=True)
class PhaseStat:
    """One phase over a run, in ms."""
    name: str
    count: int
    mean: float | None
    p50: float | None
    p95: float | None
    p99: float | None
    max: float | None

    def to_dict(self) -> dict[str, float | int | None]:
        return {k: v for k, v in asdict(self).items() if k != "name"}


def _stat(name: str, ms: np.ndarray) -> PhaseStat:
    if not len(ms):
        return PhaseStat(name, 0, None, None, None, None, None)
    ms = np.sort(ms)
    p50, p95, p99 = (percentile.of_sorted(ms, p) for p in PHASE_PERCENTILES)
    return PhaseStat(name, len(ms), float(ms.mean()), p50, p95, p99, float(ms[-1]))


def phase_values(st: RecordStore, ok: np.ndarray) -> dict[str, np.ndarray]:
    """Each phase's values in ms over the rows ``ok`` (a mask) that were stamped; {} when
    none was (the definitions: records/phases.py, which this equals request by request)."""
    fb, has = st.ints("first_byte_us")
    sent = st.view("sent")
    idx = np.nonzero(np.asarray(has) & np.asarray(ok, dtype=bool) & ~np.isnan(sent))[0]
    if not len(idx):
        return {}
    fb = np.asarray(fb)[idx]
    start = st.view("start")[idx]
    sent_us = np.rint(definitions.send_delay(start, sent[idx]) * 1e6)   # offset_us's
    at = np.zeros(len(idx))
    out: dict[str, list[float] | np.ndarray] = {"blocked": [], "dns": [], "connect": [],
                                                "tls": []}
    extras = st.extras()
    if extras:
        where = {int(r): k for k, r in enumerate(idx)}
        for r, e in extras.items():
            k = where.get(r)
            conn = e.get("conn_us")
            if k is None or conn is None:
                continue
            pos = 0
            for name, stamp in (("blocked", conn), ("dns", e.get("dns_us")),
                                ("connect", e.get("connect_us")), ("tls", e.get("tls_us"))):
                if stamp is not None:
                    out[name].append((stamp - pos) / 1000.0)   # type: ignore[union-attr]
                    pos = stamp
            at[k] = pos
    off = st.offsets()
    n_tok = off[idx + 1] - off[idx]
    tok = n_tok > 0
    first = st.token_us_take(off[idx][tok], 0, len(st)).astype(np.float64)
    last = st.token_us_take(off[idx + 1][tok] - 1, 0, len(st)).astype(np.float64)
    out["send"] = (sent_us - at) / 1000.0
    out["wait"] = (fb - sent_us) / 1000.0
    out["first_token"] = (first - fb[tok]) / 1000.0
    out["decode"] = (last - first) / 1000.0
    return {name: np.asarray(out[name], dtype=np.float64) for name in PHASES}


def summarize_phases(st: RecordStore, ok: np.ndarray) -> dict[str, object] | None:
    """The summary's ``phases_ms`` (and ``new_connections``), or None when nothing was
    stamped."""
    values = phase_values(st, ok)
    if not values:
        return None
    return {"new_connections": len(values["connect"]),
            **{name: _stat(name, ms).to_dict() for name, ms in values.items()}}


def read_phases(summary_extra: Mapping[str, object]) -> list[PhaseStat]:
    """The phases a summary holds (from run.json), in PHASES order; [] when none."""
    raw = summary_extra.get(KEY)
    if not isinstance(raw, Mapping):
        return []
    out = []
    for name in PHASES:
        d = raw.get(name)
        if isinstance(d, Mapping) and d.get("count"):
            out.append(PhaseStat(name, int(d["count"]), *(
                (float(d[k]) if isinstance(d.get(k), (int, float)) else None)
                for k in ("mean", "p50", "p95", "p99", "max"))))
    return out

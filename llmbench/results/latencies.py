"""What a report or a comparison reads from a run folder beside run.json (``Run.load``): the
per-request latencies (``Run.latencies()``).

Reading latencies straight from the JSON lines (not whole Records) keeps a 100,000-request
report in seconds.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from llmbench.records import definitions
from llmbench.records.definitions import is_measured
from llmbench.records.record import JsonLines, json_lines


@dataclass
class Latencies:
    """Columns, one row per measured request (warm-up and interrupted ones left out)."""

    step: np.ndarray          # -1 when none
    path: list[str | None]
    start: np.ndarray
    ok: np.ndarray
    ttft_ms: np.ndarray       # nan when failed
    e2el_ms: np.ndarray
    out_tokens: np.ndarray
    # every request's ITLs one after another, as the integer µs gaps of requests.jsonl's
    # token_us (int32: half of float64 ms, 28 MB for a million 8-token replies; float64 µs for
    # a file whose gaps int32 cannot hold), and how many each request has: a million-request
    # run reads in without an array per request
    itl_flat_us: np.ndarray
    itl_count: np.ndarray

    @property
    def itl_flat_ms(self) -> np.ndarray:
        """Every ITL in ms (a new float64 array: (b - a) / 1000 exactly as from the µs)."""
        return self.itl_flat_us / 1000.0

    @property
    def itl_ms(self) -> list[np.ndarray]:
        """Per request (a small run's view)."""
        return np.split(self.itl_flat_ms, np.cumsum(self.itl_count)[:-1]) if len(self.itl_count) \
            else []

    def select(self, mask: np.ndarray) -> "Latencies":
        idx = np.nonzero(mask)[0]
        off = np.concatenate(([0], np.cumsum(self.itl_count)))
        k = self.itl_count[idx]
        pos = np.repeat(off[idx] - np.concatenate(([0], np.cumsum(k)[:-1])), k) + \
            np.arange(int(k.sum()))
        return Latencies(self.step[idx], [self.path[i] for i in idx], self.start[idx],
                         self.ok[idx], self.ttft_ms[idx], self.e2el_ms[idx], self.out_tokens[idx],
                         self.itl_flat_us[pos.astype(np.int64)], k)

    def window(self, step: int, start: float | None = None, end: float | None = None) -> "Latencies":
        """Step ``step``'s requests; with ``start`` and ``end``, its window (the ones that
        started in its hold: ``definitions.started_in``; warm-up is never read in)."""
        mask = self.step == step
        if start is not None and end is not None:
            mask &= definitions.started_in(self.start, start, end)
        return self.select(mask)

    def itls(self, sample: int | None = None) -> np.ndarray:
        """The successful requests' ITLs in ms; ``sample``: at most that many of them, a seeded
        random draw taken before they are made floats (a chart of a million-request run's 7
        million ITLs needs neither all of them nor 56 MB of floats)."""
        us = self.itl_flat_us
        if not self.ok.all():
            us = us[np.repeat(self.ok, self.itl_count)]
        if sample is not None and len(us) > sample:
            us = us[np.random.default_rng(0).integers(0, len(us), sample)]
        return us / 1000.0


def read_latencies(path: Path) -> Latencies:
    # typed arrays, not lists of Python numbers: a long run has millions of values
    steps, starts, ttfts, e2els, outs = array("q"), array("d"), array("d"), array("d"), array("d")
    oks, counts, itls = array("B"), array("q"), array("i")
    paths: list[str | None] = []
    if path.exists():
        lines = JsonLines(path)         # a torn or damaged line: skipped and counted
        with open(path, "rb") as fh:
            for line in fh:
                d = lines.decode(line)
                if not isinstance(d, dict) or not _readable(d):
                    continue        # as records.iter_records: a line llmbench did not write
                if not is_measured(d.get("warmup"), d.get("error_kind")):
                    continue
                # the definitions (records/definitions.py) on the line as written: token_us
                # are the token events' µs after start, so start is 0 here, and the values
                # are exact (Record computes them from start + us / 1e6: equal to 1e-9 ms,
                # checked by tests/unit/records/test_record_store.py)
                us = d.get("token_us") or []
                ok = bool(d.get("ok")) and bool(us)
                steps.append(d.get("step") if d.get("step") is not None else -1)
                paths.append(d.get("path"))
                starts.append(d.get("start", 0.0))
                oks.append(ok)
                ttfts.append(definitions.ttft(0, us[0]) / 1000 if ok else np.nan)
                e2els.append(definitions.e2el(0, us[-1]) / 1000 if ok else np.nan)
                outs.append(d.get("output_tokens") or 0)
                if ok and len(us) > 1:
                    gaps = definitions.itls(us)
                    try:
                        itls.extend(gaps)
                    except (OverflowError, TypeError):
                        # a reply of over 35 minutes, or a file not written by llmbench
                        # (fractional µs): the gaps as float64 from here on
                        itls = array("d", itls)
                        itls.extend(gaps)
                    counts.append(len(us) - 1)
                else:
                    counts.append(0)
    return Latencies(np.asarray(steps, dtype=int), paths, np.asarray(starts, dtype=float),
                     np.asarray(oks, dtype=bool), np.asarray(ttfts, dtype=float),
                     np.asarray(e2els, dtype=float), np.asarray(outs, dtype=float),
                     np.frombuffer(itls, dtype=np.int32 if itls.typecode == "i" else np.float64)
                     if len(itls) else np.zeros(0, np.int32),
                     np.asarray(counts, dtype=np.int64))


def _num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and v == v and abs(v) < 1e300


def _readable(d: dict[str, Any]) -> bool:
    """A request line's fields read here are of their kinds (a file edited by hand or written
    by another tool may hold a text for a time, a list for a count): else it is skipped."""
    us = d.get("token_us")
    return ((d.get("step") is None or isinstance(d["step"], int) and not isinstance(d["step"], bool)
             and abs(d["step"]) < 1 << 62)
            and (d.get("path") is None or isinstance(d["path"], str))
            and ("start" not in d or _num(d["start"]))
            and (d.get("output_tokens") is None or _num(d["output_tokens"]))
            and (us is None or isinstance(us, list) and all(_num(x) for x in us)))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return list(json_lines(path))      # a torn or damaged line: skipped and counted

"""What a report or a comparison reads from a run folder: run.json (schema-checked) and
per-request latencies.

Reading latencies straight from the JSON lines (not whole Records) keeps a 100,000-request
report in seconds.
"""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .results import load_run


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
    # every request's ITLs one after another (ms), and
    # how many each request has: a million-request run reads in without an array per request
    itl_flat_ms: np.ndarray
    itl_count: np.ndarray

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
                         self.itl_flat_ms[pos.astype(np.int64)], k)

    def window(self, step: int, start: float | None = None, end: float | None = None) -> "Latencies":
        mask = self.step == step
        if start is not None and end is not None:
            mask &= (self.start >= start) & (self.start < end)
        return self.select(mask)

    def itls(self) -> np.ndarray:
        if self.ok.all():                  # no copy: a million-request run's ITLs are 56 MB
            return self.itl_flat_ms.astype(float, copy=False)
        return self.itl_flat_ms[np.repeat(self.ok, self.itl_count)].astype(float)


def read_latencies(path: Path) -> Latencies:
    # typed arrays, not lists of Python numbers: a long run has millions of values
    steps, starts, ttfts, e2els, outs = array("q"), array("d"), array("d"), array("d"), array("d")
    oks, counts, itls = array("B"), array("q"), array("d")
    paths: list[str | None] = []
    if path.exists():
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                try:
                    d = json.loads(line)
                except json.JSONDecodeError:
                    continue            # a torn last line from a crash
                if d.get("warmup") or d.get("error_kind") == "interrupted":
                    continue
                us = d.get("token_us") or []
                ok = bool(d.get("ok")) and bool(us)
                steps.append(d.get("step") if d.get("step") is not None else -1)
                paths.append(d.get("path"))
                starts.append(d.get("start", 0.0))
                oks.append(ok)
                ttfts.append(us[0] / 1000 if ok else np.nan)
                e2els.append(us[-1] / 1000 if ok else np.nan)
                outs.append(d.get("output_tokens") or 0)
                if ok and len(us) > 1:
                    itls.extend([(b - a) / 1000 for a, b in zip(us, us[1:])])
                    counts.append(len(us) - 1)
                else:
                    counts.append(0)
    return Latencies(np.asarray(steps, dtype=int), paths, np.asarray(starts, dtype=float),
                     np.asarray(oks, dtype=bool), np.asarray(ttfts, dtype=float),
                     np.asarray(e2els, dtype=float), np.asarray(outs, dtype=float),
                     np.asarray(itls, dtype=float), np.asarray(counts, dtype=np.int64))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out


def load(run_dir: str | Path) -> tuple[dict[str, Any], Latencies]:
    run_dir = Path(run_dir)
    run = load_run(run_dir)
    return run, read_latencies(run_dir / "requests.jsonl")

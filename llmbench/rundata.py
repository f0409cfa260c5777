"""What a report or a comparison reads from a run folder: run.json (schema-checked) and
per-request latencies.

Reading latencies straight from the JSON lines (not whole Records) keeps a 100,000-request
report in seconds.
"""

from __future__ import annotations

import json
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
    itl_ms: list[np.ndarray]  # per request

    def select(self, mask: np.ndarray) -> "Latencies":
        idx = np.nonzero(mask)[0]
        return Latencies(self.step[idx], [self.path[i] for i in idx], self.start[idx],
                         self.ok[idx], self.ttft_ms[idx], self.e2el_ms[idx], self.out_tokens[idx],
                         [self.itl_ms[i] for i in idx])

    def window(self, step: int, start: float | None = None, end: float | None = None) -> "Latencies":
        mask = self.step == step
        if start is not None and end is not None:
            mask &= (self.start >= start) & (self.start < end)
        return self.select(mask)

    def itls(self) -> np.ndarray:
        parts = [g for g, ok in zip(self.itl_ms, self.ok) if ok and len(g)]
        return np.concatenate(parts) if parts else np.array([])


def read_latencies(path: Path) -> Latencies:
    steps, paths, starts, oks, ttfts, e2els, outs, itls = [], [], [], [], [], [], [], []
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
                itls.append(np.diff(np.asarray(us, dtype=float)) / 1000 if ok and len(us) > 1
                            else np.array([]))
    return Latencies(np.asarray(steps, dtype=int), paths, np.asarray(starts, dtype=float),
                     np.asarray(oks, dtype=bool), np.asarray(ttfts, dtype=float),
                     np.asarray(e2els, dtype=float), np.asarray(outs, dtype=float), itls)


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

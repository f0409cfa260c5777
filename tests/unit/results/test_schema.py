"""The typed results contract (llmbench/results/schema.py) reads every run folder we have with
the same numbers as the dicts run.json holds: every key of every summary (a run's, each ramp
step's, each turn split's) is reachable as a typed field, and gives the dict's value."""

from __future__ import annotations

import json
import math
from dataclasses import fields
from pathlib import Path

import pytest

from llmbench.results.schema import COUNTS, METRICS, Run, Summary, key
from tests.helpers import ROOT

FOLDERS = sorted(p.parent for p in [*ROOT.glob("results/examples/*/*/run.json"),
                                    *Path("/work/shared/real-runs").glob("*/run.json")])

# keys a summary holds that are the contract's named fields, under another name
_RENAMED = {"duration": "duration_s"}
# keys kept in ``data`` only (descriptive, not numbers a consumer reads through the contract)
_DATA_ONLY: set[str] = set()


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b and type(a) is type(b) or (isinstance(a, (int, float)) and not
                                              isinstance(a, bool) and a == b)


def _typed(s: Summary, k: str):
    """The contract's value for summary key ``k``; KeyError when nothing typed holds it."""
    if k.startswith("within_"):
        return next(w.share for w in s.within if w.key == k)
    if k == "by_turn":
        return s.by_turn
    if k.startswith("n_") and k[2:] in METRICS:
        return s.metric(k[2:]).n
    if k.startswith("n_") and k.endswith("_all") and k[2:-4] in METRICS:
        return s.metric(k[2:-4]).n_all
    for name in METRICS:
        m = s.metric(name)
        for stat in ("mean", "median", "std", "min", "max"):
            if key(name, stat) == k:
                return getattr(m, stat)
        if name in COUNTS:
            if k.startswith("p") and k.endswith(f"_{name}"):
                return m.percentiles[float(k[1:-len(name) - 1])]
            continue
        if k == f"median_all_{name}_ms":
            return m.all_percentiles[50.0]
        if k.startswith("p") and k.endswith(f"_all_{name}_ms"):
            return m.all_percentiles[float(k[1:-len(name) - 8])]
        if k.startswith("p") and k.endswith(f"_{name}_ms"):
            try:
                return m.percentiles[float(k[1:-len(name) - 4])]
            except ValueError:
                continue
    name = _RENAMED.get(k, k)
    if name in {f.name for f in fields(Summary)} and name != "data":
        return getattr(s, name)
    raise KeyError(k)


def _summaries(run: Run):
    if run.summary is not None:
        yield "summary", run.summary
    for st in run.steps:
        yield f"step {st.index}", st.summary


def test_there_are_folders_to_read():
    assert len(FOLDERS) >= 5


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_every_summary_key_reads_the_same_through_the_contract(folder):
    data = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    run = Run.from_dict(data, folder)
    assert run.kind == data["kind"] and run.status == data.get("status")
    assert len(run.steps) == len(data.get("steps") or [])
    untyped = set()
    checked = 0
    for where, s in _summaries(run):
        todo = [(where, s)] + [(f"{where} {name} turns", t) for name, t in s.by_turn.items()]
        for at, sm in todo:
            for k, v in sm.flat().items():
                if k in _DATA_ONLY:
                    continue
                try:
                    got = _typed(sm, k)
                except KeyError:
                    untyped.add(k)
                    continue
                assert _same(got, v), (at, k, got, v)
                checked += 1
    assert not untyped, f"summary keys the contract has no field for: {sorted(untyped)}"
    assert checked > 50


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_steps_and_the_threshold_reading(folder):
    """A step's load and held, and ``Summary.value`` (what a threshold reads) equal the dict."""
    data = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    run = Run.from_dict(data, folder)
    for st, raw in zip(run.steps, data.get("steps") or []):
        assert st.load == raw["load"] and st.held == raw["held"]
        for metric, stat in (("ttft", "p95"), ("ttft", "p50"), ("itl", "p95"), ("e2el", "p99"),
                             ("ttft", "p95_all"), ("errors", None), ("error_rate", None),
                             ("output_throughput", None), ("tok_s", None)):
            assert st.summary.value(metric, stat) == raw["summary"].get(key(metric, stat))
        assert st.summary.ttft.p95 == raw["summary"]["p95_ttft_ms"]
        assert st.summary.itl.p50 == raw["summary"]["median_itl_ms"]
    if run.kind == "ramp":
        held = [s["load"] for s in data["steps"] if s["held"]]
        assert run.held == (max(held) if held else None)
        assert run.verdict is not None and run.verdict.kind == data["verdict"]["kind"]


def test_a_summary_from_its_dict():
    s = Summary.from_dict({"completed": 3, "failed": 1, "p95_ttft_ms": 12.5,
                           "within_ttft_2000ms": 0.75, "median_all_ttft_ms": 5.0})
    assert s.ttft.p95 == 12.5 and s.requests == 4
    assert s.within_share("ttft", 2000.0) == 0.75 and s.within[0].limit == "2000ms"
    assert s.ttft.all_percentiles == {50.0: 5.0} and s.has("ttft", "p95")
    assert not s.has("ttfo", "p95") and s.ttfo.p95 is None
    # it writes back what it read, no more: no "requests" the file did not hold
    assert s.to_dict() == {"completed": 3, "failed": 1, "p95_ttft_ms": 12.5,
                           "within_ttft_2000ms": 0.75, "median_all_ttft_ms": 5.0}


def test_a_fresh_summary_of_every_kind_of_record_is_typed_whole():
    """What summarize writes today (reasoning, backends, server timings, cached tokens, send
    delay, within shares, goodput, turns): every key has its typed field, with its value."""
    from llmbench.analysis import metrics
    from tests.helpers.records import varied
    s = metrics.summarize(varied(400, 2), goodput_slo_ms={"ttft": 40.0},
                          within=[("ttft", 30.0), ("itl", 10.0)],
                          percentiles=(50.0, 90.0, 95.0, 99.0, 99.9))
    raw = s.flat()
    assert Summary.from_dict(s.to_dict()) == s
    assert s.requests_with_reasoning and s.backends and s.by_turn and s.within
    assert s.server_slot_wait.p95 is not None and s.send_delay.n
    for sm in (s, *s.by_turn.values()):
        untyped = []
        for k, v in sm.flat().items():
            try:
                got = _typed(sm, k)
            except KeyError:
                untyped.append(k)
                continue
            assert _same(got, v), (k, got, v)
        assert not untyped, untyped
    assert s.ttft.at(99.9) == raw["p99.9_ttft_ms"] and s.value("ttft", "p99.9") == raw["p99.9_ttft_ms"]

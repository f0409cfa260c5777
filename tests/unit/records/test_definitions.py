"""The one definition of each per-request figure (llmbench/records/definitions.py): the same
function on a Record's floats and on columns gives the same bits, every consumer computes the
figures through it, and nothing re-derives them from ``first_token`` / ``end``."""

import json
import re

import numpy as np

from llmbench.analysis import backends, metrics
from llmbench.records import definitions as d
from llmbench.records.record import Record
from llmbench.records.store import RecordStore
from llmbench.results.latencies import read_latencies
from tests.helpers import ROOT


def records(n=200, seed=5):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        sched = 1000.0 + i * 0.05
        start = sched + rng.uniform(0.0, 0.01)
        k = int(rng.integers(1, 9))
        times = sorted(float(t) for t in start + rng.uniform(0.01, 0.3) +
                       np.cumsum(rng.uniform(0.0005, 0.02, k)))
        r = Record(f"r{i}", scheduled=sched, start=start, token_times=times, ok=i % 9 != 0,
                   first_token=times[0], end=times[-1], done=times[-1] + 1e-4,
                   output_tokens=k + int(i % 3 == 0), sent=start + 1e-4 if i % 4 else None,
                   step=i % 4, warmup=i % 17 == 0, served_by="only",
                   error_kind="interrupted" if i % 23 == 0 else None)
        out.append(r)
    return out


def on_disk(r):
    return Record.from_json(json.loads(json.dumps(r.to_json())))


def test_one_function_on_floats_and_on_columns():
    """Row i of the column form equals the Record's value, bit for bit."""
    recs = [on_disk(r) for r in records()]
    start = np.array([r.start for r in recs])
    sched = np.array([r.scheduled for r in recs])
    first = np.array([r.token_times[0] for r in recs])
    last = np.array([r.token_times[-1] for r in recs])
    n_out = np.array([r.output_tokens for r in recs])
    cols = {"ttft": d.ttft(start, first), "e2el": d.e2el(start, last),
            "e2el_from_schedule": d.e2el_from_schedule(sched, last),
            "client_queue": d.client_queue(sched, start.copy())}
    has = d.has_tpot(n_out)
    tpot = d.tpot(first[has], last[has], n_out[has])
    for name, col in cols.items():
        assert [getattr(r, name) for r in recs] == col.tolist(), name
    assert [r.tpot for r in recs if r.tpot is not None] == tpot.tolist()
    for r in recs:
        assert r.itls == d.itls(np.array(r.token_times)).tolist() == d.itls(r.token_times)
        assert r.send_delay == (None if r.sent is None else r.sent - r.start)
    # a request held back by nothing has a queue of 0, never below
    assert d.client_queue(5.0, 4.0) == 0.0
    assert d.client_queue(np.array([5.0, 1.0]), np.array([4.0, 3.0])).tolist() == [0.0, 2.0]


def test_measured_and_the_step_window_on_records_and_on_the_store():
    recs = records()
    store = RecordStore.of(recs)
    want = [r.request_id for r in recs if not r.warmup and r.error_kind != "interrupted"]
    assert [r.request_id for r in recs if r.measured] == want
    assert [recs[i].request_id for i in np.nonzero(store.measured_mask())[0]] == want
    assert RecordStore.of(recs[1:6]).measured_mask().all()     # no "interrupted" string at all
    # a request that timed out while llmbench itself was frozen is not the server's either
    recs[7].error_kind, recs[7].ok = "client_stall", False
    assert not recs[7].measured and not RecordStore.of(recs).measured_mask()[7]
    assert RecordStore.of(recs).measured_mask().tolist() == [r.measured for r in recs]
    hold_start, hold_end = recs[40].start, recs[160].start
    for step in range(4):
        by_hand = [r.request_id for r in recs if r.step == step and not r.warmup
                   and hold_start <= r.start < hold_end]
        assert by_hand
        assert [r.request_id for r in d.window(recs, step, hold_start, hold_end)] == by_hand
        assert [r.request_id for r in d.window(store, step, hold_start, hold_end)] == by_hand
        assert [r.request_id for r in store.in_window(step, hold_start, hold_end)] == by_hand
    # a request that started exactly at the end of the hold belongs to the next window
    assert d.started_in(2.0, 1.0, 2.0) is False and d.started_in(1.0, 1.0, 2.0) is True


def test_latencies_from_the_file_are_the_definitions_at_start_zero(tmp_path):
    recs = records()
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in recs))
    lat = read_latencies(path)
    kept = [r for r in recs if r.measured]
    for r, ttft, e2el in zip(kept, lat.ttft_ms, lat.e2el_ms):
        us = r.to_json()["token_us"]
        if r.ok:
            assert ttft == d.ttft(0, us[0]) / 1000 and e2el == d.e2el(0, us[-1]) / 1000
            assert abs(ttft - on_disk(r).ttft * 1000.0) < 1e-6
        else:
            assert np.isnan(ttft)


def test_a_backends_ttft_is_the_summarys():
    """One backend served everything: its TTFT p50 is the run's median TTFT, bit for bit (it
    was taken from ``first_token``, which keeps bits the stored token times do not)."""
    store = RecordStore.of(records())
    s = metrics.summarize(store)
    b = backends.backends(store)["backends"]["only"]
    assert b["ttft_p50_ms"] == s.ttft.median
    assert b["itl_p50_ms"] is not None


# what a re-derivation looks like: a latency computed from the clock fields by hand
REDERIVED = re.compile(
    r"first_token\s*-\s*\w+\.start|token_times\[0\]\s*-|times\[0\]\s*-\s*\w+\.start"
    r"|times\[-1\]\s*-\s*\w+\.(start|scheduled)|\.end\s*-\s*\w+\.start|\.sent\s*-\s*\w+\.start"
    r"|\.start\s*-\s*\w+\.scheduled|warmup or \w+\.error_kind ==|error_kind != \"interrupted\""
    r"|first_tool\"\]\s*-")
# a percentile computed by numpy outside the one module (the mock's fit of a server model, in
# the layer below analysis, takes medians and nearest-rank quantiles of its own: not figures
# llmbench reports)
PERCENTILE = re.compile(r"np\.(percentile|nanpercentile|quantile|nanquantile|median)\(")
OWN_STATISTICS = ("llmbench/analysis/percentile.py", "llmbench/mock_server/fit.py")
# lines that read like a re-derivation but measure no request: (path, the line as written)
NOT_A_REQUEST = {
    # a telemetry window's length (perf_counter seconds of a step's hold or the run), not E2EL
    ("llmbench/results/telemetry.py",
     "return None if self.start is None or self.end is None else self.end - self.start"),
}


def _sources():
    yield from sorted((ROOT / "llmbench").rglob("*.py"))


def test_no_module_re_derives_a_definition():
    found = []
    for path in _sources():
        rel = path.relative_to(ROOT).as_posix()
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if rel != "llmbench/records/definitions.py" and REDERIVED.search(code) \
                    and (rel, line.strip()) not in NOT_A_REQUEST:
                found.append(f"{rel}:{n}: {line.strip()}")
            if rel not in OWN_STATISTICS and PERCENTILE.search(code):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "re-derived outside records/definitions.py or analysis/percentile.py:\n" \
        + "\n".join(found)

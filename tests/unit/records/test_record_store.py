"""The compact record store (issue 12 item 5): it holds exactly what requests.jsonl holds, the
summary built on its columns equals the summary the Record-object implementation gave (recorded
in data/record_path_summaries.json), its per-request series equal Record's definitions, and its
memory per request and per token event is bounded."""

import json
import math
import random
from pathlib import Path

import pytest

from llmbench.analysis import metrics
from llmbench.records import store as records
from llmbench.records.record import Record
from llmbench.records.store import RecordStore, by_done
from llmbench.records.token_events import TokenEvents
from tests.helpers.records import varied
from tests.helpers.records import plain_summary as _plain


@pytest.fixture(autouse=True, params=["compact-rarely", "compact-often"])
def compaction(request, monkeypatch):
    """Every test twice: as a store of this size is (too small to look for columns of one
    value or to seal its token events), and looking every 8 appends, so columns start with a
    run of one value, and sealing token events every 37 (token_events: narrow gaps with
    exceptions), so reads cross sealed chunks and the tail."""
    if request.param == "compact-often":
        monkeypatch.setattr(records, "_COMPACT_EVERY", 8)
        monkeypatch.setattr(records, "SEAL_EVENTS", 37)
    return request.param


def _summary(*args, **kw):
    """metrics.summarize, read as its flat dict (the recorded summaries are those dicts)."""
    return _plain(metrics.summarize(*args, **kw))


def on_disk(r: Record) -> Record:
    """What requests.jsonl gives back for a record."""
    return Record.from_json(json.loads(json.dumps(r.to_json())))


def fields(r: Record) -> dict:
    return {n: getattr(r, n) for n in Record.__slots__}


def test_store_gives_back_what_the_file_holds():
    recs = varied()
    store = RecordStore.of(recs)
    assert len(store) == len(recs)
    got = list(store)
    for a, b in zip(got, recs):
        assert fields(a) == fields(on_disk(b))
    assert fields(store[17]) == fields(on_disk(recs[17]))
    assert fields(store[-1]) == fields(on_disk(recs[-1]))
    # a copy: changing the record afterwards does not change the store
    recs[0].token_times.append(5.0)
    assert len(store[0].token_times) == len(recs[0].token_times) - 1


def test_take_and_by_done():
    recs = varied(120)
    store = RecordStore.of(recs)
    idx = [5, 3, 3, 100, 0]
    sub = store.take(idx)
    assert [fields(r) for r in sub] == [fields(on_disk(recs[i])) for i in idx]
    shuffled = RecordStore.of(sorted(recs, key=lambda r: -r.done))
    merged = by_done([shuffled])
    assert [r.request_id for r in merged] == [r.request_id for r in sorted(recs, key=lambda r: r.done)]


def test_reorder_in_place_equals_take():
    """by_done puts a store in order where it is (no second store): every field, the token
    events and the sparse extras move with their record."""
    recs = varied(300, seed=3)
    perm = list(range(len(recs)))
    random.Random(7).shuffle(perm)
    store = RecordStore.of(recs)
    want = [fields(r) for r in store.take(perm)]
    store.reorder(perm)
    assert [fields(r) for r in store] == want
    assert [fields(r) for r in store.records_at([0, 299])] == [want[0], want[299]]
    halves = [RecordStore.of(recs[1::2]), RecordStore.of(recs[::2])]
    merged = by_done(halves)
    assert [r.request_id for r in merged] == \
        [r.request_id for r in sorted(recs, key=lambda r: r.done)]


def test_a_nearly_ordered_store_moves_only_its_neighbours_and_lets_old_events_go(monkeypatch):
    """A run's own records are in order of done but for a few neighbours: reorder writes only
    those, every field, token event and extra moving with its record, and lets go of each old
    chunk of token events once no later block needs it (holding about one copy, not two)."""
    monkeypatch.setattr(records, "SEAL_EVENTS", 64)
    recs = varied(600, seed=11)
    perm = list(range(len(recs)))
    rng = random.Random(2)
    for i in rng.sample(range(len(recs) - 3), 40):        # local swaps, extras among them
        j = i + rng.randint(1, 3)
        perm[i], perm[j] = perm[j], perm[i]
    store = RecordStore.of(recs)
    want = [fields(r) for r in store.take(perm)]
    old = store._tok
    released = []
    real_release = TokenEvents.release_before

    def watch(self, r):
        real_release(self, r)
        if self is old:
            released.append(sum(c is None for c in old._chunks))
    monkeypatch.setattr(TokenEvents, "release_before", watch)
    monkeypatch.setattr(RecordStore, "block_records", lambda self, events=0: 32)
    store.reorder(perm)
    assert [fields(r) for r in store] == want
    assert len(old._chunks) > 10 and released and released[0] > 0      # let go as it went
    assert released == sorted(released) and released[-1] >= len(old._chunks) * 0.8
    ident = RecordStore.of(recs)
    before = ident._tok
    ident.reorder(list(range(len(recs))))                 # nothing moves: nothing is rebuilt
    assert ident._tok is before
    # a plain run's columns of one value stay one value (those appended since the last look
    # for them included): a reorder does not write them out whole (40 MB at a million)
    monkeypatch.setattr(records, "_COMPACT_EVERY", 256)
    plain = plain_run(1000)
    swapped = list(range(1000))
    for i in (300, 700, 998):
        swapped[i], swapped[i + 1] = swapped[i + 1], swapped[i]
    store = RecordStore.of(plain)
    want = [fields(r) for r in store.take(swapped)]
    size, heads = store.nbytes(), set(store._head)
    store.reorder(swapped)
    assert [fields(r) for r in store] == want
    assert set(store._head) >= heads and store.nbytes() <= size


def _same(a, b, path="summary", exact=False):
    """Equal, floats to 1e-9 relative (``exact``: bit for bit): the store's per-event
    statistics are computed from the exact integer microseconds; the Record-object
    implementation (recorded) added and subtracted float seconds first, which moves the last
    bits (less than 1e-9 ms at any start time a machine reaches). JSON keys are strings: a
    recorded dict's keys are compared as such."""
    if isinstance(a, dict):
        assert set(map(str, a)) == set(map(str, b)), (path, set(map(str, a)) ^ set(map(str, b)))
        bs = {str(k): v for k, v in b.items()}
        for k in a:
            _same(a[k], bs[str(k)], f"{path}.{k}", exact)
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            _same(x, y, f"{path}[{i}]", exact)
    elif isinstance(a, float) and isinstance(b, float):
        assert a == b or (not exact and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)), \
            (path, a, b)
    else:
        assert a == b and type(a) is type(b), (path, a, b)


# The summaries the Record-object implementation of ``summarize`` gave for these tests' records
# (llmbench/analysis/metrics.py before the column store became the one implementation, commit
# 38f9e02): that implementation is gone, its numbers are kept. Recorded once with that module
# on the same inputs (varied, plain_run, itl_counts_records, bunching_records); JSON keeps every
# float's bits.
RECORDED = json.loads((Path(__file__).parent.parent / "data" / "record_path_summaries.json")
                      .read_text(encoding="utf-8"))


def recorded(name: str) -> dict:
    want = RECORDED[name]
    return json.loads(json.dumps(want))             # a copy: tests may not change it


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_summary_from_store_equals_the_recorded_summary_from_records(seed, monkeypatch):
    recs = varied(500, seed)
    plain = [on_disk(r) for r in recs]
    kw = dict(goodput_slo_ms={"ttft": 40.0, "e2el": 200.0}, stall_s=0.02,
              percentiles=(50.0, 90.0, 95.0, 99.0, 99.9), within=[("ttft", 30.0), ("itl", 10.0)])
    want = recorded(f"varied-{seed}")
    got = _summary(RecordStore.of(recs), t0=plain[0].scheduled, **kw)
    assert want["requests"] > 0 and want["failed"] > 0 and "by_turn" in want
    assert want["requests_with_reasoning"] > 0 and want["errors"] and "backends" in want
    _same(got, want)
    # a list of Records is made a store: the same summary, also from the records as read back
    _same(_summary(recs, t0=plain[0].scheduled, **kw), got, exact=True)
    _same(_summary(plain, t0=plain[0].scheduled, **kw), got, exact=True)
    # the chunked passes give the same as one chunk
    monkeypatch.setattr(metrics, "_REC_CHUNK", 7)
    monkeypatch.setattr(metrics, "_CHUNK", 5)
    _same(_summary(RecordStore.of(recs), t0=plain[0].scheduled, **kw), got)
    # no t0: the first scheduled time; no reasoning, no later turns, no failures
    simple = [r for r in plain if r.ok and not r.reasoning_events and r.turn == 0]
    want = recorded(f"simple-{seed}")
    # every request succeeded: the store's path without index copies, goodput on all three
    kw["goodput_slo_ms"] = {"ttft": 40.0, "tpot": 3.0, "e2el": 200.0}
    kw["within"] = [("ttft", 30.0), ("itl", 10.0), ("e2el", 150.0), ("max_gap", 20.0)]
    want_kw = recorded(f"simple-kw-{seed}")
    assert 0 < want_kw["request_goodput"] < want_kw["request_throughput"]
    # the store's own path: no per-request objects at all when nothing reasoned
    monkeypatch.setattr(metrics, "per_request", None)
    _same(_summary(RecordStore.of(simple)), want)
    _same(_summary(simple, **kw), want_kw)
    _same(_summary(RecordStore()), recorded("empty"))
    _same(_summary([]), recorded("empty"))


@pytest.mark.parametrize("seed", [1, 4])
def test_column_series_equal_the_record_definitions(seed):
    """The one definition of each per-request latency is Record's (records/record.py); the
    column store's vectorized series must give the same number for every request: bit for bit
    for TTFT, E2EL, TPOT, client queue and E2EL from schedule (the same float operations), to
    1e-9 ms for the gaps (ITL, its largest), which the columns take from exact integer µs. One
    request a summary: its mean is its value."""
    recs = [r for r in (on_disk(r) for r in varied(120, seed)) if r.ok
            and not r.warmup and r.error_kind != "interrupted"]
    assert len(recs) > 80
    for r in recs:
        s = _summary([r], split_turns=False)
        assert s["mean_ttft_ms"] == r.ttft * 1000.0
        assert s["mean_e2el_ms"] == r.e2el * 1000.0
        assert s["mean_client_queue_ms"] == r.client_queue * 1000.0
        assert s["mean_e2el_from_schedule_ms"] == r.e2el_from_schedule * 1000.0
        assert s["mean_tpot_ms"] == (None if r.tpot is None else r.tpot * 1000.0)
        gaps = r.itls
        assert s["n_itl"] == len(gaps)
        if gaps:
            assert math.isclose(s["max_itl_ms"], max(gaps) * 1000.0, rel_tol=1e-9, abs_tol=1e-9)
            assert math.isclose(s["min_itl_ms"], min(gaps) * 1000.0, rel_tol=1e-9, abs_tol=1e-9)
            assert math.isclose(s["mean_max_gap_ms"], max(gaps) * 1000.0, rel_tol=1e-9,
                                abs_tol=1e-9)
        # per_request (the step statistics' and the router A/B's scalar path) reads the same
        p = metrics.per_request(r)
        assert (p.ttft, p.e2el, p.tpot, p.itls) == (r.ttft, r.e2el, r.tpot, r.itls)


def test_latencies_read_from_the_file_equal_the_record_definitions(tmp_path):
    """results.latencies reads TTFT, E2EL and ITL from requests.jsonl's token_us directly (no
    Record): the same requests as ``measured`` and the same values as Record's definitions."""
    from llmbench.records.record import measured
    from llmbench.results.latencies import read_latencies
    recs = varied(300, 6)
    path = tmp_path / "requests.jsonl"
    path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in recs), encoding="utf-8")
    lat = read_latencies(path)
    plain = measured(on_disk(r) for r in recs)
    assert len(lat.ok) == len(plain)
    for i, r in enumerate(plain):
        assert bool(lat.ok[i]) == (r.ok and bool(r.token_times))
        if not lat.ok[i]:
            assert math.isnan(lat.ttft_ms[i])
            continue
        assert math.isclose(lat.ttft_ms[i], r.ttft * 1000.0, rel_tol=1e-9, abs_tol=1e-9)
        assert math.isclose(lat.e2el_ms[i], r.e2el * 1000.0, rel_tol=1e-9, abs_tol=1e-9)
    want = [g * 1000.0 for r in plain if r.ok and r.token_times for g in r.itls]
    assert len(lat.itls()) == len(want)
    assert all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9) for a, b in zip(lat.itls(), want))


def test_memory_per_request_and_per_token_event_is_bounded():
    """Deterministic accounting, not RSS: the columns' bytes per request and per event."""
    def one(i: int, k: int) -> Record:
        r = Record(f"12345-{i}", scheduled=float(i), start=i + 0.001, user=i % 64,
                   conversation=f"syn-{i}", max_tokens=k, status=200, ok=True,
                   prompt_tokens=8, output_tokens=k, finish_reason="length",
                   server_queue_ms=0.25)
        r.token_times = [r.start + 0.001 * j for j in range(k)]
        r.first_token, r.end, r.done = r.token_times[0], r.token_times[-1], r.token_times[-1]
        return r
    small, large = RecordStore(), RecordStore()
    for i in range(2000):
        small.append(one(i, 8))
        large.append(one(i, 128))
    per_event = (large.nbytes() - small.nbytes()) / (2000 * 120)
    assert per_event <= 4.0 + 1e-9
    # the token events of the 2000 long replies (256,000) are mostly sealed: 1 ms gaps in
    # two bytes each
    assert len(large._tok) - len(large._tok.tail) > 0.7 * 2000 * 128
    assert large._tok.nbytes() / (2000 * 128) < 0.3 * 4 + 0.7 * 2.1
    per_request = (small.nbytes() - small._tok.nbytes()) / 2000      # the columns
    # 121 since the response's first byte has its own 4-byte column (first_byte_us, issue 48)
    assert per_request <= 124
    assert not small.extras()              # an ordinary record needs no per-record object


def plain_run(n: int, k: int = 8, t: float = 500.0) -> list[Record]:
    """An ordinary run's records: every column but the times, user and ids holds one value."""
    out = []
    for i in range(n):
        r = Record(f"12345-{i}", scheduled=t + i * 0.01 - 1e-5, start=t + i * 0.01, user=i % 4, conversation=f"syn-{i}",
                   max_tokens=k, status=200, ok=True, prompt_tokens=8, output_tokens=k,
                   finish_reason="length", server_queue_ms=0.25, sent=t + i * 0.01 + 1e-4)
        r.token_times = [r.start + 0.002 + 0.001 * j for j in range(k)]
        r.first_token, r.end, r.done = r.token_times[0], r.token_times[-1], r.token_times[-1]
        out.append(r)
    return out


def test_columns_of_one_value_cost_nothing_and_read_back_the_same(monkeypatch):
    """Columns that held one value keep it once, not per request; once other values follow
    (failures, other finish reasons, a second worker) every way of reading the store gives what
    plain Records give."""
    import numpy as np
    monkeypatch.setattr(records, "_COMPACT_EVERY", 64)
    store = RecordStore.of(plain_run(2048))
    per_request = (store.nbytes() - 4 * 8 * 2048) / 2048
    # scheduled, start, sent, first_token, end, done; user, request and conversation
    # numbers; ntok (every other column: once, not per request)
    assert per_request <= 6 * 8 + 3 * 4 + 4 + 1
    monkeypatch.setattr(records, "_COMPACT_EVERY", 16)
    recs = plain_run(40) + varied(200, seed=5) + plain_run(30, t=2000.0)
    plain = [on_disk(r) for r in recs]
    store = RecordStore.of(recs)
    assert store._head and store._varied        # both kinds of column are there
    assert [fields(r) for r in store] == [fields(r) for r in plain]
    monkeypatch.setattr(records, "_COMPACT_EVERY", 1 << 30)
    want = RecordStore.of(plain)                # never looked for columns of one value
    assert not want._head
    for name in ("start", "sent", "scheduled", "server_queue_ms", "status", "max_tokens",
                 "worker", "finish_reason", "ok", "warmup", "ntok"):
        assert np.array_equal(store.col(name), want.col(name), equal_nan=True), name
    assert np.array_equal(store.view("status"), store.col("status"))
    perm = list(range(len(recs)))
    random.Random(3).shuffle(perm)
    assert [fields(r) for r in store.take(perm)] == [fields(plain[i]) for i in perm]
    store.reorder(perm)
    assert [fields(r) for r in store] == [fields(plain[i]) for i in perm]
    kw = dict(percentiles=(50.0, 99.0), within=[("ttft", 30.0)])
    _same(_summary(RecordStore.of(recs), t0=500.0, **kw), recorded("one-value-columns"))


def test_other_consumers_same_on_store_and_records():
    """The timeline, the peak in flight and the record checks read a store on its columns."""
    from llmbench.analysis import checks, timeline
    from llmbench.analysis.metrics import peak_in_flight
    recs = varied(300, 4)
    plain = [on_disk(r) for r in recs]
    store = RecordStore.of(recs)
    t0 = plain[0].scheduled
    t_end = max(r.done for r in plain)
    _same(timeline.build(store, t0, t_end), timeline.build(plain, t0, t_end))
    assert peak_in_flight(store) == peak_in_flight(plain) > 1

    class P:
        ignore_eos, stream = False, True
    assert checks.record_checks(store, P(), "openai") == checks.record_checks(plain, P(), "openai")


def test_large_synthetic_workload_is_regenerated_not_held(monkeypatch):
    """A million-request run's synthetic prompts are made again from the seed a block at a
    time: the same conversations, fingerprint and description as when built up front."""
    import importlib
    from llmbench.workload import WorkloadSpec, build_workload, load_tokenizer
    syn = importlib.import_module("llmbench.workload.synthetic")
    tok = load_tokenizer("approx")
    spec = WorkloadSpec(count=700, tokenizer="approx", prompt_tokens=(8, 30),
                        output_tokens=(4, 9), turns=2, shared_prefix_tokens=5, prefixes=3)
    held = build_workload(spec, tok)
    monkeypatch.setattr(syn, "LAZY_FROM", 100)
    monkeypatch.setattr(syn.Regenerated, "BLOCK", 64)
    lazy = build_workload(spec, tok)
    assert isinstance(lazy.conversations, syn.Regenerated)
    assert list(lazy.conversations) == held.conversations
    for i in (699, 0, 64, 63, 300, -1, 5):
        assert lazy.conversations[i] == held.conversations[i]
    assert lazy.describe() == held.describe()
    assert len(lazy.conversations._cache) <= 2


def itl_counts_records(seed: int) -> list[Record]:
    """3,000 plain 12-event replies whose gaps repeat a few values (and some unique ones), a
    few failures."""
    rng = random.Random(seed)
    recs = []
    for i, r in enumerate(plain_run(3000, k=12)):
        times = [r.start + 0.002]
        for _ in range(11):
            times.append(times[-1] + rng.choice([0.0, 0.001, 0.02, rng.uniform(0, 0.3)]))
        r.token_times, r.first_token, r.end, r.done = times, times[0], times[-1], times[-1]
        if i % 97 == 5:
            r.ok, r.error_kind, r.status, r.token_times = False, "http_status", 500, []
            r.first_token = r.end = None
            r.output_tokens = None
        recs.append(r)
    return recs


@pytest.mark.parametrize("seed", [1, 2])
def test_itl_from_counts_of_gap_values_equals_itl_from_every_gap(seed):
    """Every reply one token per event (the usual case): the store's summary counts the gaps'
    values instead of holding every gap; percentiles, mean, std, stalls and "within" shares
    equal the Record-object implementation's, which held every gap (recorded)."""
    recs = itl_counts_records(seed)
    kw = dict(percentiles=(1.0, 50.0, 90.0, 99.0, 99.9), stall_s=0.1,
              within=[("itl", 1.5), ("itl", 25.0), ("itl_per_token", 25.0)])
    want = recorded(f"itl-counts-{seed}")
    assert want["failed"] > 0 and want["stalls"] > 0
    _same(_summary(RecordStore.of(recs), t0=500.0, **kw), want)


def bunching_records() -> tuple[list[Record], list[Record]]:
    """Replies whose events came one a read, in one or a few reads, too quickly or too few to
    judge, several tokens an event, a failure; and a run where most replies were buffered."""
    def rec(i: int, gaps_ms: list[float], ttft_ms: float = 50.0, stream: bool = True) -> Record:
        start = 100.0 + i
        r = Record(f"1-{i}", scheduled=start, start=start, status=200, ok=True,
                   prompt_tokens=5, output_tokens=len(gaps_ms) + 1, stream=stream)
        t = start + ttft_ms / 1000
        r.token_times = [t]
        for g in gaps_ms:
            t += g / 1000
            r.token_times.append(t)
        r.first_token, r.end, r.done = r.token_times[0], r.token_times[-1], r.token_times[-1]
        return r
    spread = [rec(i, [10.0] * 29) for i in range(4)]                 # one event a read
    # a whole reply in one read after 300 ms; one in 4 reads of 8 (4-8 KB buffers)
    buffered = [rec(10, [0.0] * 29, 300.0), rec(11, ([0.0] * 7 + [200.0]) * 3 + [0.0] * 7)]
    quick = [rec(20, [0.0] * 29, 1.0)]                 # over in 1 ms: could be real, not judged
    short = [rec(21, [0.0] * 4, 300.0)]                # 5 events: too few to judge
    several = [rec(22, [10.0] * 9)]
    several[0].token_counts = [4] * 10                 # 4 tokens an event: not a buffer
    failed = Record("1-99", scheduled=1.0, start=1.0, status=500, ok=False, error_kind="http_status")
    recs = [on_disk(r) for r in spread + buffered + quick + short + several + [failed]]
    many = [on_disk(rec(30 + i, [0.0] * 19, 250.0)) for i in range(5)] + recs[:2]
    return recs, many


def test_stream_bunching_counts_reads_the_same_on_records_and_on_the_store():
    """Token events of one network read share its arrival time: a buffered reply's events come
    in one or a few reads (metrics._bunching_store), an ordinary one's each in its own."""
    recs, many = bunching_records()
    want = _summary(recs)["stream_bunching"]
    assert want == {"requests": 7, "bunched": 2, "share": 2 / 7, "events_per_read_p50": 1.0,
                    "buffered": False}
    _same(want, recorded("bunching"), exact=True)
    _same(_summary(RecordStore.of(recs))["stream_bunching"], want, exact=True)
    # most requests bunched: the run's stream is buffered
    got = _summary(RecordStore.of(many))["stream_bunching"]
    assert got["buffered"] is True and got["bunched"] == 5 and got["events_per_read_p50"] == 20.0
    _same(got, recorded("bunching-many"), exact=True)

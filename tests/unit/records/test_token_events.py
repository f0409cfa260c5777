"""Token events kept narrow (llmbench.records.token_events): exactly the integers appended come back,
whatever their size or sign, across sealed chunks and the unsealed tail; and an event costs
1-2 bytes instead of 4 when its gaps are small."""

import random

import numpy as np
import pytest

from llmbench.records import store as records
from llmbench.records.record import Record
from llmbench.records.store import RecordStore
from llmbench.records.token_events import TokenEvents


def build(recs: list[list[int]], seal_every: int) -> TokenEvents:
    """Records appended as the store appends them, sealed every ``seal_every`` records."""
    ev = TokenEvents()
    counts: list[int] = []
    for i, us in enumerate(recs):
        ev.tail.extend(us)
        counts.append(len(us))
        if (i + 1) % seal_every == 0:
            ev.seal(np.array(counts[ev.sealed_records:], dtype=np.int64))
    return ev


def record_events(rng: random.Random, kind: str) -> list[int]:
    n = rng.choice([0, 1, 2, 8, 30])
    if kind == "small":          # one read carries every token (a zero-delay server)
        first = rng.randint(0, 5000)
        return [first + rng.randint(0, 3) * j for j in range(n)]
    if kind == "ms":             # 20 ms a token, a first token after 150 ms
        out, t = [], rng.randint(100_000, 300_000)
        for _ in range(n):
            out.append(t)
            t += rng.randint(15_000, 25_000)
        return out
    # anything an int32 holds, unordered, negative, at the extremes
    return [rng.choice([-(2 ** 31) + 1, 2 ** 31 - 1, 0, -1, 255, 65535, 65534, 254,
                        rng.randint(-(2 ** 31) + 1, 2 ** 31 - 1)]) for _ in range(n)]


@pytest.mark.parametrize("kind", ["small", "ms", "wild", "mixed"])
@pytest.mark.parametrize("seal_every", [1, 7, 1000])
def test_every_whole_record_range_reads_back_exactly(kind, seal_every):
    rng = random.Random(hash((kind, seal_every)) & 0xFFFF)
    recs = [record_events(rng, rng.choice(["small", "ms", "wild"]) if kind == "mixed" else kind)
            for _ in range(300)]
    ev = build(recs, seal_every)
    ntok = np.array([len(r) for r in recs], dtype=np.int64)
    off = np.concatenate(([0], np.cumsum(ntok)))
    flat = [u for r in recs for u in r]
    assert len(ev) == len(flat)
    for _ in range(200):
        r0 = rng.randint(0, len(recs))
        r1 = rng.randint(r0, len(recs))
        got = ev.get(r0, r1, ntok, off)
        assert got.dtype == np.int32
        assert got.tolist() == flat[off[r0]:off[r1]]
    whole = ev.get(0, len(recs), ntok, off)
    assert whole.tolist() == flat
    # single events (a record's first or last) without decoding a block at once
    for _ in range(50):
        r0 = rng.randint(0, len(recs) - 1)
        r1 = rng.randint(r0 + 1, len(recs))
        has = np.flatnonzero(ntok[r0:r1] > 0) + r0
        pos = np.sort(np.concatenate((off[has], off[has + 1] - 1)))
        assert ev.take(pos, r0, r1, ntok, off).tolist() == [flat[p] for p in pos]


def test_small_gaps_take_one_byte_and_millisecond_gaps_two():
    rng = random.Random(3)
    small = build([[rng.randint(0, 5000)] * 8 for _ in range(4000)], 500)
    # 8 events a record: the first (0-5 ms) in 2 bytes, the 7 gaps of 0 in 1 byte each
    assert small.nbytes() <= 4000 * (2 + 7)
    assert all(c.firsts.enc.itemsize == 2 and c.gaps.enc.itemsize == 1 for c in small._chunks)
    ms = build([record_events(rng, "ms") for _ in range(4000)], 500)
    # 15-25 ms gaps in 2 bytes; first values of 100-300 ms in 4
    assert all(c.firsts.enc.itemsize == 4 and c.gaps.enc.itemsize == 2 for c in ms._chunks)
    assert ms.nbytes() / len(ms) < 2.4                  # was 4
    wild = build([record_events(rng, "wild") for _ in range(400)], 50)
    assert all(c.raw is not None for c in wild._chunks)   # narrow would cost more: int32
    assert wild.nbytes() == 4 * len(wild)


def test_a_store_of_long_replies_holds_about_two_bytes_an_event(monkeypatch):
    """A run of 128-token replies at ~20 ms a token: the store's token events, sealed as the
    run goes, cost about half of the int32 they were; every record reads back as appended."""
    monkeypatch.setattr(records, "SEAL_EVENTS", 4096)
    rng = random.Random(5)
    store, plain = RecordStore(), []
    t = 100.0
    for i in range(600):
        start = t + i * 0.05
        times, u = [], start + rng.uniform(0.1, 0.3)
        for _ in range(128):
            times.append(u)
            u += rng.uniform(0.015, 0.025)
        r = Record(f"r-{i}", scheduled=start, start=start, first_token=times[0], end=times[-1],
                   done=times[-1], ok=True, status=200, output_tokens=128, token_times=times)
        store.append(r)
        plain.append(Record.from_json(r.to_json()))       # what requests.jsonl reads back
    events = 600 * 128
    assert len(store._tok) - len(store._tok.tail) > events * 0.9
    assert store._tok.nbytes() / events < 2.2
    assert [r.token_times for r in store] == [r.token_times for r in plain]
    assert store[417].token_times == plain[417].token_times
    picked = store.take(np.array([599, 3, 3, 250]))
    assert [r.token_times for r in picked] == [plain[i].token_times for i in (599, 3, 3, 250)]

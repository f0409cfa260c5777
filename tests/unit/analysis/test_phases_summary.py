"""The run's phase percentiles (analysis/phases.py) equal the per-request definitions
(records/phases.py) request by request, and an unstamped run has none."""

from __future__ import annotations

import json
import random

import numpy as np

from llmbench.analysis.metrics import summarize
from llmbench.analysis.phases import KEY, phase_values, read_phases
from llmbench.records.phases import PHASES, phases_ms
from llmbench.records.record import Record
from llmbench.records.store import RecordStore
from llmbench.results.schema import Summary


def _rec(i: int, rng: random.Random, new: bool, tls: bool, dns: bool) -> Record:
    start = 100.0 + i
    r = Record(f"r-{i}", scheduled=start, start=start, ok=True, status=200, output_tokens=5)
    at = 0
    if new:
        r.conn_us = at = rng.randint(0, 300)
        if dns:
            r.dns_us = at = at + rng.randint(10, 900)
        r.connect_us = at = at + rng.randint(50, 2000)
        if tls:
            r.tls_us = at = at + rng.randint(500, 5000)
    r.sent = start + (at + rng.randint(5, 200)) / 1e6
    r.first_byte_us = round((r.sent - start) * 1e6) + rng.randint(100, 50_000)
    first = r.first_byte_us + rng.randint(0, 80_000)
    r.token_times = [start + (first + 1000 * k * rng.randint(1, 20)) / 1e6 for k in range(5)]
    r.first_token, r.end, r.done = r.token_times[0], r.token_times[-1], r.token_times[-1]
    return r


def test_phase_percentiles_equal_the_per_request_definitions():
    rng = random.Random(7)
    recs = [_rec(i, rng, new=i % 5 == 0, tls=i % 10 == 0, dns=i % 15 == 0) for i in range(300)]
    recs.append(Record("old", scheduled=1.0, start=1.0, ok=True, status=200))   # unstamped
    st = RecordStore.of(recs)
    got = phase_values(st, st.col("ok"))
    want: dict[str, list[float]] = {p: [] for p in PHASES}
    for r in recs:
        for name, v in (phases_ms(r) or {}).items():
            want[name].append(v)
    for name in PHASES:
        assert np.allclose(np.sort(got[name]), np.sort(want[name]), atol=1e-9), name
    assert len(got["connect"]) == 60 and len(got["tls"]) == 30 and len(got["dns"]) == 20
    s = summarize(recs)
    d = json.loads(json.dumps(s.to_dict()))
    assert d[KEY]["new_connections"] == 60
    assert d[KEY]["wait"]["p95"] == np.percentile(want["wait"], 95)
    # read back from run.json: the same phases, and written back unchanged
    back = Summary.from_dict(d)
    stats = read_phases(back.extra)
    assert [p.name for p in stats] == list(PHASES)
    assert json.dumps(back.to_dict()) == json.dumps(d)


def test_a_run_without_stamps_has_no_phases():
    r = Record("a", scheduled=1.0, start=1.0, ok=True, status=200, output_tokens=2)
    r.token_times = [1.1, 1.2]
    r.first_token, r.end, r.done = 1.1, 1.2, 1.2
    assert KEY not in summarize([r]).to_dict()

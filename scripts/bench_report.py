"""Time to write the HTML report of a 10-step ramp with 100,000 records (and md/CSV, compare).

  python scripts/bench_report.py --records 100000 --steps 10

Builds a synthetic ramp run folder (records with 64 token events each, a timeline, steps
summarised by llmbench's own metrics), then times `report` and `compare` on it.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llmbench.analysis.finish import step_judge as judge  # noqa: E402
from llmbench.load.monitor import busy  # noqa: E402
from llmbench.load.shapes import StepWindow  # noqa: E402
from llmbench.records.record import Record  # noqa: E402
from llmbench.results.schema import Run, RunState, Verdict  # noqa: E402
from llmbench.analysis.slo import parse_threshold  # noqa: E402


def make_run(d: Path, n: int, steps: int) -> None:
    rng = random.Random(0)
    per = n // steps
    records: list[Record] = []
    step_rows = []
    t = 0.0
    with open(d / "requests.jsonl", "w") as fh:
        for s in range(steps):
            hold_start, hold_end = t, t + 60.0
            for i in range(per):
                start = hold_start + rng.random() * 60
                ttft = 0.05 + 0.02 * s * rng.random()
                gap = 0.008 + 0.001 * s
                times = [start + ttft + k * gap for k in range(64)]
                r = Record(f"r{s}-{i}", scheduled=start, start=start, token_times=times, ok=True,
                           status=200, output_tokens=64, prompt_tokens=100, step=s,
                           first_token=times[0], end=times[-1], done=times[-1] + 0.001)
                records.append(r)
                fh.write(json.dumps(r.to_json()) + "\n")
            res = judge([parse_threshold("ttft.p95<=2s")])(StepWindow(
                s, 2 * (s + 1), hold_start - 5, hold_start, hold_end, records, 0, busy([])))
            step_rows.append(res)
            records = []
            t = hold_end + 5
    with open(d / "timeline.jsonl", "w") as fh:
        for sec in range(int(t)):
            fh.write(json.dumps({"t": sec, "users": 2 * (sec // 65 + 1), "in_flight": 3,
                                 "waiting_first_token": 1, "streaming": 2, "thinking": 1,
                                 "tok_s": 500.0, "ttft_p95_recent_ms": 80.0}) + "\n")
    Run(RunState(kind="ramp", status="complete", started_at=0),
        config={"target": {"model": "bench", "url": "http://x"},
                "ramp": {"by": "users", "thresholds": ["ttft.p95<=2s"]}},
        workload={"fingerprint": "f"}, steps=step_rows,
        verdict=Verdict(text="Held 20 users.", kind="held")).save(d)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=100000)
    ap.add_argument("--steps", type=int, default=10)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "run"
        d.mkdir()
        t = time.perf_counter()
        make_run(d, a.records, a.steps)
        print(f"made a {a.steps}-step ramp with {a.records} records "
              f"({os.path.getsize(d / 'requests.jsonl') / 1e6:.0f} MB) in {time.perf_counter() - t:.1f} s")
        from llmbench.report.html import write
        t = time.perf_counter()
        write(d)
        print(f"report.html: {time.perf_counter() - t:.2f} s "
              f"({os.path.getsize(d / 'report.html') / 1e3:.0f} kB)")
        from llmbench.report.text import to_csv, to_markdown
        t = time.perf_counter()
        to_markdown(d), to_csv(d)
        print(f"markdown + csv: {time.perf_counter() - t:.2f} s")
        from llmbench.analysis.compare import compare, load_runs
        t = time.perf_counter()
        compare(load_runs([d, d]), max_regression=0.1)
        print(f"compare (bootstrap over {a.steps} steps x 3 metrics): {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()

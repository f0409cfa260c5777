"""How many users and streams can one llmbench process drive before it becomes the limit?

The mock runs in zero-delay-ish mode in a child process (TTFT 20 ms, a token every 20 ms, 64
tokens, think time 0), so the server is never the bottleneck; llmbench ramps users up and we
watch its own event-loop lag p99 and CPU per step. The ramp's live line warns at half the lag
limit (5 ms) or 80% of the CPU limit, before its 10 ms / 90% rule marks a step untrustworthy.

  python scripts/bench_ramp_capacity.py --users 64,128,256,384,512 --hold 8
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("LLMBENCH_TOKENIZER", "approx")

from llmbench.client.request import RequestParams, Timeouts  # noqa: E402
from llmbench.analysis.finish import step_judge as judge  # noqa: E402
from llmbench.load.harness import Harness, TargetSpec  # noqa: E402
from llmbench.load.shapes import Ramp  # noqa: E402
from llmbench.analysis.slo import parse_threshold  # noqa: E402
from llmbench.client.target import make_target  # noqa: E402
from llmbench.workload import Conversation, Turn  # noqa: E402
from llmbench.mock_server import MockProcess, make_config  # noqa: E402


def measure(url: str, steps: list[int], hold: float, itl_ms: float) -> None:
    convs = [Conversation(f"c{i}", (Turn(f"hello {i} there", 64, 4),)) for i in range(5000)]
    print(f"{'users':>6} {'streams/s':>9} {'events/s':>9} {'lag p99':>8} {'lag max':>8} "
          f"{'CPU':>5}  ITL p50/p99 (configured {itl_ms} ms)")

    def show(step) -> None:
        sm = step.summary
        m = step.monitor
        events = sm["total_output_tokens"] / (step.hold_end - step.hold_start)
        print(f"{step.load:>6g} {sm['request_throughput']:>9.1f} {events:>9.0f} "
              f"{m['lag_p99_ms']:>6.1f}ms {m['lag_max_ms']:>6.1f}ms {m['cpu_pct']:>4.0f}%  "
              f"{sm['median_itl_ms']:.1f}/{sm['p99_itl_ms']:.1f} ms"
              + ("  <- overloaded" if m["overloaded"] else ""), flush=True)
    shape = Ramp(convs, [float(s) for s in steps], judge([parse_threshold("errors==0")]),
                 ramp_in_s=2.0, hold_s=hold, think_s=(0.0, 0.0), keep_going=True, drain_s=30,
                 on_step=show)
    Harness(RequestParams(), Timeouts(), None, progress=False).run(
        shape, [TargetSpec(make_target(url + "/v1", "mock"), server_probe="off")])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--users", default="32,64,128,256,384,512")
    ap.add_argument("--hold", type=float, default=8.0)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    a = ap.parse_args()
    cfg = make_config(None, ttft_ms=20, itl_ms=a.itl_ms, tokens=64)
    with MockProcess(cfg) as m:
        measure(m.url, [int(x) for x in a.users.split(",")], a.hold, a.itl_ms)


if __name__ == "__main__":
    main()

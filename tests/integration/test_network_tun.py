"""The network's share with a link the TCP handshake pays too (issue 48): 50 ms each way
through a TUN device and a userspace router in a network namespace of its own
(tests/helpers/tun_delay.py; the delay proxy of test_network_floor.py cannot delay a SYN-ACK).
A new connection's connect phase is the round trip (~100 ms), a reused one has none, the
floor's connection set-up says the same, TTFT rises by the round trip, and the verdict names
the network, not the queue; the same server reached directly says nothing about it."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from llmbench.records.phases import phases_ms
from llmbench.records.record import load_records
from tests.helpers import ENV, ROOT, busy, only_run
from tests.helpers.tun_delay import INSTALL

pytestmark = pytest.mark.usefixtures("transport")

DELAY_MS = 50.0
RTT_MS = 2 * DELAY_MS
# 3 users at once: the preflight's connection is reused by one, the other two open theirs
RAMP = ["--model", "mock", "--users", "3", "--ramp-in", "0.5s", "--hold", "3s", "--think", "0",
        "--turns", "1", "--prompt-tokens", "10", "--output-tokens", "4",
        "--threshold", "ttft.p95<=80ms", "--generator-lag-limit", "2000ms",
        "--network-floor", "on", "--no-progress"]


def _can_run() -> None:
    missing = [what for what, ok in (("root", os.geteuid() == 0),
                                     ("/dev/net/tun", os.path.exists("/dev/net/tun")),
                                     ("unshare", shutil.which("unshare") is not None),
                                     ("ip", shutil.which("ip") is not None)) if not ok]
    if missing:
        pytest.fail(f"the TUN delay link is missing {', '.join(missing)}: it {INSTALL} "
                    "(scripts/install-test-deps.sh installs ip and unshare)")


def _through_tun(tmp_path) -> tuple[list[dict], dict]:
    _can_run()
    spec = {"delay_ms": DELAY_MS, "mock": ["--ttft-ms", "20", "--itl-ms", "2", "--parallel", "4"],
            "runs": [["ramp", "--url", "{far}/v1", *RAMP, "--out", str(tmp_path / "far")],
                     ["ramp", "--url", "{near}/v1", *RAMP, "--out", str(tmp_path / "near")]]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    p = busy.run(["unshare", "-n", sys.executable, "-m", "tests.helpers.tun_delay",
                  str(tmp_path / "spec.json")], 180, capture_output=True, text=True,
                 env={**ENV, "LLMBENCH_TRANSPORT": os.environ.get("LLMBENCH_TRANSPORT", "")},
                 cwd=ROOT)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    return lines[:-1], lines[-1]["router"]


def test_a_new_connection_pays_the_round_trip_and_the_verdict_names_the_network(tmp_path):
    runs, router = _through_tun(tmp_path)
    assert [r["rc"] for r in runs] == [99, 0]       # far: no step held, [r["stderr"][-1500:] for r in runs]
    assert router["packets"] > 20, router
    far_dir, near_dir = only_run(tmp_path / "far"), only_run(tmp_path / "near")
    far = json.loads((far_dir / "run.json").read_text())
    near = json.loads((near_dir / "run.json").read_text())
    # what may stretch a measured phase past the link's round trip, as this run measured it:
    # the router's own lateness (each way) and llmbench's event-loop lag
    lag_ms = max((s.get("monitor") or {}).get("lag_max_ms") or 0.0 for s in far["steps"])
    slack_ms = 2 * router["late_ms"] + lag_ms + 10.0
    # each request that opened a connection paid the handshake's round trip; the others none
    recs = load_records(far_dir / "requests.jsonl")
    phases = [phases_ms(r) for r in recs]
    opened = [ph["connect"] for ph in phases if ph and "connect" in ph]
    reused = [ph for ph in phases if ph and "connect" not in ph]
    assert opened and reused, phases
    assert all(RTT_MS - 1.0 <= c <= RTT_MS + slack_ms for c in opened), (opened, slack_ms)
    # the floor's connection set-up and round trip, measured apart from the server
    net = far["network"]
    assert RTT_MS - 1.0 <= net["connect_ms"] <= RTT_MS + slack_ms, net
    assert RTT_MS - 1.0 <= net["rtt_ms"] <= RTT_MS + slack_ms, net
    assert near["network"]["connect_ms"] < 10.0 + lag_ms, near["network"]
    # TTFT rose by about the round trip (the mock's own 20 ms is the same either way)
    t_far = far["steps"][0]["summary"]["median_ttft_ms"]
    t_near = near["steps"][0]["summary"]["median_ttft_ms"]
    assert abs((t_far - t_near) - net["rtt_ms"]) < 0.25 * net["rtt_ms"], (t_far, t_near, net)
    # the verdict names the network and its new-connection cost, and blames no queue
    v = far["verdict"]
    said = " ".join([v["result"], *v["evidence"], *v["advice"]])
    assert v["kind"] == "network", v
    assert "network round trip" in said, said
    assert "queu" not in said.lower() and "saturat" not in said.lower(), said
    assert "new connection costs" in runs[0]["stdout"], runs[0]["stdout"][-1500:]
    # directly: held, and not a word about the network
    dv = near["verdict"]
    assert dv["kind"] == "held", dv
    assert "network" not in " ".join([dv["result"], *dv["evidence"], *dv["advice"]])

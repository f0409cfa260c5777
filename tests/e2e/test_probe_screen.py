"""The probe's answer as a person reads it (issue 45): its table fits 80 columns, and a router
faster than the direct path beyond noise, with one server behind it, gets one line saying the
figure is implausible (it was marked real without a word)."""

import json

from tests.helpers import only_run, probe_cli


def test_probe_table_fits_80_columns_and_a_faster_router_is_called_implausible(
        mock_factory, tmp_path):
    # the "router" is a fast mock and the "direct" path a slow one: no real router is faster
    # than the one server behind it by 200 ms, so the figure must be said to be implausible
    fast = mock_factory(ttft_ms=5, itl_ms=2, parallel=4)
    slow = mock_factory(ttft_ms=200, itl_ms=2, parallel=4)
    r = probe_cli(fast.url + "/v1", slow.url + "/v1", tmp_path, "--users", "1,2")
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    header = next(i for i, ln in enumerate(out) if ln.lstrip().startswith("Users"))
    table = out[header:header + 3]
    assert all(len(ln) <= 80 for ln in table), table
    assert "+TTFT50" in table[0] and "R/D tok/s" in table[0]
    run = json.loads((only_run(tmp_path) / "run.json").read_text())
    assert all(s["ttft_p50"]["overhead_ms"] < -100 for s in run["steps"]), run["steps"]
    said = [ln for ln in out if ln.startswith("Implausible:")]
    assert len(said) == 1, r.stdout
    assert "faster than the direct path beyond noise" in said[0]

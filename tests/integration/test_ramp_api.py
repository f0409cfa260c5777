"""From tests/e2e/test_ramp.py, the ramps whose numbers are the point, not the command line's
wording or exit code: run in this process through the API (llmbench.ramp) against the mock."""

import pytest

import llmbench
from tests.helpers import only_run
from tests.helpers.api import ramp_exit_code, run_json

# Tests that are not about the load generator's own verdict must not depend on an idle machine
BUSY_OK = dict(generator_lag_limit="2000ms")


def test_ramp_by_rate_delivers_each_steps_rate_in_its_hold_window(mock_factory, tmp_path,
                                                                  capfd):
    from scipy.stats import poisson
    m = mock_factory(ttft_ms=5, itl_ms=1, parallel=16)
    # progress=True: what the command prints, to look for the think-time warning in it
    r = llmbench.ramp(url=m.url + "/v1", model="mock", by="rate", users="2,4", ramp_in="0.5s",
                      hold="10s", think="0", turns=1, prompt_tokens=10, output_tokens=4,
                      threshold="ttft.p95<=2s", **BUSY_OK, out=tmp_path, progress=True)
    printed = capfd.readouterr()
    assert ramp_exit_code(r) == 0, r.verdict
    assert "shorter than the longest think time" not in printed.err + printed.out
    assert only_run(tmp_path) == r.path
    steps = run_json(r)["steps"]
    for st, rate in zip(steps, (2, 4)):
        n = st["summary"]["requests"]
        lo, hi = poisson.ppf(0.0005, rate * 10), poisson.ppf(0.9995, rate * 10)
        assert lo <= n <= hi, (rate, n, lo, hi)
        window_s = st["hold_end"] - st["hold_start"]
        assert st["summary"]["request_throughput"] == pytest.approx(n / window_s, rel=0.35)

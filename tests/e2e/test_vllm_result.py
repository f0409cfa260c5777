"""`run --save-result`: vLLM's result JSON with vLLM's key set, key order and value types,
checked against fixtures of `vllm bench serve --save-result` output (tests/fixtures/README.md);
--save-detailed, --result-dir/--result-filename, --append-result, --metadata; and the true peak
of requests in flight next to vLLM's 1-second-bucket "Peak concurrent requests"."""

import json
import re
from pathlib import Path

import pytest

from llmbench.records.record import Record
from llmbench.analysis.metrics import peak_in_flight
from tests.helpers import llmbench, only_run
from tests.helpers.vllm_result import assert_same_shape

from tests.helpers import FIXTURES as FIX  # noqa: E402
COMMON = ("--prompt-tokens", "20", "--output-tokens", "8", "--requests", "8")


def test_closed_loop_result_has_vllms_keys_and_types(mock_factory, tmp_path):
    # long enough replies that the 4 users overlap for certain: the true peak is exactly 4
    m = mock_factory(ttft_ms=200, itl_ms=5, models=["org/m1"])
    r = llmbench("run", "--url", m.url + "/v1", "--model", "org/m1", "--concurrency", "4",
                 *COMMON, "--out", str(tmp_path / "res"), "--save-result",
                 "--result-dir", str(tmp_path / "vllm"))
    assert r.returncode == 0, r.stderr
    files = list((tmp_path / "vllm").iterdir())
    assert len(files) == 1
    # vLLM's default name: {label or backend}-{rate}qps-concurrency{N}-{model basename}-{date}
    assert re.fullmatch(r"openai-chat-infqps-concurrency4-m1-\d{8}-\d{6}\.json", files[0].name)
    text = files[0].read_text()
    assert "\n" not in text.strip()                       # one object per line, like vLLM
    ours = json.loads(text)
    assert_same_shape(ours, json.loads((FIX / "vllm_result_default.json").read_text()))
    assert ours["request_rate"] == "inf" and ours["max_concurrency"] == 4
    assert ours["completed"] == 8 and ours["num_prompts"] == 8 and ours["label"] is None
    assert ours["model_id"] == "org/m1" and len(ours["latencies"]) == 8
    assert all(lat > 0.2 for lat in ours["latencies"])
    # the true peak sits next to vLLM's bucket figure, in the console and in run.json
    summary = json.loads((only_run(tmp_path / "res") / "run.json").read_text())["summary"]
    assert summary["peak_in_flight_requests"] == 4
    assert summary["max_concurrent_requests"] == ours["max_concurrent_requests"] >= 4
    assert re.search(r"^Peak requests in flight at once:\s+4\s*$", r.stdout, re.M)
    assert "Peak concurrent requests:" in r.stdout


def test_bad_metadata_is_one_line(tmp_path):
    r = llmbench("run", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--metadata", "oops",
                 "--save-result", "--out", str(tmp_path))
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "--metadata 'oops'" in r.stderr


@pytest.mark.parametrize("intervals, peak", [
    ([(0.0, 1.0), (1.0, 2.0)], 1),                  # touching ends do not overlap
    ([(0.0, 1.5), (1.0, 2.0)], 2),
    ([(0.1, 0.2), (0.3, 0.4), (0.5, 0.6)], 1),      # vLLM's bucket counts 3 here
    ([(0.0, 5.0)] * 4, 4),
])
def test_peak_in_flight_is_the_true_peak(intervals, peak):
    recs = []
    for i, (a, b) in enumerate(intervals):
        rec = Record(f"r{i}", scheduled=a, start=a, done=b, end=b, ok=True, token_times=[b])
        recs.append(rec)
    assert peak_in_flight(recs) == peak

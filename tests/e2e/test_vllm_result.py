"""`run --save-result`: vLLM's result JSON with vLLM's key set, key order and value types,
checked against fixtures of `vllm bench serve --save-result` output (tests/fixtures/README.md);
--save-detailed, --result-dir/--result-filename, --append-result, --metadata; and the true peak
of requests in flight next to vLLM's 1-second-bucket "Peak concurrent requests"."""

import json
import re
from pathlib import Path

import pytest

from llmbench.records.record import Record
from llmbench.report.vllm_json import peak_in_flight
from tests.helpers import llmbench, only_run

from tests.helpers import FIXTURES as FIX  # noqa: E402
COMMON = ("--prompt-tokens", "20", "--output-tokens", "8", "--requests", "8")


def json_type(v):
    return {dict: "object", list: "array", str: "string", bool: "bool", int: "int",
            float: "float", type(None): "null"}[type(v)]


def assert_same_shape(ours: dict, vllm: dict) -> None:
    """Same keys in the same order, same JSON type per key, same element type in arrays
    (and in arrays of arrays, like itls)."""
    assert list(ours) == list(vllm)
    for key, ref in vllm.items():
        got = ours[key]
        assert json_type(got) == json_type(ref), (key, got, ref)
        if isinstance(ref, list) and ref:
            assert got, key
            for item in got:
                assert json_type(item) == json_type(ref[0]), (key, item, ref[0])
                if isinstance(ref[0], list) and ref[0]:
                    assert all(json_type(x) == json_type(ref[0][0]) for x in item), key


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


def test_detailed_open_loop_result_with_label_goodput_metadata(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=20, itl_ms=2, models=["m1"])
    r = llmbench("run", "--url", m.url + "/v1", "--model", "m1", "--rate", "20",
                 "--max-concurrency", "4", *COMMON, "--label", "name=mylabel",
                 "--goodput", "ttft:500", "--percentile-metrics", "ttft,tpot,itl,e2el",
                 "--metric-percentiles", "50,99", "--metadata", "gpu=a100", "--save-result",
                 "--save-detailed", "--result-dir", str(tmp_path / "vllm"),
                 "--out", str(tmp_path / "res"))
    assert r.returncode == 0, r.stderr
    (path,) = (tmp_path / "vllm").iterdir()
    assert re.fullmatch(r"mylabel-20\.0qps-concurrency4-m1-\d{8}-\d{6}\.json", path.name)
    ours = json.loads(path.read_text())
    assert_same_shape(ours, json.loads((FIX / "vllm_result_detailed.json").read_text()))
    assert ours["request_rate"] == 20.0 and ours["label"] == "mylabel" and ours["gpu"] == "a100"
    assert ours["request_goodput"] > 0
    assert len(ours["generated_texts"]) == 8 and all(t.strip() for t in ours["generated_texts"])
    assert ours["errors"] == [""] * 8 and ours["output_lens"] == [8] * 8
    assert all(len(itl) == 7 for itl in ours["itls"])     # 8 tokens, one per event: 7 gaps
    assert ours["start_times"] == sorted(ours["start_times"])


def test_append_result_and_result_filename(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1, models=["m1"])
    target = tmp_path / "all.json"
    for _ in range(2):
        r = llmbench("run", "--url", m.url + "/v1", "--model", "m1", "--concurrency", "2",
                     *COMMON, "--out", str(tmp_path / "res"), "--append-result",
                     "--result-filename", str(target))
        assert r.returncode == 0, r.stderr
    lines = target.read_text().split("\n")
    assert len(lines) == 2 and all(json.loads(x)["completed"] == 8 for x in lines)
    assert "ttfts" not in json.loads(lines[0])             # per-request arrays only on request


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

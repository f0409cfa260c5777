"""From tests/e2e/test_vllm_result.py, the result files that need no console output:
``--save-detailed`` with a label, goodput and metadata, and ``--append-result``, run in this
process through the API (llmbench.run) against the mock."""

import json
import re

import llmbench
from tests.helpers import FIXTURES as FIX
from tests.helpers.vllm_result import assert_same_shape
from tests.helpers.api import run_exit_code

COMMON_API = dict(prompt_tokens=20, output_tokens=8, requests=8)


def test_detailed_open_loop_result_with_label_goodput_metadata(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=20, itl_ms=2, models=["m1"])
    r = llmbench.run(url=m.url + "/v1", model="m1", rate="20", max_concurrency=4, **COMMON_API,
                     label={"name": "mylabel"}, goodput="ttft:500",
                     percentile_metrics="ttft,tpot,itl,e2el", metric_percentiles="50,99",
                     metadata="gpu=a100", save_result=True, save_detailed=True,
                     result_dir=tmp_path / "vllm", out=tmp_path / "res")
    assert run_exit_code(r) == 0
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
        r = llmbench.run(url=m.url + "/v1", model="m1", concurrency=2, **COMMON_API,
                         out=tmp_path / "res", append_result=True, result_filename=target)
        assert run_exit_code(r) == 0
    lines = target.read_text().split("\n")
    assert len(lines) == 2 and all(json.loads(x)["completed"] == 8 for x in lines)
    assert "ttfts" not in json.loads(lines[0])             # per-request arrays only on request

"""--reset-cache: the server's own reset before a step (or a sweep's setting), checked by a
probe's cached tokens, said in one line and kept in run.json. Against the mock (its
/admin/reset_cache, --reset-fails) and loopback servers that answer like vLLM and llama.cpp."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers import llmbench, only_run
from tests.helpers.engines import EngineServer

TINY = ("--hold", "2s", "--ramp-in", "0.5s", "--think", "0", "--output-tokens", "4",
        "--prompt-tokens", "16", "--threshold", "ttft.p50<=60s")


def resets(folder: Path) -> list[dict]:
    return json.loads((only_run(folder) / "run.json").read_text()).get("cache_resets", [])


def test_the_mock_resets_before_every_step_and_a_reset_that_lies_is_caught(mock_factory,
                                                                          tmp_path: Path):
    good = mock_factory(ttft_ms=5, itl_ms=1, kv_tokens=200_000, parallel=4)
    r = llmbench("ramp", "--url", good.url + "/v1", "--users", "1,2", "--reset-cache",
                 "between-steps", "--out", str(tmp_path / "good"), *TINY)
    assert r.returncode == 0, r.stderr
    got = resets(tmp_path / "good")
    assert [x["when"] for x in got] == ["before step 1", "before step 2"]
    for x in got:
        assert x["status"] == "took" and x["how"] == "POST /admin/reset_cache"
        assert x["cached_before"] > 0.5 * x["probe_prompt_tokens"] and x["cached_after"] == 0
        assert x["text"] in r.stdout
    bad = mock_factory(ttft_ms=5, itl_ms=1, kv_tokens=200_000, parallel=4, reset_fails=True)
    r = llmbench("ramp", "--url", bad.url + "/v1", "--users", "1", "--reset-cache",
                 "between-steps", "--out", str(tmp_path / "bad"), *TINY)
    assert r.returncode == 0, r.stderr
    (x,) = resets(tmp_path / "bad")
    assert x["status"] == "did_not_take" and x["cached_after"] == x["cached_before"] > 0
    line = [s for s in r.stdout.splitlines() if "did not take" in s]
    assert line == [x["text"]]
    assert line[0].startswith("warning: cache reset before step 1 did not take: POST "
                              "/admin/reset_cache answered 200, but a probe then found")


def test_off_by_default_for_a_ramp(mock_factory, tmp_path: Path):
    m = mock_factory(ttft_ms=5, itl_ms=1, kv_tokens=200_000)
    r = llmbench("ramp", "--url", m.url + "/v1", "--users", "1", "--out", str(tmp_path), *TINY)
    assert r.returncode == 0, r.stderr
    assert resets(tmp_path) == [] and "cache reset" not in r.stdout


@pytest.mark.parametrize("engine,reset,status,how,said", [
    ("vllm", "ok", "took", "POST /reset_prefix_cache", "took"),
    ("vllm", "refused", "failed", "POST /reset_prefix_cache",
     'failed: POST /reset_prefix_cache answered 200 with {"success": false}; start vLLM with '
     "VLLM_SERVER_DEV_MODE=1"),
    ("llama.cpp", "ok", "took", "POST /slots/{id}?action=erase", "took"),
    ("llama.cpp", "refused", "failed", "POST /slots/{id}?action=erase",
     "failed: POST /slots/0?action=erase answered 501 (This server does not support slots "
     "action. Start it with `--slot-save-path`); start llama-server with --slot-save-path DIR"),
    ("vllm", "lies", "did_not_take", "POST /reset_prefix_cache", "did not take"),
    ("ollama", "ok", "no_reset", None, "Ollama has no cache reset llmbench can call"),
])
def test_each_engine_is_reset_its_own_way(tmp_path: Path, engine, reset, status, how, said):
    with EngineServer(engine, reset=reset) as srv:
        model = {"vllm": "Qwen/Qwen2.5-0.5B-Instruct", "llama.cpp": "gemma-3-270m",
                 "ollama": "qwen2.5:0.5b"}[engine]
        r = llmbench("ramp", "--url", srv.root + "/v1", "--model", model, "--users", "1,2",
                     "--reset-cache", "between-steps", "--out", str(tmp_path), *TINY)
        assert r.returncode == 0, r.stderr
        if engine == "llama.cpp" and reset == "ok":
            # every slot erased, before each step
            assert srv.resets == ["/slots/0?action=erase", "/slots/1?action=erase"] * 2
    got = resets(tmp_path)
    assert [x["status"] for x in got] == [status] * 2
    assert all(x["how"] == how for x in got)
    assert said in got[0]["text"] and got[0]["text"] in r.stdout
    if status == "no_reset":            # said once, kept for every step
        assert r.stdout.count("has no cache reset") == 1


def test_a_sweep_resets_between_settings_by_default(tmp_path: Path):
    r = llmbench("sweep", "--mock", "--setting", "parallel=1,2", "--mock-options",
                 "--ttft-ms 5 --itl-ms 1 --kv-tokens 100000", "--users", "1",
                 "--out", str(tmp_path), *TINY, timeout=300)
    assert r.returncode == 0, r.stderr
    runs = sorted(p / "run.json" for p in only_run(tmp_path).rglob("*") if
                  (p / "run.json").exists() and p != only_run(tmp_path))
    assert len(runs) == 2
    for path in runs:
        (x,) = json.loads(path.read_text())["cache_resets"]
        assert x["when"] == "before this setting's ramp" and x["status"] == "took"


def test_bad_values_are_one_line():
    for args, line in (
            (["ramp", "--reset-cache", "sometimes"],
             "error: --reset-cache 'sometimes': choose between-steps, between-settings, off"),
            (["ramp", "--reset-cache", "between-settings"],
             "error: --reset-cache between-settings is a sweep's (a setting is a sweep's); a "
             "ramp resets between-steps or off")):
        r = llmbench(*args, "--url", "http://127.0.0.1:9/v1")
        assert r.returncode == 2 and r.stderr.strip() == line, r.stderr

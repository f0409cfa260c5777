"""--prefix-hit-ratio end to end: the CLI in a child process against the mock's block-hashed LRU
prefix cache over loopback; the ratio aimed at, achieved, and verified from the replies' usage
and from the mock's vLLM-named /metrics counters."""

import json

from tests.helpers import ROOT  # noqa: F401  (sys.path for the mock)
import llmbench as llmbench_api
from tests.helpers import llmbench, only_run
from tests.helpers.api import run_exit_code

from llmbench.workload.prefix import aligned_shared_tokens


def _run(m, tmp_path, *extra, prompt="512"):
    out = tmp_path / "out"
    r = llmbench("run", "--url", m.url + "/v1", "--model", "mock", "--requests", "40",
                 "--concurrency", "4", "--prompt-tokens", prompt, "--output-tokens", "4",
                 "--prefix-hit-ratio", "0.5", "--prefixes", "4", "--tokenizer", "server",
                 "--out", str(out), *extra)
    assert r.returncode == 0, r.stderr
    return r.stdout, json.loads((only_run(out) / "run.json").read_text())


def test_aligned_shared_tokens_are_whole_blocks():
    assert aligned_shared_tokens(0.5, 512, 16) == 256
    assert aligned_shared_tokens(0.5, 500, 16) == 256          # 250 rounds to 16 blocks
    assert aligned_shared_tokens(0.99, 20, 16) == 16           # one token of its own is left
    assert aligned_shared_tokens(0.0, 512, 16) == 0


def test_target_half_is_achieved_and_verified_from_usage_and_counters(mock_factory, tmp_path):
    m = mock_factory(flavour="vllm", ttft_ms=5, itl_ms=1, prefix_cache=True,
                     prefill_ms_per_token=0.05, block_tokens=16)
    stdout, run = _run(m, tmp_path)
    p = run["prefix_cache"]
    assert p["target"] == 0.5 and p["block_tokens"] == 16 and p["shared_tokens"] % 16 == 0
    assert p["requests"] == 40 and p["usage"]["requests_reporting"] == 40
    assert abs(p["usage"]["ratio"] - 0.5) <= 0.05, p
    # the mock's own counters, read after the warm-up and after the run: warm-up not included
    assert p["server"] is not None and p["server"]["kind"] == "mock"
    assert abs(p["server"]["ratio"] - 0.5) <= 0.05, p
    assert p["server"]["hit_tokens"] == p["usage"]["cached_tokens"]
    # the counters also saw the run's preflight request (a few tokens, nothing cached)
    assert 0 <= p["server"]["queried_tokens"] - p["usage"]["prompt_tokens"] <= 32
    assert p["warnings"] == [] and p["warmup_failed"] == 0
    assert p["ttft_ms"]["hit"]["count"] == 40 and p["ttft_ms"]["miss"]["count"] == 0
    assert "Prefix cache: target 50.0%  achieved" in stdout
    # no prefix-cache warning; the generator's own (late sends, a busy loop) depend on the
    # machine, not on the cache, and may appear on a busy one
    own = ("sent its requests late", "the load generator")
    assert not [x for x in stdout.splitlines()
                if x.startswith("WARNING") and not any(o in x for o in own)], stdout
    assert "TTFT cache hit: 40 req" in stdout
    # the warm-up requests are not in the run's records
    lines = (only_run(tmp_path / "out") / "requests.jsonl").read_text().splitlines()
    assert len(lines) == 40
    html = (only_run(tmp_path / "out") / "report.html").read_text()
    assert "Prefix cache: target and achieved" in html and "TTFT ms by cache" in html


def test_a_range_of_prompt_lengths_holds_the_ratio_per_request(mock_factory, tmp_path):
    m = mock_factory(flavour="vllm", ttft_ms=5, itl_ms=1, prefix_cache=True,
                     prefill_ms_per_token=0.05, block_tokens=16)
    # only the numbers: in this process, through the API
    r = llmbench_api.run(url=m.url + "/v1", model="mock", requests=40, concurrency=4,
                         prompt_tokens="128-1024", output_tokens=4, prefix_hit_ratio=0.5,
                         prefixes=4, tokenizer="server", out=tmp_path / "out")
    assert run_exit_code(r) == 0
    run = json.loads((only_run(tmp_path / "out") / "run.json").read_text())
    p = run["prefix_cache"]
    assert abs(p["usage"]["ratio"] - 0.5) <= 0.05 and abs(p["server"]["ratio"] - 0.5) <= 0.05, p
    assert p["warnings"] == []


def test_a_cache_too_small_for_the_target_warns(mock_factory, tmp_path):
    # 4 shared prompts of 16 blocks each cannot live in an 8-block cache
    m = mock_factory(flavour="vllm", ttft_ms=5, itl_ms=1, prefix_cache=True,
                     prefill_ms_per_token=0.05, block_tokens=16, cache_blocks=8)
    stdout, run = _run(m, tmp_path)
    p = run["prefix_cache"]
    assert p["usage"]["ratio"] < 0.4 and p["server"]["ratio"] < 0.4
    assert any("more than 10 points from the target 0.50" in w and "cache may be too small" in w
               for w in p["warnings"])
    assert "WARNING: prefix-cache hit ratio" in stdout
    assert p["ttft_ms"]["miss"]["count"] > 0
    html = (only_run(tmp_path / "out") / "report.html").read_text()
    assert "more than 10 points from the target" in html


def test_bad_prefix_hit_input_is_one_line_exit_2(tmp_path):
    for args, says in ((["run", "--prefix-hit-ratio", "1.5"], "--prefix-hit-ratio 1.5: must be in [0, 1)"),
                       (["run", "--prefix-hit-ratio", "0.5", "--shared-prefix-tokens", "64"],
                        "drop --shared-prefix-tokens"),
                       (["run", "--prefix-hit-ratio", "0.5", "--cache-block-tokens", "0"],
                        "--cache-block-tokens 0"),
                       (["run", "--prefix-hit-ratio", "0.5", "--dataset", "random",
                         "--url", "http://127.0.0.1:9/v1", "--model", "m"], "--prefix-hit-ratio"),
                       (["ramp", "--prefix-hit-ratio", "0.5"], "llmbench run only")):
        r = llmbench(*args, "--out", str(tmp_path / "o"), timeout=60)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        err = r.stderr.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error:") and says in err[0], (args, r.stderr)
        assert "Traceback" not in r.stderr


# -- on a trace ---------------------------------------------------------------------------------
def _length_trace(path, n=40, lo=128, hi=1024, gap_ms=20, seed=3):
    import random
    rng = random.Random(seed)
    path.write_text("".join(json.dumps({"timestamp": i * gap_ms, "input_length": rng.randint(lo, hi),
                                        "output_length": 4}) + "\n" for i in range(n)))
    return path


def test_a_trace_of_lengths_aims_at_the_ratio_and_is_verified(mock_factory, tmp_path):
    m = mock_factory(flavour="vllm", ttft_ms=5, itl_ms=1, prefix_cache=True,
                     prefill_ms_per_token=0.05, block_tokens=16)
    trace = _length_trace(tmp_path / "t.jsonl")
    out = tmp_path / "out"
    r = llmbench("run", "--url", m.url + "/v1", "--model", "mock", "--trace", str(trace),
                 "--prefix-hit-ratio", "0.5", "--prefixes", "3", "--tokenizer", "server",
                 "--out", str(out))
    assert r.returncode == 0, r.stderr
    run = json.loads((only_run(out) / "run.json").read_text())
    p = run["prefix_cache"]
    assert p["target"] == 0.5 and p["prefixes"] == 3 and p["source"] == "--prefix-hit-ratio"
    assert p["requests"] == 40 and p["usage"]["requests_reporting"] == 40
    assert abs(p["usage"]["ratio"] - 0.5) <= 0.05 and abs(p["server"]["ratio"] - 0.5) <= 0.05, p
    assert p["warnings"] == [] and p["warmup_failed"] == 0
    # the prompts still have the trace's lengths: shared part + own part
    lines = [json.loads(x) for x in (only_run(out) / "requests.jsonl").read_text().splitlines()]
    assert len(lines) == 40          # the warm-up is not among the measured requests
    want = [json.loads(x)["input_length"] for x in trace.read_text().splitlines()]
    got = sorted(x["prompt_tokens"] for x in lines)
    assert all(abs(g - w) <= 24 for g, w in zip(got, sorted(want))), (got, sorted(want))
    assert "Prefix cache: target 50.0%" in r.stdout


def test_a_mooncake_trace_verifies_the_ratio_its_hash_ids_imply(mock_factory, tmp_path):
    from llmbench.workload.traces import _Row, implied_hit_ratio
    # 1st: blocks 1,2 (miss); 2nd: 1,2 hit, 3 miss; 3rd: 1 hit, 4 miss, 2 not a prefix: miss
    rows = [_Row("a", 0, 1024, 4, (1, 2)), _Row("b", 1, 1536, 4, (1, 2, 3)),
            _Row("c", 2, 1536, 4, (1, 4, 2))]
    assert implied_hit_ratio(rows) == (1024 + 512) / (1024 + 1536 + 1536)
    # a block first sent cut short is cached only that far
    assert implied_hit_ratio([_Row("a", 0, 100, 4, (7,)), _Row("b", 1, 512, 4, (7,))]) == 100 / 612
    m = mock_factory(flavour="vllm", ttft_ms=5, itl_ms=1, prefix_cache=True,
                     prefill_ms_per_token=0.01, block_tokens=16)
    out = tmp_path / "out"
    r = llmbench("run", "--url", m.url + "/v1", "--model", "mock", "--trace",
                 "datasets/trace_mooncake_sample.jsonl", "--trace-speed", "20", "--tokenizer",
                 "server", "--out", str(out))
    assert r.returncode == 0, r.stderr
    p = json.loads((only_run(out) / "run.json").read_text())["prefix_cache"]
    assert p["source"].startswith("the trace's hash_ids") and 0 < p["target"] < 1
    assert abs(p["usage"]["ratio"] - p["target"]) <= 0.05, p
    assert "Prefix cache: the trace implies" in r.stdout


def test_prefix_hit_ratio_refuses_traces_it_cannot_aim(tmp_path):
    msgs = tmp_path / "m.jsonl"
    msgs.write_text(json.dumps({"timestamp": 0, "messages": [{"role": "user", "content": "hi"}]})
                    + "\n")
    sess = tmp_path / "s.jsonl"
    sess.write_text("".join(json.dumps({"timestamp": i, "session_id": "a", "input_length": 64,
                                        "output_length": 4}) + "\n" for i in range(2)))
    for path, says in ((msgs, "carries its own messages"), (sess, "sessions of several turns"),
                       ("datasets/trace_mooncake_sample.jsonl", "Mooncake trace")):
        r = llmbench("run", "--url", "http://127.0.0.1:9/v1", "--model", "m", "--trace",
                     str(path), "--prefix-hit-ratio", "0.5")
        assert r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1, r.stderr

"""Router probe and server probes: overhead against a known added delay, identity and affinity
behind a round-robin proxy, each scraper on realistic metrics text, the verdict with server
state (in test_ramp), bad input."""

import json
import os
from pathlib import Path

import pytest

from llmbench.analysis.router_ab import router_bound
from llmbench import servers
from llmbench.servers import llamacpp, nomyo, ollama
from llmbench.servers.prometheus import parse_prometheus
from llmbench.servers.scrape import ServerProbe

from tests.helpers import free_port, run
from tests.helpers.proxies import Proxy
from tests.helpers.api import probe as probe_api
from tests.helpers import only_run
from tests.helpers import probe_cli as probe      # the CLI: for wording and exit codes

from tests.helpers import FIXTURES as FIX  # noqa: E402


def _adapter(kind):
    """The kind's /metrics adapter (llama.cpp's is one of its two ways)."""
    return llamacpp.METRICS if kind == "llamacpp" else next(
        a for a in servers.ADAPTERS if a.name == kind)


def extract(kind, metrics):
    return _adapter(kind).extract(metrics).to_dict()


def wanted_metrics(kind):
    return _adapter(kind).metric_names


def test_measures_a_known_added_delay(mock_factory, tmp_path):
    # two identical proxies in front of the same mock; one adds 20 ms before the first byte
    m = mock_factory(ttft_ms=30, itl_ms=5, tokens=10)
    with Proxy([m.url], delay_s=0.020) as slow, Proxy([m.url]) as plain:
        # only the numbers: in this process, through the API (it raises where the CLI fails)
        probe_api(slow.url + "/v1", plain.url + "/v1", tmp_path, users="2")
    step = json.loads((only_run(tmp_path) / "run.json").read_text())["steps"][0]
    # the proxy's own sleep wakes a little late; compare with what it really added
    import numpy as np
    added_ms = float(np.median(slow.added_s)) * 1000
    assert added_ms >= 19.5          # the proxy's own sleep; late wake-ups on a busy machine
    # within 3 ms, or within the width of the probe's own 95% interval when a busy machine
    # made it wider than that (two busy loops: 24.3 ms measured for 20.5 ms added)
    lo, hi = step["ttft_p50"]["ci_ms"]
    assert step["ttft_p50"]["overhead_ms"] == pytest.approx(added_ms, abs=max(3.0, hi - lo))
    assert step["ttft_p50"]["significant"]
    assert abs(step["itl_p50"]["overhead_ms"]) < 2.0          # the delay is before the first byte
    assert lo <= step["ttft_p50"]["overhead_ms"] <= hi


def test_no_overhead_when_nothing_is_added(mock_factory, tmp_path, capsys):
    m = mock_factory(ttft_ms=30, itl_ms=5, tokens=10)
    # 4 slices a path, not 2: with 2, a busy machine that happened to slow both router slices
    # by 1-3 ms (CI: 1 run in ~5) leaves no slice of the other kind to resample, and an A/A
    # difference of that size reads as certain (the README asks users for --rounds 3 or more)
    # in this process, through the API: progress=None prints the command's lines (no live line)
    probe_api(m.url + "/v1", m.url + "/v1", tmp_path, users="2", rounds=4, progress=None)
    out = capsys.readouterr().out
    step = json.loads((only_run(tmp_path) / "run.json").read_text())["steps"][0]
    # "not significant" is the claim (interval spans zero, or under 1 ms / 2 %); the size bound
    # leaves room for a busy machine, which shifts both paths alike but not in lock-step
    assert abs(step["ttft_p50"]["overhead_ms"]) < 3.0
    assert not step["ttft_p50"]["significant"]
    # E2EL (~80 ms here) spans more of the machine's load swings between slices, so a busy box
    # can make a 2 ms A/A difference "significant"; what must hold is that it stays small
    assert abs(step["e2el_p50"]["overhead_ms"]) < 8.0
    assert "No significant router overhead" in out


def _slice_records(path: str, ttft_ms_by_slice: list[float], t_starts: list[float],
                   per_slice: int = 40, seed: int = 0) -> list:
    """Records of one path: per slice, ``per_slice`` requests whose TTFTs scatter ±1 ms
    around that slice's level (a busy machine moves a whole slice)."""
    import numpy as np

    from llmbench.records.record import Record
    rng = np.random.default_rng(seed)
    out = []
    for level, t0 in zip(ttft_ms_by_slice, t_starts):
        for i in range(per_slice):
            start = t0 + 0.01 * i
            first = start + (level + rng.uniform(-1, 1)) / 1000
            out.append(Record(f"{path}-{len(out)}", scheduled=start, start=start, ok=True,
                              status=200, token_times=[first, first + 0.005], first_token=first,
                              end=first + 0.005, done=first + 0.006, output_tokens=2, path=path))
    return out


def test_a_slice_that_ran_on_a_busier_machine_is_not_taken_for_overhead():
    from llmbench.analysis.router_ab import overhead
    # A/A: the same server both ways; the router's second slice met a busy machine (+3 ms)
    starts = [0.0, 1.0, 2.0, 3.0]            # router, direct, direct, router (the probe's order)
    slices = [("router", 0.0, 0.9), ("direct", 1.0, 1.9), ("direct", 2.0, 2.9),
              ("router", 3.0, 3.9)]
    router = _slice_records("router", [30.0, 33.0], [starts[0], starts[3]], seed=1)
    direct = _slice_records("direct", [30.2, 30.4], [starts[1], starts[2]], seed=2)
    # requests taken one by one, the 1.5 ms median shift looks certain ...
    naive = overhead(router, direct, "ttft_p50")
    assert naive.significant and naive.ci_ms[0] > 0
    # ... but it came from one slice: resampling slices puts zero inside the interval
    o = overhead(router, direct, "ttft_p50", slices=slices)
    assert o.overhead_ms == naive.overhead_ms          # the point estimate is the same
    lo, hi = o.ci_ms
    assert lo < 0 < hi and not o.significant


def test_overhead_that_every_slice_shows_stays_significant_when_slices_are_resampled():
    from llmbench.analysis.router_ab import overhead
    starts = [0.0, 1.0, 2.0, 3.0, 4.0, 5.0]
    paths = ["router", "direct", "direct", "router", "router", "direct"]
    slices = [(p, t, t + 0.9) for p, t in zip(paths, starts)]
    # 20 ms added by the router, with slice-to-slice load swings of up to 2 ms on both paths
    router = _slice_records("router", [50.0, 52.0, 51.0], [0.0, 3.0, 4.0], seed=3)
    direct = _slice_records("direct", [30.5, 32.0, 30.0], [1.0, 2.0, 5.0], seed=4)
    o = overhead(router, direct, "ttft_p50", slices=slices)
    assert o.significant and 17.0 < o.ci_ms[0] and o.ci_ms[1] < 23.0
    # and the interval is wider than one that ignores the slices: it carries their spread
    naive = overhead(router, direct, "ttft_p50")
    assert (o.ci_ms[1] - o.ci_ms[0]) > 1.5 * (naive.ci_ms[1] - naive.ci_ms[0])


def test_two_stage_resampling_draws_slices_by_size_and_one_slice_is_plain_resampling():
    import numpy as np

    from llmbench.analysis.stats import _two_stage
    rng = np.random.default_rng(0)
    # 40 requests: 30 ran in slice 0 (indices 0-29), 10 in slice 1 (30-39), listed mixed
    slice_of = np.r_[np.zeros(30, int), np.ones(10, int)][np.random.default_rng(1).permutation(40)]
    rows = _two_stage(slice_of, 4000, 40, rng)
    assert rows.shape == (4000, 40) and rows.min() >= 0 and rows.max() < 40
    in_1 = (slice_of[rows] == 1).mean(axis=1)
    # slices drawn with replacement: some rows hold one slice only
    assert (in_1 == 0).mean() > 0.2 and (in_1 == 1).mean() > 0.2
    # a row that drew both slices takes requests in proportion to their sizes (10 of 40):
    # E = 1/4 * 0 + 1/4 * 1 + 1/2 * 0.25 = 0.375 (it would be 0.5 were slices weighed alike)
    mixed = in_1[(in_1 > 0) & (in_1 < 1)]
    assert abs(mixed.mean() - 0.25) < 0.02
    assert abs(in_1.mean() - 0.375) < 0.03
    # one slice: every row is a plain resample of all requests
    one = _two_stage(np.zeros(50, int), 2000, 50, rng)
    assert one.shape == (2000, 50) and set(np.unique(one)) == set(range(50))
    assert abs(one.mean() - 24.5) < 0.3 and 0.1 < (one.mean(axis=1).std()) < 3


def test_token_gaps_of_one_request_are_resampled_together():
    from llmbench.analysis.router_ab import overhead
    from llmbench.records.record import Record
    # per path 40 requests in one slice; each request's 20 gaps sit at its own level
    # (anywhere in 5-7 ms, ±0.01 ms): the gaps of a request are not independent values
    def recs(path, seed):
        import numpy as np
        rng = np.random.default_rng(seed)
        out = []
        for i in range(40):
            start, level = float(i), rng.uniform(0.005, 0.007)
            gaps = level + rng.uniform(-1e-5, 1e-5, 20)
            times = list(start + 0.03 + np.r_[0.0, np.cumsum(gaps)])
            out.append(Record(f"{path}-{i}", scheduled=start, start=start, ok=True, status=200,
                              token_times=times, first_token=times[0], end=times[-1],
                              done=times[-1], output_tokens=21, path=path))
        return out
    o = overhead(recs("router", 5), recs("direct", 6), "itl_p50")
    # gaps resampled one by one give an interval ~0.15-0.19 ms wide here (as if there were
    # 800 independent values); drawing whole requests, about sqrt(20) times wider
    lo, hi = o.ci_ms
    assert hi - lo > 0.4, (lo, hi)


def test_identity_spread_and_affinity_behind_round_robin(mock_factory, tmp_path, capsys):
    m = mock_factory(replicas=3, ttft_ms=5, itl_ms=1, tokens=5, prefix_cache=True)
    with Proxy(m.urls) as rr:
        # in this process; progress=None: the command's lines, without the live line
        probe_api(rr.url + "/v1", m.urls[0] + "/v1", tmp_path, users="2", progress=None)
    out = capsys.readouterr().out
    run_ = json.loads((only_run(tmp_path) / "run.json").read_text())
    be = run_["backends"]
    assert set(be["backends"]) == {"replica-0", "replica-1", "replica-2"}
    shares = [v["share"] for v in be["backends"].values()]
    assert max(shares) - min(shares) < 0.05 and be["imbalance"] < 1.1
    # round robin: 2 users over 3 backends, a conversation's next turn moves on
    assert be["affinity"]["same_backend_next_turn"] < 0.5
    assert all(v["cache_hit_rate"] is not None for v in be["backends"].values())
    assert "Backends behind the router" in out and "affinity" in out


def test_affinity_and_cache_hits_behind_a_sticky_router(mock_factory, tmp_path):
    m = mock_factory(replicas=3, ttft_ms=5, itl_ms=1, tokens=5, prefix_cache=True)
    with Proxy(m.urls, sticky=True) as sticky:
        # only the numbers: in this process, through the API (it raises where the CLI fails)
        probe_api(sticky.url + "/v1", m.urls[0] + "/v1", tmp_path, users="2", prompt_tokens=64)
    be = json.loads((only_run(tmp_path) / "run.json").read_text())["backends"]
    assert be["affinity"]["same_backend_next_turn"] == 1.0
    assert be["affinity"]["whole_conversation_on_one_backend"] == 1.0
    # later turns carry the history the same backend has cached
    assert max(v["cache_hit_rate"] for v in be["backends"].values()) > 0.3


def test_router_that_cannot_reach_its_backend(mock_factory, tmp_path):
    m = mock_factory()
    with Proxy([m.url], fail_upstream=True) as bad:
        r = probe(bad.url + "/v1", m.url + "/v1", tmp_path, "--users", "1")
    assert r.returncode == 5
    assert "502" in r.stderr and "upstream connect error" in r.stderr and "Traceback" not in r.stderr


def test_mismatched_model_names(mock_factory, tmp_path):
    m = mock_factory(models=["alias"])
    r = probe(m.url + "/v1", m.url + "/v1", tmp_path, "--users", "1", model="other")
    assert r.returncode == 5 and "404" in r.stderr and "--direct-model" in r.stderr


def test_router_url_that_is_not_an_llm(tmp_path, mock_factory):
    from tests.helpers import RawServer, http_head
    m = mock_factory()
    body = b"<html>login</html>"
    with RawServer([(0, http_head("200 OK", "text/html", length=len(body)) + body)]) as s:
        r = probe(s.url + "/v1", m.url + "/v1", tmp_path, "--users", "1")
    assert r.returncode == 5 and "did not answer like an LLM API" in r.stderr


def test_router_bound_named():
    from llmbench.results.schema import ProbeStep

    def step(users, ovh, lo, hi, direct):
        return ProbeStep.from_dict({"users": users,
                                    "ttft_p50": {"overhead_ms": ovh, "ci_ms": [lo, hi]},
                                    "direct": {"median_ttft_ms": direct}})
    steps = [step(1, 2.0, 1.5, 2.5, 50), step(4, 2.2, 1.8, 2.6, 51), step(16, 30.0, 25, 35, 52)]
    assert router_bound(steps).users == 16
    # the direct path grew too: the backend, not the router
    steps[2].direct.ttft.median = 200
    assert router_bound(steps) is None


# -- scrapers on realistic text ------------------------------------------------------------------
def test_vllm_metrics():
    text = (FIX / "vllm_metrics.txt").read_text()
    s = extract("vllm", parse_prometheus(text))
    assert s["running"] == 3 and s["waiting"] == 5
    assert s["kv_cache_usage"] == pytest.approx(0.42)
    assert s["queue_time_count"] == 120 and s["queue_time_sum_s"] == pytest.approx(33.5)
    assert s["prefix_cache_hits"] == 1000 and s["preemptions"] == 2


def test_prometheus_escaped_label_values():
    """Label values may hold `}`, `,`, `=`, escaped quotes, backslashes and newlines (the text
    format escapes `\\`, `\"` and `\n`): every series is kept and every value unescaped."""
    text = "\n".join([
        '# HELP vllm:num_requests_running Running.',
        'vllm:num_requests_running{model_name="a}b",engine="0"} 2',
        'vllm:num_requests_running{model_name="say \\"hi\\", {x=1}",engine="1"} 3',
        'vllm:num_requests_running{model_name="C:\\\\models\\nnext"} 4 1712345678000',
        'vllm:num_requests_waiting{ model_name = "m" , } +Inf',
        'vllm:num_requests_waiting_other{model_name="m"} 100',
        'vllm:kv_cache_usage_perc 0.5',
        'broken{model_name="unterminated} 1',
    ])
    m = parse_prometheus(text)
    running = m["vllm:num_requests_running"]
    assert [v for _, v in running] == [2.0, 3.0, 4.0]
    assert running[0][0] == {"model_name": "a}b", "engine": "0"}
    assert running[1][0] == {"model_name": 'say "hi", {x=1}', "engine": "1"}
    assert running[2][0] == {"model_name": "C:\\models\nnext"}
    assert m["vllm:num_requests_waiting"] == [({"model_name": "m"}, float("inf"))]
    assert m["vllm:kv_cache_usage_perc"] == [({}, 0.5)]
    assert "broken" not in m
    # filtered by name: the same series, nothing else parsed
    only = parse_prometheus(text, names={"vllm:num_requests_running", "vllm:num_requests_waiting"})
    assert set(only) == {"vllm:num_requests_running", "vllm:num_requests_waiting"}
    assert only["vllm:num_requests_running"] == running
    s = extract("vllm", parse_prometheus(text, names=wanted_metrics("vllm")))
    assert s["running"] == 9 and s["kv_cache_usage"] == 0.5


def test_prometheus_filtered_parse_matches_full_parse_on_fixtures():
    for kind in ("vllm", "sglang", "llamacpp", "tgi"):
        text = (FIX / f"{kind}_metrics.txt").read_text()
        assert extract(kind, parse_prometheus(text, names=wanted_metrics(kind))) == \
            extract(kind, parse_prometheus(text))


def test_sglang_llamacpp_tgi_metrics():
    s = extract("sglang", parse_prometheus((FIX / "sglang_metrics.txt").read_text()))
    assert s["running"] == 7 and s["waiting"] == 2 and s["kv_cache_usage"] == pytest.approx(0.31)
    s = extract("llamacpp", parse_prometheus((FIX / "llamacpp_metrics.txt").read_text()))
    assert s["running"] == 1 and s["waiting"] == 4 and s["kv_cache_usage"] == pytest.approx(0.12)
    s = extract("tgi", parse_prometheus((FIX / "tgi_metrics.txt").read_text()))
    assert s["running"] == 8 and s["waiting"] == 3


def test_ollama_ps_nomyo_usage_llamacpp_slots():
    ps = {"models": [{"name": "qwen2.5:0.5b", "size": 1000, "size_vram": 600}]}
    assert ollama.extract(ps).to_dict() == {"models_loaded": ["qwen2.5:0.5b"], "size_bytes": 1000,
                                     "vram_bytes": 600, "ram_bytes": 400}
    usage = {"usage_counts": {"http://a:11434": {"llama3": 2, "qwen": 1}, "http://b:11434": {}}}
    # NOMYO's counts are its in-flight requests (running or queued at the backend), not running
    assert nomyo.extract(usage).to_dict() == {"backends_in_flight": {"http://a:11434": 3, "http://b:11434": 0},
                                          "in_flight": 3}
    slots = [{"id": 0, "is_processing": True}, {"id": 1, "is_processing": False}]
    assert llamacpp.extract_slots(slots, {"total_slots": 2}).to_dict() == {"running": 1, "slots": 2}


def test_auto_detect_polls_the_mock_without_flooding(mock_factory):
    import asyncio
    m = mock_factory(parallel=2)

    async def go():
        p = ServerProbe(m.url)
        async with p.session() as s:
            kind = await p.detect(s)
            sample = await p.poll_once(s)
        return kind, sample
    kind, sample = run(go())
    assert kind == "mock" and sample["running"] == 0 and sample["slots"] == 2


def test_auto_detect_gives_up_quietly_on_a_plain_server(tmp_path):
    import asyncio
    from tests.helpers import RawServer, http_head
    script = [(0, http_head("404 Not Found", "text/plain", length=0))]
    with RawServer(script) as s:
        async def go():
            p = ServerProbe(s.url)
            async with p.session() as sess:
                return await p.detect(sess), p.note
        kind, note = run(go())
        asked = len(s.requests)
    assert kind is None and "nothing to poll" in note
    # a few pages, each once (LM Studio's /api/v0/models joined them): no retries, no loop
    assert asked <= 5


def test_ramp_writes_server_samples_and_timeline(mock_factory, tmp_path):
    import llmbench
    from tests.helpers.api import ramp_exit_code
    m = mock_factory(ttft_ms=20, itl_ms=5, parallel=1)
    r = llmbench.ramp(url=m.url + "/v1", model="mock", users="1,3", ramp_in="0.2s", hold="3s",
                      think="0", turns=1, prompt_tokens=10, output_tokens=10, out=tmp_path)
    assert ramp_exit_code(r) == 0, r.verdict
    d = only_run(tmp_path)
    samples = [json.loads(x) for x in (d / "server.jsonl").read_text().splitlines()]
    assert len(samples) >= 3 and samples[0]["kind"] == "mock"
    assert max(s["waiting"] for s in samples) >= 1 and max(s["running"] for s in samples) == 1
    tl = [json.loads(x) for x in (d / "timeline.jsonl").read_text().splitlines()]
    assert any("server_running" in row for row in tl)
    run_ = json.loads((d / "run.json").read_text())
    assert run_["server_probe"]["kind"] == "mock"

"""``llmbench context``: the longest prompt a server serves, against the mock with a set
context (exactly: the mock counts words, as its --context refuses) and loopback servers."""

from __future__ import annotations

import re

from tests.helpers import llmbench


def rows(stdout: str) -> list[tuple[int, str, str]]:
    out = []
    for line in stdout.splitlines():
        m = re.match(r"\s+(\d+)\s+(\d+|-)\s+([\d.]+s|-)\s+(.+)$", line)
        if m:
            out.append((int(m.group(1)), m.group(2), m.group(4)))
    return out


def test_the_mock_with_a_set_context_is_found_exactly(mock_factory):
    mock = mock_factory(ttft_ms=2, itl_ms=1, prefill_ms_per_token=0.2, context=700,
                        models=["m"])
    r = llmbench("context", "--url", mock.url + "/v1", "--from-words", "100")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[:2] == [f"context of m at {mock.url}/v1/chat/completions",
                         "the server says n_ctx per slot: 700 tokens"]
    assert "longest prompt served: 699 tokens (the server's limit: 700)" in lines
    got = rows(r.stdout)
    # doubling until refused, then halving the gap to one word
    words = [w for w, _, _ in got]
    assert words[:4] == [100, 200, 400, 800] and got[3][2].startswith("not served (http_status")
    served = sorted(w for w, _, what in got if what == "served")
    refused = sorted(w for w, _, what in got if what.startswith("not served"))
    assert refused[0] - served[-1] == 1
    text = " ".join(r.stdout.split())
    assert "the next, about 700 tokens: the server refused it (HTTP 400: the request exceeds " \
           "the available context size" in text
    assert re.search(r"^prefill: about [\d,]+ tokens/s \(TTFT [\d.]+ s at \d+ tokens, [\d.]+ s "
                     r"at 699\)$", r.stdout, re.M)
    assert all(len(line) <= 80 for line in lines)


def test_a_ttft_bound_stops_it(mock_factory):
    # 2 ms per prompt token: 400 words take about 0.8 s, over a 0.5 s bound
    mock = mock_factory(ttft_ms=2, itl_ms=1, prefill_ms_per_token=2.0, models=["m"])
    r = llmbench("context", "--url", mock.url + "/v1", "--from-words", "50",
                 "--ttft-limit", "0.5s")
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    assert re.search(r"the next, about \d+ tokens: its TTFT [\d.]+ s passed the bound \(0.5 s, "
                     r"--ttft-limit\)", text)
    longest = int(re.search(r"longest prompt served: (\d+) tokens", text).group(1))
    assert 150 <= longest <= 260          # 0.5 s of 2 ms tokens, less the fixed costs


def test_bad_values_are_one_line():
    for args, line in ((["--from-words", "0"], "error: --from-words 0: give 1 to 10000000 words"),
                       (["--from-words", "100", "--up-to-words", "50"],
                        "error: --up-to-words 50: give --from-words (100) to 10000000 words"),
                       (["--ttft-limit", "0"], None)):
        r = llmbench("context", "--url", "http://127.0.0.1:9/v1", *args)
        assert r.returncode == 2, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        if line:
            assert r.stderr.strip() == line

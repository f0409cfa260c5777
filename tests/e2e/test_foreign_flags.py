"""Other load testers' option names (issue 45): vLLM's, GuideLLM's, k6's and Locust's names
for the same thing are accepted; the ones that mean something else here are refused with the
flag that does the job, in one line (not click's nearest spelling: --num-prompts suggested
--prompt-salt)."""

import json

from tests.helpers import llmbench, only_run


def test_vllm_names_run_as_ours(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    r = llmbench("run", "--url", m.url + "/v1", "--model", "mock",
                 "--num-prompts", "5", "--request-rate", "20", "--max-concurrency", "2",
                 "--random-input-len", "16", "--random-output-len", "4",
                 "--out", str(tmp_path), timeout=120)
    assert r.returncode == 0, r.stderr
    run = json.loads((only_run(tmp_path) / "run.json").read_text())
    assert run["summary"]["completed"] == 5
    load = json.dumps(run["config"])
    assert '"requests": 5' in load and '"rate": 20' in load, load
    assert "Request rate configured (RPS):           20.00" in r.stdout


def test_other_meanings_are_refused_with_the_flag_meant_here():
    cases = {
        ("run", "--base-url", "http://localhost:8000"): "--url http://HOST:PORT/v1",
        ("run", "--dataset-name", "random"): "--dataset random",
        ("run", "--dataset-path", "x.json"): "--dataset FILE",
        ("run", "--users", "4"): "--concurrency N",
        ("ramp", "--num-prompts", "5"): "`llmbench run --requests ...`",
        ("ramp", "--request-rate", "2"): "`llmbench run --rate ...`",
        ("ramp", "--spawn-rate", "2"): "--ramp-in DURATION",
        ("run", "--processor", "x"): "--tokenizer",
    }
    for args, meant in cases.items():
        r = llmbench(*args, timeout=60)
        assert r.returncode == 2, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and meant in lines[0], \
            (args, r.stderr)
        assert "--prompt-salt" not in r.stderr and "Traceback" not in r.stderr
    # a plain typo still gets click's nearest spelling
    r = llmbench("run", "--requestz", "5", timeout=60)
    assert r.returncode == 2 and "--requests" in r.stderr

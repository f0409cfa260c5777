"""What `llmbench run` against a URL does not load because it does not need it (issue 50 §2:
start-up under 0.3 s of CPU; scripts/bench_startup.py and scripts/bench_client_cpu.py --whole
print the figures). Each test checks what is loaded or done, never a time."""

from __future__ import annotations

from tests.helpers import llmbench


def test_an_http_run_does_not_load_the_environments_ca_bundles(tmp_path):
    # the environment's bundle is checked (loaded, ~0.02 s of CPU each) only when something
    # will speak TLS: a broken one does not stop an http:// run, and still stops an https:// one
    bad = tmp_path / "broken.pem"
    bad.write_text("not a certificate\n")
    env = {"REQUESTS_CA_BUNDLE": str(bad)}
    base = ("--model", "m", "--requests", "1", "--out", str(tmp_path / "o"), "--no-progress")
    r = llmbench("run", "--url", "http://127.0.0.1:9/v1", *base, env=env)
    assert "not a PEM" not in r.stderr and "cannot reach" in r.stderr, r.stderr
    r = llmbench("run", "--url", "https://127.0.0.1:9/v1", *base, env=env)
    assert r.returncode == 2 and "REQUESTS_CA_BUNDLE" in r.stderr and "not a PEM" in r.stderr, \
        r.stderr
    # an https:// address in another option (a node exporter's) counts too
    r = llmbench("run", "--url", "http://127.0.0.1:9/v1", *base, "--host-metrics",
                 "https://127.0.0.1:9/metrics", env=env)
    assert r.returncode == 2 and "not a PEM" in r.stderr, r.stderr


def test_the_collector_held_through_start_up_is_on_again_for_the_load(mock_factory, tmp_path):
    # the command line holds cyclic collection through start-up (cli.app.main); the harness
    # gives it back, with start-up's objects frozen out of it, before the first request
    import gc
    import llmbench
    from llmbench.load import hold_collector, release_collector
    m = mock_factory(ttft_ms=5, itl_ms=1)
    seen = []
    frozen = gc.get_freeze_count()
    hold_collector()
    try:
        assert not gc.isenabled()
        # the harness turns it back on (a harness that did not would leave it off here)
        run = llmbench.run(url=m.url + "/v1", model="mock", concurrency=1, requests=2,
                           out=tmp_path, progress=False, quiet=True)
        seen.append(gc.isenabled())
    finally:
        release_collector()
        gc.enable()
    assert run.summary.completed == 2
    assert seen == [True] and gc.get_freeze_count() > frozen
    gc.unfreeze()
    # not held: nothing is frozen, collection is as it was
    release_collector()
    assert gc.isenabled() and gc.get_freeze_count() == 0


WATCH = r"""
import importlib, json, sys
app = importlib.import_module("llmbench.cli.app")
from llmbench.load import harness
at = {}
run = harness.Harness.run
def watched(self, *a, **k):
    at["load"] = sorted(sys.modules)
    return run(self, *a, **k)
harness.Harness.run = watched
import atexit
atexit.register(lambda: print("MODULES " + json.dumps({"load": at.get("load"),
                                                        "end": sorted(sys.modules)})))
sys.argv = ["llmbench", *sys.argv[1:]]
app.main()
"""


def _modules(*args: str) -> tuple[set[str], set[str]]:
    import json
    import subprocess
    import sys
    from tests.helpers import ENV, ROOT
    env = {k: v for k, v in ENV.items() if k != "LLMBENCH_TOKENIZER"}    # the default: auto
    r = subprocess.run([sys.executable, "-c", WATCH, *args], capture_output=True, text=True,
                       env=env, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("MODULES "))
    got = json.loads(line[len("MODULES "):])
    return set(got["load"]), set(got["end"])


def test_a_run_against_a_url_loads_only_what_it_uses(mock_factory, tmp_path):
    # the mock counts prompts (/tokenize), reports usage and is polled by no probe: nothing
    # here needs pydantic (typer's coercion), aiohttp (the probe's client; the requests go by
    # llmbench's own), a tokenizer library (the server counts) or a chart before the load
    m = mock_factory(ttft_ms=5, itl_ms=1)
    load, end = _modules("run", "--url", m.url + "/v1", "--model", "mock", "--requests", "3",
                         "--output-tokens", "4", "--server-probe", "off", "--quiet",
                         "--out", str(tmp_path))
    never = {"pydantic", "aiohttp", "tiktoken", "tokenizers", "transformers", "matplotlib",
             "scipy", "datasets", "rich", "yarl", "multidict", "email"}
    loaded = never & {n.split(".")[0] for n in end}
    assert not loaded, sorted(loaded)
    # http.client (the server tokenizer's plain connection is its own), numpy.ma (a linear
    # percentile is percentile.numpy_linear, not np.percentile, whose np.unique imports it)
    assert not {"http.client", "numpy.ma"} & end
    later = {"llmbench.report.html", "llmbench.report.charts", "llmbench.report.svgplot"}
    assert not later & load and later <= end            # the report: after the load, written
    assert "llmbench.workload.server_tokenizer" in load  # (what did count the prompts)


def test_a_default_run_probes_the_server_without_aiohttp(mock_factory, tmp_path):
    # every default: the server probe detects and polls the mock, telemetry asks what the
    # server is and finds its process by its port; over http:// all of it goes by
    # servers/plainget.py, so aiohttp (~0.15 s of CPU to import) is never loaded
    import json
    m = mock_factory(ttft_ms=5, itl_ms=1)
    _load, end = _modules("run", "--url", m.url + "/v1", "--model", "mock", "--requests", "3",
                          "--output-tokens", "4", "--quiet", "--out", str(tmp_path))
    assert "aiohttp" not in {n.split(".")[0] for n in end}
    assert "llmbench.servers.plainget" in end
    run = json.loads(next(tmp_path.glob("*/run.json")).read_text())
    probe = run["server_probe"]
    assert probe["kind"] == "mock" and probe["samples"] >= 1, probe
    local = run["telemetry"]["sources"]["local"]
    # the mock listens in this test's process (found by netlink's listening sockets and the
    # fd scan: servers/procfs.find_listener)
    import os
    port = int(m.url.rsplit(":", 1)[1].split("/")[0])
    assert local["server_pid"] == os.getpid() and local["found_by"] == f"port {port}", local


def test_the_command_line_keeps_numpys_blas_to_one_thread_unless_the_user_chose():
    # OpenBLAS's spare threads spun ~0.1 s of CPU in every command's first second (issue 50
    # §2): the command line asks for one thread, and marks the setting as its own (a server it
    # starts does not get it: servers/managed.their_environ); a user's own setting stands
    import os
    import subprocess
    import sys
    from tests.helpers import ENV, ROOT
    code = ("import os, llmbench.cli, numpy; print(os.environ['OPENBLAS_NUM_THREADS'], "
            "os.environ.get('LLMBENCH_SET_OPENBLAS'), len(os.listdir('/proc/self/task')))")
    blas = ("OPENBLAS_NUM_THREADS", "LLMBENCH_SET_OPENBLAS", "OMP_NUM_THREADS",
            "GOTO_NUM_THREADS")
    env = {k: v for k, v in ENV.items() if k not in blas}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=ROOT, timeout=60)
    threads, mark, tasks = r.stdout.split()
    assert (threads, mark) == ("1", "1"), r.stdout + r.stderr
    assert tasks == "1"                     # no BLAS thread beside the main one
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env={**env, "OPENBLAS_NUM_THREADS": "2"}, cwd=ROOT, timeout=60)
    threads, mark, tasks = r.stdout.split()
    assert (threads, mark) == ("2", "None"), r.stdout + r.stderr
    if (os.cpu_count() or 1) > 1:           # OpenBLAS starts no more threads than cores
        assert tasks == "2"

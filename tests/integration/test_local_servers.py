"""No --url: the servers on this machine's usual ports (servers/local.py), each a loopback
server of the test's own on a free port (LLMBENCH_LOCAL_PORTS points discovery there, so what
listens on the machine's real ports cannot change what a test finds)."""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from llmbench.servers import local
from tests.helpers import free_port, llmbench, only_run
from tests.helpers.engines import EngineServer


def port_of(s) -> int:
    if isinstance(s, int):
        return s
    if hasattr(s, "port"):
        return s.port
    return int(s.url.rsplit(":", 1)[1])              # the mock: its URL


def ports_env(*servers) -> dict[str, str]:
    return {local.PORTS_ENV: ",".join(str(port_of(s)) for s in servers)}


def find(monkeypatch, *servers) -> list[local.Found]:
    monkeypatch.setenv(local.PORTS_ENV, ports_env(*servers)[local.PORTS_ENV])
    return local.find()


# context: what the server was loaded with; LM Studio 0.3 says only the model's largest
@pytest.mark.parametrize("engine,kind,version,model,slots,context", [
    ("ollama", "ollama", "0.12.6", "llama3.2:1b", None, 4096),       # the loaded one
    ("ollama-idle", "ollama", "0.12.6", "qwen2.5:0.5b", None, None),  # first chat model
    ("llama.cpp", "llama.cpp", "b1", "gemma-3-270m", 2, 2048),
    ("vllm", "vllm", "0.11.0", "Qwen/Qwen2.5-0.5B-Instruct", None, 32768),
    ("sglang", "sglang", "0.4.6", "Qwen/Qwen2.5-0.5B-Instruct", 48, None),
    ("lmstudio", "lmstudio", None, "meta-llama-3.1-8b-instruct", None, None),
    ("lmstudio-v1", "lmstudio", None, "gemma-3-270m-it-qat", None, 4096),
    ("llama-cpp-python", "llama-cpp-python", "0.3.36", "gemma-3-270m", 1, None),
    ("koboldcpp", "koboldcpp", "1.80.3", "koboldcpp/gemma-3-270m", None, None),
])
def test_each_engine_is_told_by_its_own_pages(monkeypatch, engine, kind, version, model, slots,
                                              context):
    with EngineServer(engine) as srv:
        found = find(monkeypatch, srv)
    assert len(found) == 1
    f = found[0]
    assert (f.kind, f.version, f.model, f.slots, f.context) == (kind, version, model, slots,
                                                               context)
    assert f.url == f"http://127.0.0.1:{srv.port}/v1"
    if engine.startswith("lmstudio"):
        assert f.context_max == (131072 if engine == "lmstudio" else 32768)
    assert not any("embed" in m for m in f.chat_models)     # never an embedding model


def test_several_found_in_the_stated_order_and_a_closed_port_is_skipped(monkeypatch):
    closed = free_port()
    with EngineServer("vllm") as a, EngineServer("ollama") as b:
        found = find(monkeypatch, closed, a, b)
        assert [f.kind for f in found] == ["vllm", "ollama"]
        found = find(monkeypatch, b, a)
        assert [f.kind for f in found] == ["ollama", "vllm"]


def test_nothing_listening_is_found_quickly_and_servers_says_so(monkeypatch):
    ports = [free_port() for _ in range(7)]
    monkeypatch.setenv(local.PORTS_ENV, ",".join(map(str, ports)))
    t0 = time.monotonic()
    assert local.find() == []
    # refused at once on loopback: nowhere near the per-port connect timeout
    assert time.monotonic() - t0 < local.CONNECT_S * 4
    r = llmbench("servers", env=ports_env(*ports))
    assert r.returncode == 1 and "no LLM server answered" in r.stdout


def test_servers_lists_engine_version_models_slots_and_context():
    with EngineServer("llama.cpp") as a, EngineServer("ollama") as b:
        r = llmbench("servers", env=ports_env(b, a))
        assert r.returncode == 0, r.stderr
        text = r.stdout
        assert f"{b.root}  Ollama 0.12.6  (the one measured)" in text
        assert "qwen2.5:0.5b" in text and "loaded: llama3.2:1b" in text
        assert f"{a.root}  llama.cpp b1" in text and "slots 2; context 2048 tokens" in text
        assert all(len(line) <= 80 for line in text.splitlines())
        r = llmbench("servers", "--json", env=ports_env(b, a))
        doc = json.loads(r.stdout)
        assert [d["kind"] for d in doc] == ["ollama", "llama.cpp"]
        assert doc[0]["model"] == "llama3.2:1b" and doc[1]["context"] == 2048


def test_a_bad_port_list_is_one_line():
    r = llmbench("servers", env={local.PORTS_ENV: "11434,x"})
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "error: LLMBENCH_LOCAL_PORTS='11434,x': 'x' is not a port (1-65535) or host:port; "
        "give e.g. 11434,8080"]


def test_run_with_no_url_measures_the_first_found_and_names_the_other(mock_factory,
                                                                        tmp_path: Path):
    mock = mock_factory(ttft_ms=5, itl_ms=2, tokens=8, flavour="ollama", parallel=1,
                        models=["qwen2.5:0.5b", "nomic-embed-text"])
    with EngineServer("llama.cpp") as other:
        r = llmbench("run", "--requests", "4", "--output-tokens", "8", "--prompt-tokens", "16",
                     "--out", str(tmp_path), env=ports_env(mock, other))
    assert r.returncode == 0, r.stderr
    lines = r.stderr.splitlines()
    assert any(line.startswith(f"no --url: measuring the llmbench mock (ollama flavour) on "
                               f":{port_of(mock)}, model qwen2.5:0.5b") for line in lines), r.stderr
    assert any(line.startswith(f"also found: llama.cpp b1 on :{other.port}") for line in lines)
    run = json.loads((only_run(tmp_path) / "run.json").read_text())
    assert run["summary"]["completed"] == 4 and run["summary"]["failed"] == 0
    cfg = (only_run(tmp_path) / "config.toml").read_text()
    assert f"127.0.0.1:{port_of(mock)}/v1" in cfg          # replays against what it measured


def test_no_server_found_runs_the_demo_and_demo_flag_skips_discovery(mock_factory,
                                                                     tmp_path: Path):
    r = llmbench("run", "--requests", "2", "--output-tokens", "4", "--out", str(tmp_path / "a"),
                 env=ports_env(free_port()))
    assert r.returncode == 0, r.stderr
    assert "No server found: the built-in mock" in r.stderr
    with EngineServer("vllm") as srv:
        r = llmbench("run", "--demo", "--requests", "2", "--output-tokens", "4",
                     "--out", str(tmp_path / "b"), env=ports_env(srv))
        assert r.returncode == 0, r.stderr
        assert "--demo: the built-in mock" in r.stderr and "found" not in r.stderr
    r = llmbench("run", "--demo", "--url", "http://127.0.0.1:1/v1")
    assert r.returncode == 2
    assert r.stderr.strip() == "error: --demo runs the built-in mock: drop --url (or --demo)"


def test_llama_cpp_python_takes_the_request_ids_and_is_named(tmp_path: Path):
    with EngineServer("llama-cpp-python") as srv:
        r = llmbench("run", "--url", srv.root + "/v1", "--model", "gemma-3-270m",
                     "--requests", "6", "--concurrency", "1", "--output-tokens", "4",
                     "--out", str(tmp_path))
        assert r.returncode == 0, r.stderr
        assert srv.refused == 0
        sent = [x for x in srv.request_ids if x]
        assert len(sent) >= 7                      # the preflight and six requests
        assert all(uuid.UUID(x).version == 4 for x in sent)
    run = json.loads((only_run(tmp_path) / "run.json").read_text())
    assert run["summary"]["failed"] == 0 and run["summary"]["completed"] == 6
    assert run["server"]["kind"] == "llama-cpp-python" and run["server"]["version"] == "0.3.36"
    assert "llama-cpp-python 0.3.36" in r.stdout


def test_an_empty_400_says_what_was_sent(tmp_path: Path):
    with EngineServer("vllm", refuse_all=True) as srv:
        r = llmbench("run", "--url", srv.root + "/v1", "--model", "m", "--requests", "1",
                     "--header", "x-team: blue", "--out", str(tmp_path))
    assert r.returncode != 0
    err = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(err) == 1, r.stderr
    line = err[0]
    assert "answered 400; the server gave no reason (an empty body)" in line
    assert "x-request-id: " in line and "(a UUID)" in line and "header x-team" in line
    assert "blue" not in line                      # a header's value may be a secret
    assert "stream_options" in line
    # the failed run's folder is in --out (not the checkout's results/), the value not in it
    folder = only_run(tmp_path)
    assert json.loads((folder / "run.json").read_text())["status"] == "failed"
    assert not any("blue" in p.read_text() for p in folder.iterdir() if p.is_file())


def test_lm_studio_is_polled_for_its_loaded_models_and_takes_its_native_path(tmp_path: Path):
    import asyncio


    from llmbench.servers.scrape import ServerProbe

    async def probe(url: str):
        p = ServerProbe(url, "auto")
        async with p.session() as s:
            found = await p.detect(s)
            return found, await p.poll_once(s)
    with EngineServer("lmstudio") as srv:
        found, sample = asyncio.run(probe(srv.root))
        assert found == "lmstudio"
        assert sample["models_loaded"] == ["text-embedding-nomic-embed-text-v1.5",
                                           "meta-llama-3.1-8b-instruct"]
        # LM Studio's native API takes OpenAI's requests at /api/v0 (its docs)
        r = llmbench("run", "--url", srv.root + "/api/v0", "--model", "meta-llama-3.1-8b-instruct",
                     "--requests", "2", "--output-tokens", "4", "--out", str(tmp_path))
        assert r.returncode == 0, r.stderr
    run = json.loads((only_run(tmp_path) / "run.json").read_text())
    assert run["server"]["kind"] == "lmstudio" and run["summary"]["completed"] == 2


def test_sweep_before_with_no_url_measures_the_server_found(mock_factory, tmp_path: Path):
    mock = mock_factory(ttft_ms=5, itl_ms=1, tokens=4, models=["m"], kv_tokens=100_000)
    tiny = ("--users", "1", "--hold", "2s", "--ramp-in", "0.5s", "--think", "0",
            "--output-tokens", "4", "--prompt-tokens", "16", "--threshold", "ttft.p50<=60s")
    r = llmbench("sweep", "--setting", "X=1,2", "--before", "true", "--out", str(tmp_path),
                 *tiny, env=ports_env(mock), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "no --url: measuring the llmbench mock" in r.stderr
    assert r.stdout.count("cache reset before this setting's ramp: POST /admin/reset_cache "
                          "took") == 2
    r = llmbench("sweep", "--setting", "X=1,2", "--before", "true", *tiny,
                 env=ports_env(free_port()))
    assert r.returncode == 2
    assert r.stderr.strip().startswith("error: no --url, and no LLM server answered on this "
                                       "machine's usual ports")


def test_probe_with_no_direct_takes_the_backend_found(mock_factory, tmp_path: Path):
    router = mock_factory(ttft_ms=5, itl_ms=1, tokens=4, models=["m"])
    backend = mock_factory(ttft_ms=5, itl_ms=1, tokens=4, models=["m"])
    r = llmbench("probe", "--router", router.url + "/v1", "--model", "m", "--users", "1",
                 "--slice", "1s", "--rounds", "1", "--prompt-tokens", "16", "--output-tokens",
                 "4", "--turns", "1", "--out", str(tmp_path), env=ports_env(backend),
                 timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"no --direct: measuring the llmbench mock (vllm flavour) on :{port_of(backend)}, " \
        "model m" in r.stderr
    run = json.loads((only_run(tmp_path) / "run.json").read_text())
    assert f"127.0.0.1:{port_of(backend)}" in json.dumps(run["config"]["direct"])

"""llama-cpp-python's server as llmbench names it: from its pages (FastAPI's schema), from its
process (python -m llama_cpp.server and its own flags), in the identity line and in the advice
when requests queue (it has no parallel setting). Pure: documents and argv in."""

from types import SimpleNamespace

from llmbench.analysis import telemetry as tm
from llmbench.results.telemetry import Telemetry
from llmbench.servers import identity

ARGV = ["/opt/lcp/bin/python", "-m", "llama_cpp.server", "--model", "/m/gemma.gguf",
        "--n_threads", "2", "--n_ctx", "4096", "--interrupt_requests", "false",
        "--api_key", "sk-secret"]


def test_pages_and_process_name_llama_cpp_python_and_its_settings():
    docs = {"/openapi.json": (200, '{"info": {"title": "\\ud83e\\udd99 llama.cpp Python API", '
                                   '"version": "0.3.36"}}'),
            "/v1/models": (200, '{"object": "list", "data": [{"id": "gemma-3-270m", '
                                '"object": "model", "owned_by": "me", "permissions": []}]}')}
    ident = identity.from_docs(docs, "gemma-3-270m")
    assert ident == {"kind": "llama-cpp-python", "version": "0.3.36", "model": "gemma-3-270m",
                     "parallel": {"slots": 1}}
    proc = identity.process_info(ARGV, {}, 42)
    assert proc["executable"] == "llama_cpp"
    assert proc["settings"] == {"--n_threads": "2", "--n_ctx": "4096",
                                "--interrupt_requests": "false"}      # never its key
    merged = identity.merge({}, proc)
    assert merged["kind"] == "llama-cpp-python"           # from the program, no page needed
    line = tm.identity_line({**ident, **proc})
    assert line == ("llama-cpp-python 0.3.36 with --n_ctx 4096 --n_threads 2 "
                    "--interrupt_requests false, model gemma-3-270m")


def test_queuing_on_llama_cpp_python_names_what_to_change():
    step = SimpleNamespace(telemetry=Telemetry(), load=2)
    first = SimpleNamespace(telemetry=Telemetry(), load=1)
    part = tm.verdict_part("queuing", first, step, "users", None, None,
                           {"identity": {"kind": "llama-cpp-python"}})
    assert part.advice == [tm.ONE_AT_A_TIME]
    assert "llama-server -np N" in tm.ONE_AT_A_TIME and "--n_threads" in tm.ONE_AT_A_TIME
    other = tm.verdict_part("queuing", first, step, "users", None, None,
                            {"identity": {"kind": "llama.cpp"}})
    assert other.advice is None                           # the latency-based advice stays


def test_lm_studio_and_koboldcpp_pages():
    lms = identity.from_docs({"/api/v0/models": (200, '{"object": "list", "data": [{"id": "q", '
                                                      '"type": "llm", "state": "loaded", '
                                                      '"max_context_length": 8192, '
                                                      '"quantization": "Q4_K_M"}]}')})
    assert lms["kind"] == "lmstudio" and lms["model"] == "q" and lms["models_loaded"] == ["q"]
    assert lms["quantization"] == "Q4_K_M" and lms["max_context_length"] == 8192
    k = identity.from_docs({"/api/extra/version": (200, '{"result": "KoboldCpp", '
                                                        '"version": "1.80"}')})
    assert k == {"kind": "koboldcpp", "version": "1.80"}

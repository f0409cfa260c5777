"""What produced the numbers: the server's kind, version, model and quantisation, and its
parallel settings, as far as the server (and, on this machine, its process) says.

Asked once, before the load, with the server probes' deadline and size cap: each kind's own
pages (``PATHS``) and the API's models list. A server that answers none of them is "unknown",
never a failure. When the server's process is on this machine its command line gives the
settings the pages do not (llama.cpp's ``-t``, vLLM's ``--max-num-seqs``) and, for Ollama, the
OLLAMA_* variables of its environment. Only the settings named below are ever kept: a command
line and an environment can hold secrets (``--api-key``), and those are never read out of them.

The parsers are pure (documents and argv in, a dict out); ``ask`` does the requests.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import PurePath
from typing import Any, Awaitable, Callable, Sequence

Get = Callable[[str], Awaitable[tuple[int, str]]]

# paths asked, besides the API's models list and Ollama's /api/tags: llama.cpp, vLLM, Ollama,
# TGI, SGLang, then llama-cpp-python (LCP_TITLE), LM Studio's native API (v0 and 0.4's v1),
# KoboldCpp's version and Ollama's loaded models
PATHS = ("/props", "/version", "/api/version", "/info", "/get_server_info", "/openapi.json",
         "/api/v0/models", "/api/v1/models", "/api/extra/version", "/api/ps")
# llama-cpp-python's server (FastAPI) calls itself this in its schema
LCP_TITLE = "llama.cpp Python API"

# (canonical flag, its other spellings, takes a value): llama.cpp, vLLM, SGLang, TGI
FLAGS: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    # llama.cpp server
    ("--threads", ("-t",), True),
    ("--threads-batch", ("-tb",), True),
    ("--parallel", ("-np",), True),
    ("--ctx-size", ("-c",), True),
    ("--batch-size", ("-b",), True),
    ("--ubatch-size", ("-ub",), True),
    ("--n-gpu-layers", ("-ngl", "--gpu-layers"), True),
    ("--flash-attn", ("-fa",), False),
    ("--cont-batching", ("-cb",), False),
    ("--cache-type-k", ("-ctk",), True),
    ("--cache-ram", ("-cram",), True),
    # vLLM
    ("--max-num-seqs", (), True),
    ("--tensor-parallel-size", ("-tp",), True),
    ("--pipeline-parallel-size", ("-pp",), True),
    ("--data-parallel-size", ("-dp",), True),
    ("--max-model-len", (), True),
    ("--max-num-batched-tokens", (), True),
    ("--gpu-memory-utilization", (), True),
    ("--quantization", ("-q",), True),
    ("--kv-cache-dtype", (), True),
    ("--dtype", (), True),
    ("--enable-prefix-caching", (), False),
    # SGLang
    ("--tp-size", (), True),
    ("--dp-size", (), True),
    ("--max-running-requests", (), True),
    ("--mem-fraction-static", (), True),
    # llama-cpp-python (python -m llama_cpp.server)
    ("--n_ctx", (), True),
    ("--n_threads", (), True),
    ("--n_batch", (), True),
    ("--n_gpu_layers", (), True),
    ("--interrupt_requests", (), True),
    # TGI
    ("--max-concurrent-requests", (), True),
    ("--max-batch-total-tokens", (), True),
    ("--num-shard", (), True),
    ("--quantize", (), True),
)
# the variables that set Ollama's (and any CUDA server's) parallelism and placement
ENV_NAMES = ("OLLAMA_NUM_PARALLEL", "OLLAMA_MAX_LOADED_MODELS", "OLLAMA_MAX_QUEUE",
             "OLLAMA_FLASH_ATTENTION", "OLLAMA_KV_CACHE_TYPE", "OLLAMA_CONTEXT_LENGTH",
             "OLLAMA_NUM_THREADS", "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES")
_BY_SPELLING = {s: (canon, takes) for canon, others, takes in FLAGS for s in (canon, *others)}


def settings_from_argv(argv: Sequence[str]) -> dict[str, Any]:
    """The known settings of a server's command line, by canonical flag: {"--threads": "2",
    "--parallel": "4", "--cont-batching": True}; everything else (a key, a path) is left out."""
    out: dict[str, Any] = {}
    i = 0
    while i < len(argv):
        a = argv[i]
        flag, eq, value = a.partition("=")
        known = _BY_SPELLING.get(flag)
        if known is not None:
            canon, takes = known
            if takes:
                if eq:
                    out[canon] = value
                elif i + 1 < len(argv):
                    out[canon] = argv[i + 1]
                    i += 1
            elif eq:
                out[canon] = value
            elif i + 1 < len(argv) and argv[i + 1] in ("on", "off", "auto"):
                out[canon] = argv[i + 1]        # llama.cpp's -fa on|off|auto
                i += 1
            else:
                out[canon] = True
        i += 1
    return out


_SHELLS = ("sh", "bash", "dash", "zsh", "ash")


def server_argv(argv: Sequence[str]) -> list[str]:
    """The server's own command line inside a wrapper: ``sh -c 'llama-server -np 4'`` (how
    sweep --serve starts a command), ``env X=1 vllm serve ...``, ``exec ...``."""
    import shlex
    args = list(argv)
    if len(args) >= 3 and PurePath(args[0]).name in _SHELLS and args[1] == "-c":
        try:
            args = shlex.split(args[2])
        except ValueError:
            return list(argv)
    while args and (args[0] in ("exec", "nohup") or PurePath(args[0]).name == "env"
                    or ("=" in args[0] and not args[0].startswith("-"))):
        args = args[1:]
    name = PurePath(args[0]).name if args else ""
    if name.startswith(("python", "pypy")):
        # python -m vllm.entrypoints... ARGS: the module's arguments; python -c CODE is
        # nobody's server settings (a test runner holding the port, say): none
        if "-m" in args[1:]:
            i = args.index("-m", 1)
            return args[i + 1:]
        return []
    return args


def executable(argv: Sequence[str]) -> str | None:
    """The program's name (``llama-server``; ``vllm`` for ``python -m vllm...``/``vllm serve``)."""
    if not argv:
        return None
    name = PurePath(argv[0]).name
    if name.startswith("python") and len(argv) > 2 and argv[1] == "-m":
        return argv[2].split(".")[0]
    return name


def _json(doc: tuple[int, str] | None) -> Any:
    if doc is None or doc[0] != 200:
        return None
    try:
        return json.loads(doc[1])
    except ValueError:
        return None


_BUILD = re.compile(r"^b?(\d+)-([0-9a-f]{6,})", re.I)


@dataclass
class _Pages:
    """The identity pages, parsed (None: not answered, or not JSON)."""
    props: Any
    lms_entries: list[dict[str, Any]]
    kobold: Any
    info_title: dict[str, Any]
    version: Any
    ollama: Any
    info: Any
    sgl: Any
    model: str | None


def _copy(src: dict[str, Any], keys: Sequence[str], dst: dict[str, Any]) -> None:
    """The keys ``src`` has a value (not None) for, into ``dst``."""
    for k in keys:
        if src.get(k) is not None:
            dst[k] = src[k]


def _named(out: dict[str, Any], kind: str, version: Any) -> bool:
    """The pages are ``kind``'s, of ``version`` when they say one."""
    out["kind"] = kind
    if version:
        out["version"] = str(version)
    return True


def _koboldcpp(p: _Pages, out: dict[str, Any], parallel: dict[str, Any]) -> bool:
    if not (isinstance(p.kobold, dict) and str(p.kobold.get("result", "")).lower() == "koboldcpp"):
        return False
    return _named(out, "koboldcpp", p.kobold.get("version"))


def _llama_cpp_python(p: _Pages, out: dict[str, Any], parallel: dict[str, Any]) -> bool:
    if LCP_TITLE not in str(p.info_title.get("title", "")):
        return False
    _named(out, "llama-cpp-python", p.info_title.get("version"))
    # one request at a time: the server holds a lock around its one model (no slots)
    parallel["slots"] = 1
    return True


def _lmstudio(p: _Pages, out: dict[str, Any], parallel: dict[str, Any]) -> bool:
    if not p.lms_entries:
        return False
    out["kind"] = "lmstudio"
    loaded = [e for e in p.lms_entries if e.get("loaded")]
    pick = next((e for e in loaded if e.get("chat")), None) or \
        next((e for e in p.lms_entries if e.get("id") == p.model), None)
    if pick is not None:
        out["model"] = pick["id"]
        _copy(pick, ("quantization", "context_length", "max_context_length"), out)
    out["models_loaded"] = [e["id"] for e in loaded]
    return True


def _mock(p: _Pages, out: dict[str, Any], parallel: dict[str, Any]) -> bool:
    props = p.props
    if not (isinstance(props, dict) and props.get("llmbench_mock")):
        return False
    out["kind"] = "mock"
    if props.get("total_slots"):
        parallel["slots"] = props["total_slots"]
    if isinstance(props.get("n_ctx"), int):         # --context: its window
        out["context_per_slot"] = props["n_ctx"]
    if isinstance(p.ollama, dict) and p.ollama.get("version"):
        out["version"] = str(p.ollama["version"])
    return True


def _llama_cpp(p: _Pages, out: dict[str, Any], parallel: dict[str, Any]) -> bool:
    props = p.props
    if not (isinstance(props, dict) and ("build_info" in props or "total_slots" in props)):
        return False
    out["kind"] = "llama.cpp"
    build = str(props.get("build_info") or "")
    m = _BUILD.match(build)
    if m:
        out["version"] = f"b{m.group(1)}"
        out["commit"] = m.group(2)
    elif build:
        out["version"] = build[:40]
    if props.get("total_slots"):
        parallel["slots"] = props["total_slots"]
    gen = props.get("default_generation_settings")
    if isinstance(gen, dict) and isinstance(gen.get("n_ctx"), int):
        out["context_per_slot"] = gen["n_ctx"]
    if isinstance(props.get("model_ftype"), str):
        out["quantization"] = props["model_ftype"]
    if isinstance(props.get("model_path"), str):
        out["model_file"] = PurePath(props["model_path"]).name
    if isinstance(props.get("model_alias"), str):
        out["model"] = props["model_alias"]
    return True


def _sglang(p: _Pages, out: dict[str, Any], parallel: dict[str, Any]) -> bool:
    sgl = p.sgl
    if not (isinstance(sgl, dict) and ("tp_size" in sgl or "max_running_requests" in sgl)):
        return False
    _named(out, "sglang", sgl.get("version"))
    _copy(sgl, ("tp_size", "dp_size", "max_running_requests"), parallel)
    if sgl.get("quantization"):
        out["quantization"] = str(sgl["quantization"])
    if isinstance(sgl.get("model_path"), str):
        out["model"] = sgl["model_path"]
    return True


def _tgi(p: _Pages, out: dict[str, Any], parallel: dict[str, Any]) -> bool:
    info = p.info
    if not (isinstance(info, dict) and "model_id" in info and (
            "max_concurrent_requests" in info or "docker_label" in info or "sha" in info)):
        return False
    _named(out, "tgi", info.get("version"))
    out["model"] = str(info["model_id"])
    if info.get("model_dtype"):
        out["dtype"] = str(info["model_dtype"])
    _copy(info, ("max_concurrent_requests", "max_batch_total_tokens", "max_total_tokens"),
          parallel)
    return True


def _ollama(p: _Pages, out: dict[str, Any], parallel: dict[str, Any]) -> bool:
    if not (isinstance(p.ollama, dict) and p.ollama.get("version")
            and not isinstance(p.version, dict)):
        return False
    return _named(out, "ollama", p.ollama["version"])


def _vllm(p: _Pages, out: dict[str, Any], parallel: dict[str, Any]) -> bool:
    if not (isinstance(p.version, dict) and p.version.get("version")):
        return False
    return _named(out, "vllm", p.version["version"])


# which server the pages are, asked in this order (the first that knows it says so)
_KINDS = (_koboldcpp, _llama_cpp_python, _lmstudio, _mock, _llama_cpp, _sglang, _tgi, _ollama,
          _vllm)


def _from_models(models: Any, model: str | None, out: dict[str, Any]) -> None:
    """The models list: llama.cpp's meta, vLLM's max_model_len and root."""
    entries = models.get("data") if isinstance(models, dict) else None
    if not isinstance(entries, list):
        return
    entry = next((e for e in entries if isinstance(e, dict) and e.get("id") == model), None) \
        or (entries[0] if len(entries) == 1 and isinstance(entries[0], dict) else None)
    if entry is None:
        return
    out.setdefault("model", str(entry.get("id")))
    meta = entry.get("meta")
    if isinstance(meta, dict):
        if isinstance(meta.get("n_params"), (int, float)):
            out["parameters"] = int(meta["n_params"])
        if isinstance(meta.get("size"), (int, float)):
            out["model_bytes"] = int(meta["size"])
        if isinstance(meta.get("ftype"), str):
            out.setdefault("quantization", meta["ftype"])
    if isinstance(entry.get("max_model_len"), int):
        out["max_model_len"] = entry["max_model_len"]
    if out.get("kind") is None and entry.get("owned_by") == "vllm":
        out["kind"] = "vllm"


def _from_tags(tags: Any, model: str | None, out: dict[str, Any]) -> None:
    """Ollama's model list: the details of the model asked for."""
    items = tags.get("models") if isinstance(tags, dict) else None
    if not (isinstance(items, list) and out.get("kind") in ("ollama", "mock", None)):
        return
    entry = next((e for e in items if isinstance(e, dict)
                  and model and model in (e.get("name"), e.get("model"))), None)
    details = entry.get("details") if isinstance(entry, dict) else None
    if not isinstance(details, dict):
        return
    out.setdefault("model", model)
    for key, to in (("quantization_level", "quantization"),
                    ("parameter_size", "parameter_size"), ("family", "family")):
        if details.get(key):
            out[to] = str(details[key])


def _from_ps(ps: Any, out: dict[str, Any]) -> None:
    """Ollama's loaded models (/api/ps) and the context each was loaded with."""
    running = ps.get("models") if isinstance(ps, dict) else None
    if not (isinstance(running, list) and out.get("kind") in ("ollama", "mock")):
        return
    names = [str(e.get("name") or e.get("model")) for e in running
             if isinstance(e, dict) and (e.get("name") or e.get("model"))]
    out["models_loaded"] = names
    ctx = next((e.get("context_length") for e in running if isinstance(e, dict)
                and (e.get("name") == out.get("model") or len(running) == 1)), None)
    if isinstance(ctx, int):
        out["context_length"] = ctx


def from_docs(docs: dict[str, tuple[int, str] | None], model: str | None = None,
              models_path: str = "/v1/models") -> dict[str, Any]:
    """The identity the pages give: kind, version, model, quantisation, slots, context."""
    schema = _json(docs.get("/openapi.json"))
    info_title = (schema.get("info") or {}) if isinstance(schema, dict) else {}
    pages = _Pages(
        props=_json(docs.get("/props")),
        lms_entries=_lmstudio_entries(_json(docs.get("/api/v0/models")),
                                      _json(docs.get("/api/v1/models"))),
        kobold=_json(docs.get("/api/extra/version")),
        info_title=info_title if isinstance(info_title, dict) else {},
        version=_json(docs.get("/version")), ollama=_json(docs.get("/api/version")),
        info=_json(docs.get("/info")), sgl=_json(docs.get("/get_server_info")), model=model)
    out: dict[str, Any] = {}
    parallel: dict[str, Any] = {}
    for kind in _KINDS:
        if kind(pages, out, parallel):
            break
    _from_models(_json(docs.get(models_path)), model, out)
    _from_tags(_json(docs.get("/api/tags")), model, out)
    _from_ps(_json(docs.get("/api/ps")), out)
    if parallel:
        out["parallel"] = parallel
    return out


def _lmstudio_entries(v0: Any, v1: Any) -> list[dict[str, Any]]:
    """LM Studio's models as one list, from 0.4's /api/v1/models, else 0.3's /api/v0/models: id,
    chat (an LLM, not an embedding model), loaded, quantization, context_length (as loaded),
    max_context_length. Empty when neither page is LM Studio's."""
    out: list[dict[str, Any]] = []
    items = v1.get("models") if isinstance(v1, dict) else None
    if isinstance(items, list):
        for e in items:
            if not isinstance(e, dict) or not isinstance(e.get("key"), str) \
                    or "loaded_instances" not in e:
                continue
            inst = [i for i in e.get("loaded_instances") or [] if isinstance(i, dict)]
            q = e.get("quantization")
            ctx = next((i["config"].get("context_length") for i in inst
                        if isinstance(i.get("config"), dict)), None)
            out.append({"id": e["key"], "chat": e.get("type") in ("llm", "vlm"),
                        "loaded": bool(inst),
                        "quantization": q.get("name") if isinstance(q, dict) else None,
                        "context_length": ctx if isinstance(ctx, int) else None,
                        "max_context_length": e.get("max_context_length")})
        if out:
            return out
    items = v0.get("data") if isinstance(v0, dict) else None
    if isinstance(items, list):
        for e in items:
            if not isinstance(e, dict) or not isinstance(e.get("id"), str) \
                    or "state" not in e or "type" not in e:
                continue
            out.append({"id": e["id"], "chat": e.get("type") in ("llm", "vlm"),
                        "loaded": e.get("state") == "loaded",
                        "quantization": e.get("quantization"), "context_length": None,
                        "max_context_length": e.get("max_context_length")})
    return out


def process_info(argv: Sequence[str], env: dict[str, str], pid: int | None) -> dict[str, Any]:
    """What the server's process on this machine says: its known settings, program name, PID."""
    out: dict[str, Any] = {}
    args = server_argv(argv)
    settings = {**settings_from_argv(args[1:]), **{k: v for k, v in env.items() if v != ""}}
    if settings:
        out["settings"] = settings
    exe = executable(argv if not args or PurePath(str(argv[0])).name.startswith(("python", "pypy"))
                     else args)
    if exe:
        out["executable"] = exe
    if pid is not None:
        out["pid"] = pid
    return out


def merge(ident: dict[str, Any], proc: dict[str, Any]) -> dict[str, Any]:
    """The pages' identity and the process's; the kind from the program's name if no page says."""
    out = {**ident, **proc}
    exe = proc.get("executable") or ""
    if "kind" not in out and exe:
        for word, kind in (("llama-server", "llama.cpp"), ("llama_cpp", "llama-cpp-python"),
                           ("ollama", "ollama"),
                           ("vllm", "vllm"), ("sglang", "sglang"),
                           ("text-generation-launcher", "tgi")):
            if word in exe:
                out["kind"] = kind
                break
    return out


async def ask(get: Get, models_path: str = "/v1/models") -> dict[str, tuple[int, str] | None]:
    """Every identity page at once (a failed one is None); ``get`` has the probes' deadline."""
    import asyncio
    paths = [*PATHS, models_path, "/api/tags"]

    async def one(path: str) -> tuple[int, str] | None:
        try:
            return await get(path)
        except Exception:                       # noqa: BLE001 - any failure: not answered
            return None
    got = await asyncio.gather(*(one(p) for p in paths))
    return dict(zip(paths, got))

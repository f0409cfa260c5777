"""HTTP routes shaped like the real servers (OpenAI/vLLM and Ollama), on aiohttp.web.

aiohttp was chosen for the mock's HTTP layer because it is a production server that is already a
dependency (the client transport) and it streams chunked responses without an ASGI layer in
between: scripts/bench_mock.py measures its request and event rates.
"""

from __future__ import annotations

import asyncio
import copy
import enum
import json
import os
import random
import time
import uuid
import zlib
from collections import OrderedDict
from typing import Any

import aiohttp
from aiohttp import web

from . import embeddings, prometheus
from .engine import Engine, QueueFull, Seq, mock_tokens, reply_words
from .recorder import Recorder
from .tokenize import add_tokenize_routes
from .structured import images_in, pieces, reply_json, schema_of, tools_of
from .shapes import ChatShape, CompletionShape, OllamaShape, ResponsesShape, Shape, _now_iso

perf_counter = time.perf_counter
perf_counter_ns = time.perf_counter_ns
_dumps = json.dumps

OLLAMA_BUSY = "server busy, please try again.  maximum pending requests exceeded"


def _check_schemas(body: Any, route: str) -> None:
    """A response format or tool parameters whose keywords have the wrong types (\"required\":
    5) is the request's fault: 400 naming the keyword, as a real server answers, not a 500
    from the generator (the client's own check, llmbench.wire.agents.schema_problem)."""
    if not isinstance(body, dict) or route.startswith("ollama") or route == "completions":
        return
    from llmbench.wire.agents import schema_problem
    schema = schema_of(body, route)
    problem = schema_problem(schema) if schema else None
    if problem:
        raise BadRequest(f"invalid JSON schema in the response format: {problem}",
                         param="response_format" if route != "responses" else "text.format")
    for name, params in tools_of(body):
        problem = schema_problem(params) if params else None
        if problem:
            raise BadRequest(f"invalid JSON schema in tool {name[:40]!r}'s parameters: {problem}",
                             param="tools")


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param


def openai_error(message: str, status: int, etype: str | None = None,
                 param: str | None = None) -> web.Response:
    etype = etype or {400: "BadRequestError", 404: "NotFoundError", 429: "RateLimitError",
                      500: "InternalServerError"}.get(status, "Error")
    body = {"error": {"message": message, "type": etype, "param": param, "code": status}}
    return web.json_response(body, status=status)


def ollama_error(message: str, status: int) -> web.Response:
    return web.json_response({"error": message}, status=status)


class Outcome(enum.Enum):
    """How a generation request ended, as the send-time log names it."""
    OK = "ok"
    CUT = "cut"                     # fault: the connection was closed mid-stream
    MALFORMED = "malformed"         # fault: a broken event, then nothing
    ERROR_EVENT = "error_event"     # fault: an error object inside the stream
    CLIENT_GONE = "client_gone"     # the client went away


class Peers:
    """The worker processes of one port (``llmbench mock --workers N``), reached over unix
    sockets in a private directory: /metrics gathers every worker's engine and /admin/config
    changes every worker's, whichever worker the kernel handed the connection to."""

    def __init__(self, directory: str, worker: int, workers: int) -> None:
        self.directory = directory
        self.worker = worker
        self.workers = workers

    def path(self, worker: int) -> str:
        return os.path.join(self.directory, f"w{worker}.sock")

    def app(self, routes: list["Routes"]) -> web.Application:
        """The internal side: what the other workers ask of this one."""
        async def state(request: web.Request) -> web.Response:
            r = routes[int(request.match_info["i"])]
            return web.json_response(prometheus.snapshot(r.engine))

        async def config(request: web.Request) -> web.Response:
            r = routes[int(request.match_info["i"])]
            try:
                r.apply_config(await request.json())
            except ValueError as exc:
                return web.json_response({"error": str(exc)}, status=400)
            return web.json_response({})
        app = web.Application()
        app.router.add_get("/state/{i}", state)
        app.router.add_post("/config/{i}", config)
        return app

    async def _call(self, worker: int, method: str, path: str,
                    body: Any = None) -> tuple[int, Any] | None:
        try:
            async with aiohttp.ClientSession(
                    connector=aiohttp.UnixConnector(path=self.path(worker)),
                    timeout=aiohttp.ClientTimeout(total=2.0)) as s:
                async with s.request(method, "http://worker" + path, json=body) as r:
                    return r.status, await r.json()
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError, ValueError):
            return None

    def _others(self) -> list[int]:
        return [w for w in range(self.workers) if w != self.worker]

    async def states(self, index: int, own: dict[str, Any]) -> tuple[list[tuple[str, Any]],
                                                                    list[int]]:
        """Every worker's snapshot of replica ``index`` (labelled by worker), and the workers
        that did not answer."""
        others = self._others()
        got = await asyncio.gather(*(self._call(w, "GET", f"/state/{index}") for w in others))
        snaps = {self.worker: own}
        missing = []
        for w, res in zip(others, got):
            if res is not None and res[0] == 200:
                snaps[w] = res[1]
            else:
                missing.append(w)
        return [(str(w), snaps[w]) for w in sorted(snaps)], missing

    async def configure(self, index: int, changes: dict[str, Any]) -> list[int]:
        """Apply to the other workers; the workers that did not take the change."""
        others = self._others()
        got = await asyncio.gather(*(self._call(w, "POST", f"/config/{index}", changes)
                                     for w in others))
        return [w for w, res in zip(others, got) if res is None or res[0] != 200]


@web.middleware
async def _arrival_done(request: web.Request, handler: Any) -> web.StreamResponse:
    """Clear the connection's arrival stamp once a request is answered, whatever the route, so
    the next request on a kept-alive connection stamps its own (its bytes come after this reply:
    clients do not pipeline)."""
    try:
        return await handler(request)
    finally:
        if getattr(request.protocol, "arrival_ns", 0):
            request.protocol.arrival_ns = 0


class Routes:
    def __init__(self, engine: Engine, recorder: Recorder | None = None, worker: int = 0,
                 peers: Peers | None = None, index: int = 0) -> None:
        self.engine = engine
        self.recorder = recorder
        self.started_at = _now_iso()
        self.worker = worker
        self.peers = peers          # the other worker processes on this port, if any
        self.index = index          # which replica (port) of the worker's this is
        self.workers = peers.workers if peers is not None else 1
        self._worker_header = str(worker)
        # the Responses API's stored replies (store: true): id -> the conversation's text so
        # far, so a turn naming previous_response_id is prefilled with its history; bounded
        self._stored: "OrderedDict[str, str]" = OrderedDict()

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024, middlewares=[_arrival_done])
        r = app.router
        r.add_get("/v1/models", self.models)
        r.add_post("/v1/chat/completions", self.chat)
        r.add_post("/v1/completions", self.completions)
        r.add_post("/v1/responses", self.responses)
        r.add_post("/v1/embeddings", self.embeddings)
        r.add_get("/api/tags", self.tags)
        r.add_get("/api/ps", self.ps)
        r.add_post("/api/show", self.show)
        r.add_get("/api/version", self.version)
        r.add_post("/api/chat", self.ollama_chat)
        r.add_post("/api/generate", self.ollama_generate)
        r.add_get("/health", self.health)
        r.add_get("/metrics", self.metrics)
        r.add_get("/props", self.props)
        r.add_get("/admin/config", self.get_config)
        r.add_post("/admin/config", self.set_config)
        add_tokenize_routes(app, self.engine)
        return app

    def _headers(self, queue_ms: float | None = None) -> dict[str, str]:
        # the worker process that served the request (0 when the mock has one)
        h = {"x-llmbench-replica": self.engine.replica, "x-llmbench-worker": self._worker_header}
        if queue_ms is not None:
            h["x-llmbench-queue-ms"] = f"{queue_ms:.3f}"
        return h

    def apply_config(self, changes: Any) -> None:
        if not isinstance(changes, dict):
            raise ValueError("send a JSON object of settings")
        self.engine.config.update(changes)
        self.engine.config_changed()

    # -- small routes ----------------------------------------------------------------------------
    async def models(self, request: web.Request) -> web.Response:
        data = [{"id": m, "object": "model", "created": 1700000000, "owned_by": "llmbench-mock",
                 "root": m, "parent": None, "max_model_len": 32768}
                for m in self.engine.config.models]
        return web.json_response({"object": "list", "data": data}, headers=self._headers())

    def _ollama_model(self, name: str) -> dict[str, Any]:
        return {"name": name, "model": name, "modified_at": self.started_at, "size": 397821319,
                "digest": uuid.uuid5(uuid.NAMESPACE_DNS, name).hex * 2,
                "details": {"parent_model": "", "format": "gguf", "family": "qwen2",
                            "families": ["qwen2"], "parameter_size": "494.03M",
                            "quantization_level": "Q4_K_M"}}

    async def tags(self, request: web.Request) -> web.Response:
        return web.json_response({"models": [self._ollama_model(m) for m in self.engine.config.models]},
                                 headers=self._headers())

    async def show(self, request: web.Request) -> web.Response:
        """Ollama's model card, which its clients (LangChain, Open WebUI) ask for before they
        chat: POST {"model": NAME} (older clients: "name"); 404 as Ollama for an unknown one."""
        try:
            body = await request.json()
        except ValueError:
            body = None
        name = (body.get("model") or body.get("name")) if isinstance(body, dict) else None
        if not isinstance(name, str) or not name:
            return web.json_response({"error": "model is required"}, status=400)
        if name not in self.engine.config.models:
            return web.json_response({"error": f"model '{name}' not found"}, status=404)
        card = self._ollama_model(name)
        return web.json_response({
            "license": "", "modelfile": f"# Modelfile generated by llmbench's mock\nFROM {name}\n",
            "parameters": "stop \"<|im_end|>\"",
            "template": "{{ if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}"
                        "<|im_start|>user\n{{ .Prompt }}<|im_end|>\n<|im_start|>assistant\n",
            "details": card["details"],
            "model_info": {"general.architecture": "qwen2",
                           "general.parameter_count": 494032768,
                           "qwen2.context_length": 4096},
            "capabilities": ["completion"],
            "modified_at": card["modified_at"]}, headers=self._headers())

    async def ps(self, request: web.Request) -> web.Response:
        models = []
        for m in self.engine.config.models:
            d = self._ollama_model(m)
            d.update({"expires_at": "2099-01-01T00:00:00Z", "size_vram": d["size"],
                      "context_length": 4096})
            models.append(d)
        return web.json_response({"models": models}, headers=self._headers())

    async def version(self, request: web.Request) -> web.Response:
        return web.json_response({"version": self.engine.config.version})

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="", headers=self._headers())

    async def metrics(self, request: web.Request) -> web.Response:
        headers = self._headers()
        if self.peers is None:
            text = prometheus.render(self.engine)
        else:
            # every worker's series, labelled engine="<worker>", as vLLM's data-parallel server
            # shows its engines: one worker's counters alone would be misread as the server's
            snaps, missing = await self.peers.states(self.index, prometheus.snapshot(self.engine))
            text = prometheus.render_many(snaps)
            headers["x-llmbench-workers-reporting"] = f"{len(snaps)}/{self.workers}"
            if missing:
                text = "".join(f"# llmbench_mock: worker {w} did not answer\n"
                               for w in missing) + text
        return web.Response(text=text, content_type="text/plain", charset="utf-8",
                            headers=headers)

    async def props(self, request: web.Request) -> web.Response:
        cfg = self.engine.config
        return web.json_response({"total_slots": (cfg.parallel or 1) * self.workers,
                                  "model_path": cfg.models[0] if cfg.models else "mock",
                                  "llmbench_mock": True, "workers": self.workers},
                                 headers=self._headers())

    def _config_body(self) -> dict[str, Any]:
        return {"replica": self.engine.replica, "worker": self.worker, "workers": self.workers,
                **self.engine.config.as_dict()}

    async def get_config(self, request: web.Request) -> web.Response:
        return web.json_response(self._config_body())

    async def set_config(self, request: web.Request) -> web.Response:
        try:
            changes = await request.json()
            if not isinstance(changes, dict):
                raise ValueError("send a JSON object of settings")
            copy.deepcopy(self.engine.config).update(changes)   # all or nothing, every worker
            self.apply_config(changes)
        except (ValueError, json.JSONDecodeError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        if self.peers is not None:
            missed = await self.peers.configure(self.index, changes)
            if missed:
                return web.json_response(
                    {"error": "workers " + ", ".join(map(str, missed)) + " did not take the "
                     "change (the others did)"}, status=502)
        return web.json_response(self._config_body())

    # -- generation routes ---------------------------------------------------------------------
    async def chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "chat")

    async def completions(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "completions")

    async def responses(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "responses")

    async def embeddings(self, request: web.Request) -> web.Response:
        return await embeddings.serve(self, request)

    async def ollama_chat(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "ollama_chat")

    async def ollama_generate(self, request: web.Request) -> web.StreamResponse:
        return await self._generate(request, "ollama_generate")

    def _parse(self, body: Any, route: str) -> tuple[str, str, int, bool, dict[str, Any]]:
        """-> model, prompt text, reply tokens, stream, options; raises BadRequest as the real
        server would phrase it."""
        if not isinstance(body, dict):
            raise BadRequest("request body must be a JSON object")
        cfg = self.engine.config
        model = body.get("model")
        ollama = route.startswith("ollama")
        if not model or not isinstance(model, str):
            raise BadRequest("model is required" if ollama else
                             "[{'type': 'missing', 'loc': ('body', 'model'), 'msg': 'Field required'}]",
                             param="model")
        if model not in cfg.models:
            if ollama:
                raise BadRequest(f'model "{model}" not found, try pulling it first', 404)
            raise BadRequest(f"The model `{model}` does not exist.", 404, param="model")
        if route == "responses":
            # input: a string, or a list of messages (role + content) as chat takes them
            given = body.get("input")
            if isinstance(given, str):
                given = [{"role": "user", "content": given}]
            if not isinstance(given, list) or not given:
                raise BadRequest("input is required: a string or a list of messages",
                                 param="input")
            body = {**body, "messages": given}
            previous = body.get("previous_response_id")
            if previous is not None:
                history = self._stored.get(previous) if isinstance(previous, str) else None
                if history is None:
                    raise BadRequest(f"Previous response with id '{previous}' not found.",
                                     param="previous_response_id")
                self._stored.move_to_end(previous)
                body["messages"] = [{"role": "user", "content": history}] + given
        if route in ("chat", "ollama_chat", "responses"):
            messages = body.get("messages")
            if not isinstance(messages, list) or (not messages and not ollama):
                raise BadRequest("messages is required" if ollama else
                                 "[{'type': 'missing', 'loc': ('body', 'messages'), 'msg': 'Field required'}]",
                                 param="messages")
            parts = []
            for m in messages:
                if not isinstance(m, dict) or "role" not in m:
                    raise BadRequest("each message needs a role and content", param="messages")
                content = m.get("content")
                if isinstance(content, list):
                    content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
                parts.append(f"<|{m['role']}|>{content or ''}")
            # an image costs prefill like a prompt of image_tokens tokens (a vision encoder's
            # patches), distinct per image so two images never share a cached prefix
            for url in images_in(messages):
                tag = f"img{zlib.crc32(url.encode()):08x}"
                parts.append(" ".join(f"{tag}_{k}" for k in range(cfg.image_tokens)))
            prompt = "\n".join(parts)
        else:
            prompt = body.get("prompt")
            if not isinstance(prompt, str):
                if ollama and prompt is None:
                    prompt = ""
                else:
                    raise BadRequest("prompt must be a string" if ollama else
                                     "[{'type': 'missing', 'loc': ('body', 'prompt'), 'msg': 'Field required'}]",
                                     param="prompt")
        if ollama:
            options = body.get("options") or {}
            if not isinstance(options, dict):
                raise BadRequest("options must be an object")
            max_tokens = options.get("num_predict")
            stream = body.get("stream", True)
            if max_tokens is not None and int(max_tokens) < 0:
                max_tokens = None
        elif cfg.flavour == "ollama":
            # Ollama's /v1 (openai/openai.go) has max_tokens only: max_completion_tokens and
            # ignore_eos are unknown fields there and silently dropped.
            max_tokens = body.get("max_tokens")
            stream = bool(body.get("stream", False))
        elif route == "responses":
            max_tokens = body.get("max_output_tokens")
            stream = bool(body.get("stream", False))
        else:
            max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
            stream = bool(body.get("stream", False))
            n = body.get("n", 1)
            if n != 1:
                raise BadRequest("n must be 1: the mock generates one choice", param="n")
        if max_tokens is not None:
            if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, float)) or max_tokens < 1:
                raise BadRequest(f"max_tokens must be at least 1, got {max_tokens!r}",
                                 param="max_tokens")
            n_tokens = int(max_tokens)
        else:
            n_tokens = cfg.tokens
        hit_max = max_tokens is not None
        ignore_eos = bool(body.get("ignore_eos")) and cfg.flavour != "ollama"   # Ollama has none
        if cfg.natural_tokens > 0 and not ignore_eos and cfg.natural_tokens < n_tokens:
            n_tokens, hit_max = cfg.natural_tokens, False
        opts = {"hit_max": hit_max or max_tokens is None and cfg.natural_tokens <= 0,
                "include_usage": bool((body.get("stream_options") or {}).get("include_usage")),
                "continuous_usage": bool((body.get("stream_options") or {}).get("continuous_usage_stats"))}
        if route == "responses" and body.get("store") is True:
            opts["store"] = prompt                   # kept with the reply when it is done
        return model, prompt, n_tokens, bool(stream), opts

    def _plan_reply(self, body: Any, route: str, rid: str, n_tokens: int, opts: dict[str, Any]
                    ) -> tuple[int, dict[str, Any]]:
        """A tool call (share tool_call_share of the requests that offer tools) or a JSON reply
        (a request with a response format; share invalid_json_share cut short): the reply's
        pieces, as many tokens as the JSON has (the request's max tokens still cut it)."""
        if not isinstance(body, dict) or route.startswith("ollama") or route == "completions":
            return n_tokens, opts
        cfg = self.engine.config
        rng = random.Random(f"{cfg.seed}-{rid}")
        tools = tools_of(body)
        if tools and body.get("tool_choice") != "none" and (
                body.get("tool_choice") == "required" or rng.random() < cfg.tool_call_share):
            name, params = tools[rng.randrange(len(tools))]
            text = reply_json(params, rid)
            opts = {**opts, "tool": (f"call_{rid}", name), "finish": "tool_calls"}
        else:
            schema = schema_of(body, route)
            if schema is None:
                return n_tokens, opts
            text = reply_json(schema, rid, invalid=rng.random() < cfg.invalid_json_share)
        cut = pieces(text)
        limit = n_tokens if opts.get("hit_max") else len(cut)
        opts = {**opts, "pieces": cut, "hit_max": len(cut) > limit}
        return min(len(cut), limit), opts

    def _store(self, rid: str, conversation: str, keep: int = 10_000) -> None:
        self._stored[f"resp_{rid}"] = conversation
        while len(self._stored) > keep:
            self._stored.popitem(last=False)

    def _error(self, route: str, message: str, status: int, param: str | None = None) -> web.Response:
        if route.startswith("ollama"):
            return ollama_error(message, status)
        return openai_error(message, status, param=param)

    async def _generate(self, request: web.Request, route: str) -> web.StreamResponse:
        engine = self.engine
        cfg = engine.config
        handler_ns = perf_counter_ns()
        # when the bytes were read (server.ArrivalStampingHandler), else now
        arrival_ns = getattr(request.protocol, "arrival_ns", 0) or handler_ns
        try:
            raw = await request.read()
            try:
                body = json.loads(raw)
            except ValueError as exc:
                raise BadRequest(f"invalid JSON in request body: {exc}")
            except RecursionError:
                raise BadRequest("invalid JSON in request body: nested too deeply")
            model, prompt, n_tokens, stream, opts = self._parse(body, route)
            _check_schemas(body, route)
        except BadRequest as exc:
            return self._error(route, str(exc), exc.status, exc.param)
        rid = request.headers.get("x-request-id") or uuid.uuid4().hex[:16]
        fault = engine.draw_fault()
        if fault == "slow_first_byte":
            await asyncio.sleep(cfg.slow_first_byte_ms / 1000.0)
        if fault == "500":
            return self._error(route, "mock fault: internal server error", 500)
        if fault == "429":
            return self._error(route, "mock fault: rate limit exceeded", 429)
        try:
            engine.admit()
        except QueueFull:
            if route.startswith("ollama"):
                return ollama_error(OLLAMA_BUSY, 503)
            return openai_error("The server has too many pending requests; try again later.",
                                429, etype="RateLimitError")
        ptoks = mock_tokens(prompt)
        natural = engine.natural_tokens()
        honours_ignore_eos = cfg.flavour != "ollama"      # Ollama has no ignore_eos
        if natural and natural < n_tokens and not (
                honours_ignore_eos and isinstance(body, dict) and body.get("ignore_eos")):
            n_tokens, opts = natural, {**opts, "hit_max": False}   # a fitted EOS length
        n_tokens, opts = self._plan_reply(body, route, rid, n_tokens, opts)
        shape: Shape
        if route == "chat":
            shape = ChatShape(model, rid, "reasoning" if cfg.flavour == "ollama"
                              else "reasoning_content")
        elif route == "completions":
            shape = CompletionShape(model, rid)
        elif route == "responses":
            shape = ResponsesShape(model, rid)
        else:
            shape = OllamaShape(model, rid, generate=route == "ollama_generate")
        if opts.get("tool") is not None:
            shape.tool = opts["tool"]
        log: dict[str, Any] | None = None
        if self.recorder is not None:
            log = {"replica": engine.replica, "request_id": rid, "route": route,
                   "arrival_ns": arrival_ns, "handler_ns": handler_ns, "fault": fault}
            if self.recorder.prompts:
                log["messages"] = body.get("messages") if isinstance(body, dict) else None
                log["prompt"] = body.get("prompt") if isinstance(body, dict) else None
        acquired: Seq | None = None
        seq = Seq(prompt_tokens=len(ptoks))
        try:
            acquired = await engine.acquire_slot(seq)
            return await self._serve(request, engine, shape, ptoks, seq, n_tokens, stream, opts,
                                     fault, arrival_ns, log)
        finally:
            if acquired is not None:
                engine.release_slot(seq)

    async def _serve(self, request: web.Request, engine: Engine, shape: Shape, ptoks: list[str],
                     seq: Seq, n_tokens: int, stream: bool, opts: dict[str, Any],
                     fault: str | None, arrival_ns: int, log: dict[str, Any] | None
                     ) -> web.StreamResponse:
        cfg = engine.config
        slot_ns = perf_counter_ns()
        queue_s = (slot_ns - arrival_ns) / 1e9
        engine.h_queue.observe(queue_s)
        n_prompt = len(ptoks)
        _, cached = engine.prefill(ptoks)
        chunk = max(cfg.chunk_tokens, 1)
        # a reasoning model's reasoning first (its own events), then the answer
        n_reason = cfg.reasoning_tokens if shape.reasoning_field else 0
        r_events = (n_reason + chunk - 1) // chunk
        n_events = r_events + max((n_tokens + chunk - 1) // chunk, 1)
        words = opts["pieces"][:n_tokens] if opts.get("pieces") else reply_words(shape.rid, n_tokens)
        reason_words = reply_words(shape.rid + "-r", n_reason)
        n_tokens += n_reason
        shape.reasoning_count = n_reason
        usage: dict[str, Any] = {"prompt_tokens": n_prompt, "total_tokens": n_prompt + n_tokens,
                                 "completion_tokens": n_tokens}
        if cfg.prefix_cache:
            usage["prompt_tokens_details"] = {"cached_tokens": cached}
        finish = "length" if opts["hit_max"] else opts.get("finish") or "stop"
        fault_at = engine.rng.randint(1, max(n_events - 1, 1)) if fault else -1
        event_ns: list[int] = []
        resp: web.StreamResponse | None = None
        prefill_start_ns = perf_counter_ns()
        sent_tokens = 0
        outcome = Outcome.OK
        try:
            if stream:
                resp = web.StreamResponse(headers={**self._headers(queue_s * 1000.0),
                                                   "content-type": shape.content_type,
                                                   "cache-control": "no-cache"})
                resp.enable_chunked_encoding()
                await resp.prepare(request)
                opening = shape.open()
                if opening:
                    await resp.write(opening)
            first_ns = 0
            last_ns = 0
            for i in range(n_events):
                reasoning = i < r_events
                k = min(chunk, (n_reason if reasoning else n_tokens) - sent_tokens)
                if i == 0:
                    # on the slot's clock, so parsing and the opening chunk do not add to it
                    await engine.first_token(seq, n_prompt - cached, slot_ns / 1e9)
                    engine.emitted(seq, k)
                else:
                    await engine.next_step(seq, k)
                if i == fault_at and stream:
                    assert resp is not None
                    if fault == "stall":
                        await asyncio.sleep(cfg.stall_ms / 1000.0)
                    elif fault == "cut":
                        outcome = Outcome.CUT
                        assert request.transport is not None
                        request.transport.close()
                        return resp
                    elif fault == "malformed":
                        outcome = Outcome.MALFORMED
                        await resp.write(shape.malformed())
                        return resp
                    elif fault == "error_event":
                        outcome = Outcome.ERROR_EVENT
                        await resp.write(shape.error_event("mock fault: error inside the stream"))
                        if shape.ends_with_done:
                            await resp.write(b"data: [DONE]\n\n")
                        await resp.write_eof()
                        return resp
                text = "".join(reason_words[sent_tokens:sent_tokens + k] if reasoning
                               else words[sent_tokens - n_reason:sent_tokens - n_reason + k])
                sent_tokens += k
                last_ev = i == n_events - 1
                if stream:
                    assert resp is not None
                    ev_usage = None
                    if opts["continuous_usage"]:
                        ev_usage = {"prompt_tokens": n_prompt, "completion_tokens": sent_tokens,
                                    "total_tokens": n_prompt + sent_tokens}
                    data = shape.token(text, ev_usage, finish if last_ev else None, reasoning)
                    now_ns = perf_counter_ns()
                    await resp.write(data)
                else:
                    now_ns = perf_counter_ns()
                event_ns.append(now_ns)
                if i == 0:
                    first_ns = now_ns
                    engine.h_ttft.observe((now_ns - arrival_ns) / 1e9)
                else:
                    engine.h_itl.observe((now_ns - last_ns) / 1e9)
                last_ns = now_ns
            done_ns = perf_counter_ns()
            timing = {"total_duration": done_ns - arrival_ns, "load_duration": 0,
                      "prompt_eval_count": n_prompt, "prompt_eval_duration": first_ns - prefill_start_ns,
                      "eval_count": n_tokens, "eval_duration": last_ns - first_ns}
            engine.h_e2e.observe((done_ns - arrival_ns) / 1e9)
            engine.finished(finish)
            if opts.get("store") is not None:
                self._store(shape.rid, opts["store"] + "\n" + "".join(words))
            if stream:
                assert resp is not None
                await resp.write(shape.close(finish, usage, timing, opts["include_usage"]))
                await resp.write_eof()
                return resp
            text = "".join(words)
            shape.reasoning_text = "".join(reason_words)
            return web.json_response(shape.whole(text, finish, usage, timing),
                                     headers=self._headers(queue_s * 1000.0))
        except ConnectionError:
            # the client went away mid-stream: its loss, not a server error worth a traceback
            outcome = Outcome.CLIENT_GONE
            return resp if resp is not None else web.Response(status=499)
        except asyncio.CancelledError:
            outcome = Outcome.CLIENT_GONE
            raise
        finally:
            if log is not None and self.recorder is not None:
                log.update({"slot_ns": slot_ns, "queue_ms": queue_s * 1000.0,
                            "prompt_tokens": n_prompt, "cached_tokens": cached,
                            "output_tokens": sent_tokens, "event_ns": event_ns,
                            "status": outcome.value, "stream": stream})
                self.recorder.write(log)

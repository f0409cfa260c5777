"""One generation request, whatever its API. Each API's handler module (``apis/``) parses its
own body into an ``Ask`` and names its stream shape; ``generate`` does the rest the same way for
all: faults, admission, the slot, prefill, the reply's events on the engine's clock, the
histograms and the send-time log.

Nothing here knows an API's field names: those are the handler's (and its shape's, shapes.py).
"""

from __future__ import annotations

import asyncio
import enum
import json
import random
import time
import uuid
import zlib
from dataclasses import dataclass
from typing import Any, Callable

from aiohttp import web

from llmbench.records.ids import id_of
from llmbench.records.safejson import schema_problem

from .context import Context
from .engine import MockConfig, QueueFull, Seq, mock_tokens, reply_words
from .errors import BadRequest
from .shapes import Shape
from .structured import images_in, pieces, reply_json, too_large

perf_counter_ns = time.perf_counter_ns


class Outcome(enum.Enum):
    """How a generation request ended, as the send-time log names it."""
    OK = "ok"
    CUT = "cut"                     # fault: the connection was closed mid-stream
    MALFORMED = "malformed"         # fault: a broken event, then nothing
    ERROR_EVENT = "error_event"     # fault: an error object inside the stream
    CLIENT_GONE = "client_gone"     # the client went away


# the stream faults that end a stream, and how the send-time log names each
FAULT_OUTCOMES = {"cut": Outcome.CUT, "malformed": Outcome.MALFORMED,
                  "error_event": Outcome.ERROR_EVENT}


@dataclass
class Ask:
    """A generation request as its handler read it."""

    body: dict[str, Any]
    model: str
    prompt: str                     # the text the engine prefills (the messages, rendered)
    n_tokens: int                   # reply tokens
    stream: bool
    hit_max: bool                   # the reply runs to the asked length (finish: length)
    ignore_eos: bool = False        # asked, and the emulated server honours it
    include_usage: bool = False     # stream_options.include_usage
    continuous_usage: bool = False  # stream_options.continuous_usage_stats
    # the reply's own text, in pieces (a tool call's arguments, a JSON reply); None: words
    pieces: list[str] | None = None
    tool: tuple[str, str] | None = None     # (call id, function name): the reply is a call
    finish: str | None = None               # the finish reason when not stop/length
    # called with the whole reply text once it is sent (the Responses API stores it)
    on_done: Callable[[str], None] | None = None


@dataclass(frozen=True)
class Api:
    """One API as the generation sees it: its name in the send-time log, how it reads a body
    and shapes a reply, and how it phrases an error and a full queue."""

    route: str
    parse: Callable[[Context, Any, str], Ask]       # (ctx, body, request id); BadRequest
    shape: Callable[[Context, Ask, str], Shape]     # (ctx, ask, request id)
    error: Callable[[str, int, str | None], web.Response]
    busy: Callable[[], web.Response]


# -- what every handler's parse shares ---------------------------------------------------------
def need_object(body: Any) -> dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest("request body must be a JSON object")
    return body


def check_max_tokens(max_tokens: Any) -> int | None:
    if max_tokens is None:
        return None
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, (int, float)) or max_tokens < 1:
        raise BadRequest(f"max_tokens must be at least 1, got {max_tokens!r}", param="max_tokens")
    return int(max_tokens)


def render_messages(messages: list[Any], cfg: MockConfig) -> str:
    """The prompt the engine prefills for a list of messages: each ``<|role|>content`` (text
    parts joined), then the images."""
    parts = []
    for m in messages:
        if not isinstance(m, dict) or "role" not in m:
            raise BadRequest("each message needs a role and content", param="messages")
        content = m.get("content")
        if isinstance(content, list):
            content = " ".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
        # a tool call is the model's own output, in the prompt as the template renders it
        calls = "".join(f"{call_text(c)} " for c in m.get("tool_calls") or ()
                        if isinstance(c, dict))
        parts.append(f"<|{m['role']}|>{content or ''}{calls}")
        # an image right after its turn's text, so a later turn's prompt starts with it too
        parts += image_prompts(images_in([m]), cfg)
    return "\n".join(parts)


def call_text(call: dict[str, Any]) -> str:
    """A tool call as the prompt holds it: the function's name and its arguments' JSON (chat's
    string or Ollama's object)."""
    fn = call.get("function") if isinstance(call.get("function"), dict) else call
    args = fn.get("arguments", "")
    return f"{fn.get('name', '')} {args if isinstance(args, str) else json.dumps(args)}"


def image_prompts(images: list[str], cfg: MockConfig) -> list[str]:
    """An image costs prefill like a prompt of image_tokens tokens (a vision encoder's
    patches), distinct per image so two images never share a cached prefix."""
    out = []
    for url in images:
        tag = f"img{zlib.crc32(url.encode()):08x}"
        out.append(" ".join(f"{tag}_{k}" for k in range(cfg.image_tokens)))
    return out


def make_ask(cfg: MockConfig, body: dict[str, Any], model: str, prompt: str,
             max_tokens: int | None, stream: bool) -> Ask:
    """The reply's length: the asked one, else the mock's; the configured EOS length cuts it
    unless the request asks to ignore EOS (Ollama has no ignore_eos)."""
    n_tokens = max_tokens if max_tokens is not None else cfg.tokens
    hit_max = max_tokens is not None
    ignore_eos = bool(body.get("ignore_eos")) and cfg.flavour != "ollama"
    if cfg.natural_tokens > 0 and not ignore_eos and cfg.natural_tokens < n_tokens:
        n_tokens, hit_max = cfg.natural_tokens, False
    so = body.get("stream_options") or {}
    so = so if isinstance(so, dict) else {}
    return Ask(body=body, model=model, prompt=prompt, n_tokens=n_tokens, stream=bool(stream),
               hit_max=hit_max or max_tokens is None and cfg.natural_tokens <= 0,
               ignore_eos=ignore_eos, include_usage=bool(so.get("include_usage")),
               continuous_usage=bool(so.get("continuous_usage_stats")))


def plan_reply(ask: Ask, cfg: MockConfig, rid: str, tools: list[tuple[str, dict[str, Any]]],
               choice: str, schema: dict[str, Any] | None) -> None:
    """A tool call (share tool_call_share of the requests that offer tools; always with
    ``choice`` "required", never with "none") or a JSON reply (a request with a response
    format; share invalid_json_share cut short): the reply's pieces (the request's max tokens
    still cut it). A schema the generator cannot follow is the client's mistake: a 400."""
    rng = random.Random(f"{cfg.seed}-{rid}")
    # a keyword of the wrong type ("required": 5) the generator never reads is the request's
    # mistake too: named, as the client names it before it sends (safejson.schema_problem)
    problem = (schema_problem(schema) or too_large(schema)) if schema else None
    for name, params in tools if problem is None else ():
        problem = (schema_problem(params) or too_large(params)) if params else None
        if problem:
            problem = f"tool {name[:40]!r}'s parameters: {problem}"
            break
    if problem:
        raise BadRequest(f"invalid JSON schema: {problem}")
    try:
        if tools and choice != "none" and (choice == "required" or rng.random() < cfg.tool_call_share):
            name, params = tools[rng.randrange(len(tools))]
            text = reply_json(params, rid)
            ask.tool, ask.finish = (f"call_{rid}", name), "tool_calls"
        elif schema is not None:
            text = reply_json(schema, rid, invalid=rng.random() < cfg.invalid_json_share)
        else:
            return
    except (ValueError, TypeError, RecursionError) as exc:
        raise BadRequest(f"cannot follow the JSON schema given: {exc}") from None
    ask.pieces = pieces(text)


# -- the generation ------------------------------------------------------------------------------
async def generate(ctx: Context, api: Api, request: web.Request) -> web.StreamResponse:
    engine = ctx.engine
    cfg = engine.config
    handler_ns = perf_counter_ns()
    # when the bytes were read (server.ArrivalStampingHandler), else now
    arrival_ns = getattr(request.protocol, "arrival_ns", 0) or handler_ns
    # llmbench sends a UUID that carries its own id (records.ids): the reply's words and the
    # log are seeded and keyed by that id, as they were when the header was the id itself
    header = request.headers.get("x-request-id")
    rid = (id_of(header) or header) if header else uuid.uuid4().hex[:16]
    if not ctx.authorized(request):
        await request.read()
        return api.error("invalid API key (give it as Authorization: Bearer KEY or x-api-key: "
                         "KEY)", 401, None)
    try:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise BadRequest(f"invalid JSON in request body: {exc}")
        ask = api.parse(ctx, body, rid)
    except BadRequest as exc:
        return api.error(str(exc), exc.status, exc.param)
    fault = engine.draw_fault()
    if fault == "slow_first_byte":
        await asyncio.sleep(cfg.slow_first_byte_ms / 1000.0)
    if fault == "500":
        return api.error("mock fault: internal server error", 500, None)
    if fault == "429":
        return api.error("mock fault: rate limit exceeded", 429, None)
    ptoks = mock_tokens(ask.prompt)
    if cfg.context and len(ptoks) >= cfg.context:
        return api.error(f"the request exceeds the available context size: {len(ptoks)} "
                         f"prompt tokens, context {cfg.context}; try increasing it", 400, None)
    try:
        engine.admit()
    except QueueFull:
        return api.busy()
    natural = engine.natural_tokens()
    if natural and natural < ask.n_tokens and not ask.ignore_eos:
        ask.n_tokens, ask.hit_max = natural, False      # a fitted EOS length
    if ask.pieces is not None:
        # as many tokens as the JSON has; the request's max tokens still cut it
        limit = ask.n_tokens if ask.hit_max else len(ask.pieces)
        ask.n_tokens, ask.hit_max = min(len(ask.pieces), limit), len(ask.pieces) > limit
    shape = api.shape(ctx, ask, rid)
    if ask.tool is not None:
        shape.tool = ask.tool
    log: dict[str, Any] | None = None
    if ctx.recorder is not None:
        log = {"replica": engine.replica, "request_id": rid, "route": api.route,
               "arrival_ns": arrival_ns, "handler_ns": handler_ns, "fault": fault}
        tp = request.headers.get("traceparent")
        if tp:                          # W3C trace context, as received (llmbench --traceparent)
            log["traceparent"] = tp[:80]
        if ctx.recorder.prompts:
            log["messages"] = ask.body.get("messages")
            log["prompt"] = ask.body.get("prompt")
    seq = Seq(prompt_tokens=len(ptoks))
    work = _queued_and_served(ctx, request, shape, ptoks, seq, ask, fault, arrival_ns, log)
    if not cfg.decode_after_close:
        try:
            return await work
        except asyncio.CancelledError:
            # the client closed the connection (the routes cancel a request's handler then):
            # its queue place or slot is freed on the way out
            engine.stats.closed_by_client_total += 1
            raise
    # decode_after_close: the request runs to its end, whatever became of the client
    task = asyncio.ensure_future(work)
    ctx.background.add(task)
    task.add_done_callback(ctx.background.discard)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        engine.stats.closed_by_client_total += 1
        raise


async def _queued_and_served(ctx: Context, request: web.Request, shape: Shape,
                             ptoks: list[str], seq: Seq, ask: Ask, fault: str | None,
                             arrival_ns: int, log: dict[str, Any] | None) -> web.StreamResponse:
    """Wait for a slot, then serve; the slot is freed however it ends."""
    engine = ctx.engine
    acquired: Seq | None = None
    try:
        acquired = await engine.acquire_slot(seq)
        return await _serve(ctx, request, shape, ptoks, seq, ask, fault, arrival_ns, log)
    finally:
        if acquired is not None:
            engine.release_slot(seq)


async def _serve(ctx: Context, request: web.Request, shape: Shape, ptoks: list[str], seq: Seq,
                 ask: Ask, fault: str | None, arrival_ns: int, log: dict[str, Any] | None
                 ) -> web.StreamResponse:
    engine = ctx.engine
    cfg = engine.config
    n_tokens = ask.n_tokens
    stream = ask.stream
    slot_ns = perf_counter_ns()
    queue_s = (slot_ns - arrival_ns) / 1e9
    engine.h_queue.observe(queue_s)
    n_prompt = len(ptoks)
    _, cached = engine.prefill(ptoks, seq)
    shape.n_prompt, shape.cached = n_prompt, cached
    seq.cached = cached
    chunk = max(cfg.chunk_tokens, 1)
    # a reasoning model's reasoning first (its own events), then the answer
    n_reason = cfg.reasoning_tokens if shape.reasoning_field else 0
    r_events = (n_reason + chunk - 1) // chunk
    n_events = r_events + max((n_tokens + chunk - 1) // chunk, 1)
    words = ask.pieces[:n_tokens] if ask.pieces else reply_words(shape.rid, n_tokens)
    reason_words = reply_words(shape.rid + "-r", n_reason)
    n_tokens += n_reason
    seq.n_predict = n_tokens
    shape.reasoning_count = n_reason
    usage = _usage(engine, n_prompt, n_tokens, cached)
    finish = "length" if ask.hit_max else ask.finish or "stop"
    fault_at = engine.rng.randint(1, max(n_events - 1, 1)) if fault else -1
    event_ns: list[int] = []
    resp: web.StreamResponse | None = None
    prefill_start_ns = perf_counter_ns()
    sent_tokens = 0
    outcome = Outcome.OK
    keep_on = cfg.decode_after_close
    gone = False

    async def guarded(op: Callable[[Any], Any], arg: Any) -> None:
        """``op(arg)`` on the client's connection; with decode_after_close, one that finds it
        closed is dropped and the generation goes on."""
        nonlocal gone, outcome
        if gone:
            return
        try:
            await op(arg)
        except ConnectionError:
            if not keep_on:
                raise
            gone, outcome = True, Outcome.CLIENT_GONE
    try:
        if stream:
            resp = web.StreamResponse(headers={**ctx.headers(queue_s * 1000.0),
                                               "content-type": shape.content_type,
                                               "cache-control": "no-cache"})
            resp.enable_chunked_encoding()
            await guarded(resp.prepare, request)
            opening = shape.open()
            if opening:
                await guarded(resp.write, opening)
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
                assert resp is not None and fault is not None
                # the outcome first: a write that fails on the way is still this fault's
                outcome = FAULT_OUTCOMES.get(fault, outcome)
                if await _stream_fault(fault, cfg, request, resp, shape):
                    return resp
            text = "".join(reason_words[sent_tokens:sent_tokens + k] if reasoning
                           else words[sent_tokens - n_reason:sent_tokens - n_reason + k])
            sent_tokens += k
            last_ev = i == n_events - 1
            if stream:
                assert resp is not None
                ev_usage = None
                if ask.continuous_usage:
                    ev_usage = {"prompt_tokens": n_prompt, "completion_tokens": sent_tokens,
                                "total_tokens": n_prompt + sent_tokens}
                data = shape.token(text, ev_usage, finish if last_ev else None, reasoning)
                now_ns = perf_counter_ns()
                await guarded(resp.write, data)
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
        timing = _timing(engine, n_prompt, cached, n_tokens, (
            arrival_ns, prefill_start_ns, first_ns, last_ns, done_ns))
        engine.h_e2e.observe((done_ns - arrival_ns) / 1e9)
        engine.finished(finish)
        if ask.on_done is not None:
            ask.on_done("".join(words))
        if stream:
            assert resp is not None
            await guarded(resp.write, shape.close(finish, usage, timing, ask.include_usage))
            if not gone:
                await resp.write_eof()
            return resp
        text = "".join(words)
        shape.reasoning_text = "".join(reason_words)
        return web.json_response(shape.whole(text, finish, usage, timing),
                                 headers=ctx.headers(queue_s * 1000.0))
    except ConnectionError:
        # the client went away mid-stream: its loss, not a server error worth a traceback (a
        # write found the connection closed before the routes cancelled the handler)
        outcome = Outcome.CLIENT_GONE
        engine.stats.closed_by_client_total += 1
        return resp if resp is not None else web.Response(status=499)
    except asyncio.CancelledError:
        outcome = Outcome.CLIENT_GONE
        raise
    finally:
        if seq.held is not None:
            # the reply as the next turn sends it back: what a later prompt can find cached
            r_sent = min(sent_tokens, n_reason)
            said = "".join(reason_words[:r_sent]) + (f"{ask.tool[1]} " if ask.tool else "") \
                + "".join(words[:max(sent_tokens - n_reason, 0)])
            engine.kv_end(seq, mock_tokens("<|assistant|>" + said))
        if log is not None and ctx.recorder is not None:
            log.update({"slot_ns": slot_ns, "queue_ms": queue_s * 1000.0,
                        "prompt_tokens": n_prompt, "cached_tokens": cached,
                        "output_tokens": sent_tokens, "event_ns": event_ns,
                        "status": outcome.value, "stream": stream})
            ctx.recorder.write(log)


def _usage(engine: Any, n_prompt: int, n_tokens: int, cached: int) -> dict[str, Any]:
    """OpenAI-style usage, with the cached prompt tokens when the mock has a cache to report."""
    cfg = engine.config
    usage: dict[str, Any] = {"prompt_tokens": n_prompt, "total_tokens": n_prompt + n_tokens,
                             "completion_tokens": n_tokens}
    if (cfg.prefix_cache or engine.kv is not None) and cfg.cache_report == "usage":
        usage["prompt_tokens_details"] = {"cached_tokens": cached}
    return usage


def _timing(engine: Any, n_prompt: int, cached: int, n_tokens: int,
            ns: tuple[int, int, int, int, int]) -> dict[str, Any]:
    """Ollama's timings (ns) from the request's clock points: (arrival, prefill start, first
    event, last event, done)."""
    cfg = engine.config
    arrival_ns, prefill_start_ns, first_ns, last_ns, done_ns = ns
    # Ollama 0.30 to 0.33 counted only what it evaluated (a cached prompt: what was left)
    evaluated = n_prompt - cached if cfg.cache_report == "evaluated" else n_prompt
    timing = {"total_duration": done_ns - arrival_ns, "load_duration": 0,
              "prompt_eval_count": max(evaluated, 1),
              "prompt_eval_duration": first_ns - prefill_start_ns,
              "eval_count": n_tokens, "eval_duration": last_ns - first_ns}
    if engine.kv is not None and cfg.cache_report == "usage":
        timing["prompt_eval_cached_count"] = cached     # Ollama's name (0.34 on)
    return timing


async def _stream_fault(fault: str, cfg: MockConfig, request: web.Request,
                        resp: web.StreamResponse, shape: Shape) -> bool:
    """A fault drawn for this stream, at its event: a stall (the stream goes on: False), or a
    cut, a malformed event or an error event, after which it has ended (True)."""
    if fault == "stall":
        await asyncio.sleep(cfg.stall_ms / 1000.0)
    elif fault == "cut":
        assert request.transport is not None
        request.transport.close()
        return True
    elif fault == "malformed":
        await resp.write(shape.malformed())
        return True
    elif fault == "error_event":
        await resp.write(shape.error_event("mock fault: error inside the stream"))
        if shape.ends_with_done:
            await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return True
    return False

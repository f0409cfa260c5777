"""Recordings of real traffic (``llmbench record``): the file's shape, how requests are linked
into sessions, and the share of prompt tokens that repeat an earlier prefix.

A recording is JSON lines. The first is the header::

    {"llmbench_recording": 1, "text": "anonymised" | "original", "tokenizer": ..., ...}

then one line per LLM request, appended when it finished::

    {"timestamp": ms since the recording began (arrival at the recorder),
     "session_id": "s3", "turn": 2, "after_ms": the gap since the session's previous reply
     ended (think or tool time; null on a session's first turn), "parent_session": the
     session whose turn this one started beside (a sub-agent), or null,
     "api": "openai-chat", "endpoint": "/v1/chat/completions", "status": 200,
     "model": ..., "stream": true, "request": the body (anonymised unless --keep-text),
     "new_from": where this turn's own messages start in the body's message list,
     "max_tokens", "sampling": {...}, "tools": how many,
     "input_length", "output_length", "cached_tokens": the server's usage where given,
     "ttft_ms", "itl_ms": [...], "e2el_ms": as seen through the recorder}

Sessions: a request extends an earlier one when its messages begin with all of the earlier
request's messages followed by an assistant message (the reply: a chat's next turn, an agent's
tool loop); the Responses API links by ``previous_response_id``. A request that extends one
already extended (a retry, a branch) starts a session of its own whose ``parent_session`` is the
first one; a request that extends none starts a session, whose parent is the session whose
latest reply (ended before it arrived) called a tool, when there is one: a sub-agent that tool
started.

Replay (``Replayed``, ``replay_messages``): a recorded request is sent again as it was, in the
API it was recorded with (REPLAY_APIS; others in the run's API, as text): its own messages in
chat's shape (wire/ turns them back) after the live replies, each tool result answering the live
reply's call by its id, its tools in the body as recorded.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Iterable

from llmbench.wire.agents import tool_calls_of
from llmbench.workload.anonymise import STRUCTURE, chunks

FORMAT_VERSION = 1
HEADER_KEY = "llmbench_recording"
SAMPLING = ("temperature", "top_p", "top_k", "min_p", "seed", "presence_penalty",
            "frequency_penalty", "repeat_penalty", "stop", "n", "logprobs", "response_format",
            "tool_choice", "reasoning_effort", "think", "options")


@dataclass(frozen=True)
class Message:
    """One message of a recorded conversation, keyed by its canonical JSON."""
    role: str
    key: str          # the message's canonical JSON: equal messages, equal keys
    text: str         # every text in it, joined (what a replay sends of it)


def texts(v: Any, key: str | None = None) -> Iterable[str]:
    """Every content string in a message (not its roles, types or ids)."""
    if isinstance(v, str):
        if key not in STRUCTURE and not v.startswith("data:") and key not in ("url", "name"):
            yield v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from texts(x, k)
    elif isinstance(v, list):
        for x in v:
            yield from texts(x, key)


def _msg(role: Any, m: Any) -> Message:
    return Message(str(role or "user"), json.dumps(m, sort_keys=True, ensure_ascii=False),
                   "\n".join(t for t in texts(m) if t))


def messages_of(api: str, body: dict[str, Any]) -> list[Message]:
    """The request's prompt as messages, alike for every API (the system prompt first, as one)."""
    out: list[Message] = []
    if api in ("openai-chat", "anthropic") or "messages" in body:
        if api == "anthropic" and body.get("system"):
            out.append(_msg("system", body["system"]))
        for m in body.get("messages") or []:
            out.append(_msg(m.get("role") if isinstance(m, dict) else None, m))
    elif api == "responses":
        if body.get("instructions"):
            out.append(_msg("system", body["instructions"]))
        inp = body.get("input")
        if isinstance(inp, str):
            out.append(_msg("user", inp))
        elif isinstance(inp, list):
            for it in inp:
                role = it.get("role") if isinstance(it, dict) else None
                kind = it.get("type") if isinstance(it, dict) else None
                if role is None:
                    role = ("assistant" if kind in ("function_call", "reasoning", "message")
                            else "tool" if kind == "function_call_output" else "user")
                out.append(_msg(role, it))
    else:                   # prompt APIs (completions, generate) and embeddings
        for k in ("system", "prompt", "input", "inputs"):
            if k in body:
                out.append(_msg("system" if k == "system" else "user", body[k]))
    return out


def _h(prev: bytes, key: str) -> bytes:
    return hashlib.blake2b(prev + key.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def prefix_hashes(msgs: list[Message]) -> list[bytes]:
    """hashes[k]: the hash of msgs[:k] (hashes[0] of none)."""
    out = [b""]
    for m in msgs:
        out.append(_h(out[-1], m.role + "\x00" + m.key))
    return out


@dataclass
class Link:
    """Where a recorded call sits: its session and turn."""
    session: str
    turn: int
    new_from: int              # where the turn's own messages start
    parent: str | None = None
    prev_id: int | None = None  # the request (by arrival order) it extends


@dataclass
class Linker:
    """Assigns each finished request to a session (see the module doc). Requests are linked in
    the order they finish; a reply can only be extended after it came, so that order sees
    every request a later one could extend."""

    _by_prefix: dict[bytes, int] = field(default_factory=dict)    # full-prompt hash -> req
    _by_ref: dict[str, int] = field(default_factory=dict)         # Responses id -> req
    _links: dict[int, Link] = field(default_factory=dict)
    _extended: set[int] = field(default_factory=set)
    _sessions: int = 0
    turns: dict[str, int] = field(default_factory=dict)           # session -> turns so far

    def _new(self, parent: str | None) -> Link:
        self._sessions += 1
        return Link(f"s{self._sessions}", 0, 0, parent)

    # session -> (when its last reply ended, whether that reply called a tool)
    _waiting: dict[str, tuple[float, bool]] = field(default_factory=dict)

    def parent_at(self, arrival: float) -> str | None:
        """The parent of a session starting at ``arrival`` (module doc); None: no tool call out."""
        best: tuple[float, str] | None = None
        for s, (end, tool) in self._waiting.items():
            if tool and end <= arrival and (best is None or end > best[0]):
                best = (end, s)
        return best[1] if best else None

    def ended(self, session: str, end: float, tool_call: bool) -> None:
        self._waiting[session] = (end, tool_call)

    def link(self, rid: int, msgs: list[Message], prev_ref: str | None, ref: str | None,
             arrival: float | None = None) -> Link:
        hashes = prefix_hashes(msgs)
        found: tuple[int, int] | None = None           # (request, where its prompt ends)
        if prev_ref is not None and prev_ref in self._by_ref:
            found = (self._by_ref[prev_ref], 0)
        else:
            for k in range(len(msgs) - 1, 0, -1):
                if msgs[k].role == "assistant" and hashes[k] in self._by_prefix:
                    found = (self._by_prefix[hashes[k]], k + 1)
                    break
        if found is None:
            link = self._new(None if arrival is None else self.parent_at(arrival))
        else:
            prev, start = found
            pl = self._links[prev]
            if prev in self._extended:                 # a retry or a branch: its own session
                link = self._new(pl.session)
                link.new_from = start
            else:
                link = Link(pl.session, pl.turn + 1, start, pl.parent)
            link.prev_id = prev
            self._extended.add(prev)
        self._links[rid] = link
        self._by_prefix[hashes[-1]] = rid
        if ref is not None:
            self._by_ref[ref] = rid
        self.turns[link.session] = max(self.turns.get(link.session, 0), link.turn + 1)
        return link


class PrefixShare:
    """The share of prompt tokens that repeat a prefix an earlier request sent (what an
    unbounded prefix cache could serve), at the anonymiser's chunk granularity: a prompt is its
    messages' chunks in order; its longest leading run of chunks seen before is the repeat."""

    def __init__(self, count: Any) -> None:
        self.count = count                   # text -> tokens
        self.seen: set[bytes] = set()
        self.tokens = self.repeated = 0

    def add(self, msgs: list[Message]) -> float:
        h, matching, rep, tot = b"", True, 0, 0
        for m in msgs:
            for c in chunks(m.text) or [""]:
                h = _h(h, m.role + "\x00" + c)
                n = self.count(c) if c else 1
                tot += n
                if matching and h in self.seen:
                    rep += n
                else:
                    matching = False
                    self.seen.add(h)
        self.tokens += tot
        self.repeated += rep
        return rep / tot if tot else 0.0

    @property
    def share(self) -> float | None:
        return self.repeated / self.tokens if self.tokens else None


def header(text_kept: bool, tokenizer: str, upstream: str, started: str) -> dict[str, Any]:
    return {HEADER_KEY: FORMAT_VERSION, "text": "original" if text_kept else "anonymised",
            "tokenizer": tokenizer, "upstream": upstream, "started": started,
            "note": ("the requests' own text, as clients sent it (--keep-text)" if text_kept
                     else "every text replaced by synthetic text of the same token length, "
                          "the same text by the same replacement")}


def sampling_of(body: dict[str, Any]) -> dict[str, Any]:
    return {k: body[k] for k in SAMPLING if k in body}


def max_tokens_of(body: dict[str, Any]) -> int | None:
    for k in ("max_completion_tokens", "max_tokens", "max_output_tokens", "n_predict"):
        v = body.get(k)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    opts = body.get("options")
    if isinstance(opts, dict) and isinstance(opts.get("num_predict"), int):
        return opts["num_predict"]
    return None


# -- replay: a recorded request as the replay sends it ------------------------------------------
# APIs replayed in their own API (module doc), their messages in chat's shape turned back by wire/
REPLAY_APIS = ("openai-chat", "anthropic")
TOOL_FIELDS = ("tools", "tool_choice")


@dataclass(frozen=True)
class Replayed:
    """One recorded request as the replay sends it (``replayed``): ``api``, the API it was
    recorded with (None: the run's); ``own``, its own messages in chat's shape; ``extra``,
    its tools."""

    api: str | None
    own: tuple[dict[str, Any], ...]
    extra: dict[str, Any] = field(default_factory=dict)


def _text_parts(content: Any) -> Any:
    """Messages content blocks as chat content: a string stays; text blocks become text parts
    (one string when there is one); anything else (an anonymised image marker) is left out."""
    if not isinstance(content, list):
        return content if isinstance(content, str) else ""
    parts = [{"type": "text", "text": b.get("text", "")} for b in content
             if isinstance(b, dict) and b.get("type") == "text"
             and isinstance(b.get("text"), str)]
    return parts[0]["text"] if len(parts) == 1 else parts


def _anthropic_chat(role: str, m: Any) -> list[dict[str, Any]]:
    """One Messages message (or the system) as chat messages: tool_use blocks become the
    assistant's tool_calls, tool_result blocks chat's tool messages."""
    if role == "system":
        return [{"role": "system", "content": _text_parts(m)}]
    if not isinstance(m, dict):
        return []
    content = m.get("content")
    if not isinstance(content, list):
        return [{"role": role, "content": content if isinstance(content, str) else ""}]
    text = _text_parts([b for b in content if isinstance(b, dict) and b.get("type") == "text"])
    calls = [{"id": str(b.get("id") or ""), "type": "function",
              "function": {"name": str(b.get("name") or ""),
                           "arguments": json.dumps(b.get("input") or {})}}
             for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]
    results = [{"role": "tool", "tool_call_id": str(b.get("tool_use_id") or ""),
                "content": _text_parts(b.get("content"))}
               for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
    out: list[dict[str, Any]] = results
    if calls:
        out = out + [{"role": "assistant", "content": text or None, "tool_calls": calls}]
    elif text or not results:
        out = out + [{"role": role, "content": text}]
    return out


def chat_messages(api: str, body: dict[str, Any]) -> list[list[dict[str, Any]]]:
    """The request's messages in chat's shape, one list per message of ``messages_of`` (so
    a recording's ``new_from`` indexes it)."""
    if api == "anthropic":
        out = [_anthropic_chat("system", body["system"])] if body.get("system") else []
        for m in body.get("messages") or []:
            role = m.get("role") if isinstance(m, dict) else None
            out.append(_anthropic_chat(str(role or "user"), m))
        return out
    if api == "openai-chat":
        return [[m] if isinstance(m, dict) else [{"role": "user", "content": ""}]
                for m in body.get("messages") or []]
    # another API: its messages as text (a tool message has no call to answer here)
    return [[{"role": m.role if m.role in ("system", "assistant") else "user",
              "content": m.text}] for m in messages_of(api, body)]


def replayed(api: str, body: dict[str, Any], new_from: int, turn: int) -> Replayed:
    """How the replay sends one recorded request (``new_from``: where its own messages start;
    a session's first turn sends them all, the history a branch began from included)."""
    msgs = chat_messages(api, body)
    own = tuple(m for ms in msgs[0 if turn == 0 else new_from:] for m in ms)
    if api not in REPLAY_APIS:
        return Replayed(None, own)
    extra = {k: body[k] for k in TOOL_FIELDS if k in body and body[k] is not None}
    if "tools" not in extra:
        extra.pop("tool_choice", None)
    return Replayed(api, own, extra)


def trim_start(own: tuple[dict[str, Any], ...], tokens: int,
               count: Any) -> tuple[dict[str, Any], ...]:
    """``own`` with whole words dropped from the start of its first text until they count
    (``count``: text -> tokens) ``tokens`` or more, one word kept: room for the run's salt
    (workload/salt.py), so a replayed prompt is as long as the recorded one."""
    if tokens <= 0 or not own:
        return own
    first = own[0]
    content = first.get("content")
    text = content if isinstance(content, str) else (
        content[0].get("text") if isinstance(content, list) and content
        and isinstance(content[0], dict) and isinstance(content[0].get("text"), str) else None)
    if not text:
        return own
    words = text.split(" ")
    k = min(tokens, len(words) - 1)
    while 0 < k < len(words) - 1 and count(" ".join(words[:k])) < tokens:
        k += 1
    rest = " ".join(words[k:])
    if isinstance(content, str):
        first = {**first, "content": rest}
    else:
        first = {**first, "content": [{**content[0], "text": rest}, *content[1:]]}
    return (first,) + own[1:]


def assistant_message(reply: str) -> dict[str, Any]:
    """The live reply as the history holds it: its text, and its tool calls when it made any."""
    calls = tool_calls_of(reply)
    if calls:
        return {"role": "assistant", "content": str(reply) or None, "tool_calls": calls}
    return {"role": "assistant", "content": str(reply)}


def answered(own: tuple[dict[str, Any], ...], reply: str) -> list[dict[str, Any]]:
    """A turn's own messages after the live ``reply``: its tool results answer the calls the
    live reply made (their ids, in order; the recorded ids named the recorded calls); when the
    live reply called no tool, a result is a user message of the same text."""
    ids = [c["id"] for c in tool_calls_of(reply)]
    out: list[dict[str, Any]] = []
    k = 0
    for m in own:
        if m.get("role") == "tool":
            if ids:
                out.append({**m, "tool_call_id": ids[min(k, len(ids) - 1)]})
                k += 1
            else:
                out.append({"role": "user", "content": m.get("content") or ""})
            continue
        out.append(m)
    return out


def replay_messages(turns: tuple[Replayed, ...], t: int, replies: list[str]
                    ) -> list[dict[str, Any]]:
    """The messages of a recorded session's turn ``t``: each earlier turn's own messages and
    its live reply, then this turn's own."""
    msgs = list(turns[0].own)
    for i in range(1, t + 1):
        reply = replies[i - 1] if i - 1 < len(replies) else ""
        msgs.append(assistant_message(reply))
        msgs.extend(answered(turns[i].own, reply))
    return msgs

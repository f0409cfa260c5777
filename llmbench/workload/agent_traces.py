"""Replayed agent sessions: llmbench's own session format, WEKA-style traces and OTel GenAI spans,
read into the plans the agent loop plays (workload.agents.AgentSession).

What is replayed is a session's *shape* (its agents, each call's new tokens and reply length,
the tool gaps, where sub-agents start and join); the text is synthetic and the model's real
replies go into the history, so the context grows and its prefix repeats as in the trace. A
trace's recorded block hashes are not needed for that and are not read. Nothing is downloaded.

Formats (``--dataset-format agent | weka | otel``, else found from the file's first record;
docs/agents.md has every field): llmbench's own JSONL (one model call a line, linked by
``parent``), WEKA-style traces (GuideLLM's flattened rows too) and OpenTelemetry GenAI spans.

Every mistake in a file (a cycle in the parent links, a negative tool gap...) is one line naming
the file and the line (or the trace and call) and what to do.
"""

from __future__ import annotations

import json
import math
import os
import random
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Iterator

from llmbench.workload.agents import (MAX_AGENT_DEPTH, MAX_AGENT_STEPS, MAX_AGENT_TOKENS, MAX_GAP_S,
                                      AgentPlan, AgentSession, StepPlan, session_of,
                                      synthetic_tools)
from llmbench.workload.files import DatasetError, check_regular_file, read_lines, too_deep
from llmbench.workload.salt import vocabulary

# A trace read as one JSON document (WEKA, OTLP over several lines) is read whole: at most this
# much (a JSONL trace is read a line at a time, each line at most files.MAX_LINE_BYTES)
MAX_DOCUMENT_BYTES = 256 << 20

FORMATS = ("agent", "weka", "otel")
_LLM_OPS = frozenset(("chat", "text_completion", "generate_content", "generate", "completion"))
_NOT_LLM_OPS = frozenset(("invoke_agent", "execute_tool", "embeddings", "create_agent"))


@dataclass
class _Step:
    """One call as read, before it becomes a StepPlan."""
    sid: str
    id: str
    line: int
    parent: str | None
    agent: str
    output: int
    new: int | None = None
    input: int | None = None
    gap: float | None = None
    t: float | None = None
    dur: float | None = None
    system: int = 0
    background: bool = False


@dataclass
class _Read:
    """An agent trace read: its sessions' steps and the warnings on the way."""
    sessions: dict[str, list[_Step]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)


def _bad(path: str, where: Any, what: str) -> DatasetError:
    return DatasetError(f"{path}:{where}: {what}")


def _lines(path: str) -> Iterator[tuple[int, str]]:
    """The file's lines that are not blank, as files.read_lines reads a chat dataset's."""
    try:
        yield from read_lines(path)
    except OSError as exc:
        raise DatasetError(f"--dataset {path}: cannot read it ({exc.strerror or exc})") from None


def _loads(path: str, n: Any, text: str) -> Any:
    """json.loads; nesting too deep is one line (files.too_deep), a JSONDecodeError the caller's."""
    try:
        return json.loads(text)
    except RecursionError:
        raise too_deep(f"{path}:{n}") from None


def _json_line(path: str, n: int, line: str) -> Any:
    try:
        return _loads(path, n, line)
    except json.JSONDecodeError as exc:
        raise _bad(path, n, f"not JSON ({exc.msg} at column {exc.colno}); each line of an agent "
                            "trace is one JSON object") from None


def _whole_json(path: str) -> Any:
    try:
        size = os.path.getsize(path)
        if size > MAX_DOCUMENT_BYTES:
            raise DatasetError(f"--dataset {path}: a JSON document of {size / 1e6:,.0f} MB is "
                               f"over the {MAX_DOCUMENT_BYTES >> 20} MB an agent trace may be; "
                               "give it as JSONL (one trace, session or span a line)")
        with open(path, "rb") as fh:
            raw = fh.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as exc:
        raise DatasetError(f"--dataset {path}: cannot read it ({exc.strerror or exc})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise DatasetError(f"{path}:{line}: not UTF-8 text; save the file as UTF-8") from None
    try:
        return _loads(path, 1, text)
    except json.JSONDecodeError as exc:
        raise _bad(path, exc.lineno, f"not JSON ({exc.msg} at column {exc.colno})") from None


def _records(path: str) -> list[tuple[int, Any]]:
    """(line, JSON value) of each line; the file as one document when a line is not JSON."""
    try:
        return [(n, _loads(path, n, line)) for n, line in _lines(path)]
    except json.JSONDecodeError:
        return [(1, _whole_json(path))]


def detect(path: str) -> str:
    """The file's format from its first record (agent, weka or otel)."""
    for n, line in _lines(path):
        try:
            obj = _loads(path, n, line)
        except json.JSONDecodeError:
            obj = _whole_json(path)           # a JSON document over several lines (WEKA, OTLP)
        return _kind_of(path, n, obj)
    raise DatasetError(f"--dataset {path}: the file is empty; give agent sessions (docs/agents.md)")


def _kind_of(path: str, n: int, obj: Any) -> str:
    if isinstance(obj, list) and obj:
        obj = obj[0]
    if not isinstance(obj, dict):
        raise _bad(path, n, "expected a JSON object (one call, trace or span)")
    keys = set(obj)
    if "resourceSpans" in keys or "spans" in keys or "attributes" in keys \
            or keys & {"span_id", "spanId", "context"}:
        return "otel"
    if "requests" in keys or ("hash_ids" in keys and "input_length" in keys):
        return "weka"
    if "session" in keys and "step" in keys:
        return "agent"
    raise _bad(path, n, "not an agent trace: expected llmbench's session format (session, step, "
                        "output_tokens ...), a WEKA trace (requests) or OTel spans; see "
                        "docs/agents.md, or pass --dataset-format")


# -- llmbench's own format -------------------------------------------------------------------------
def _tokens(path: str, n: Any, key: str, v: Any) -> int:
    """A token count as a trace gives it (a number, or a string of digits as OTLP's intValue
    is): whole, finite, 0 or more and at most MAX_AGENT_TOKENS, else one line."""
    if isinstance(v, str) and v.strip().isdigit() and len(v.strip()) <= 20:
        v = int(v.strip())
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (
            isinstance(v, float) and (not math.isfinite(v) or v != int(v))):
        raise _bad(path, n, f"{key} {_show(v)}: expected a whole number of tokens")
    if v < 0:
        raise _bad(path, n, f"{key} {_show(v)}: must not be negative")
    if v > MAX_AGENT_TOKENS:
        raise _bad(path, n, f"{key} {_show(v)}: over {MAX_AGENT_TOKENS:,} tokens, more than any "
                            "model's context; fix the number or leave the call out")
    return int(v)


def _show(v: Any) -> str:
    """A value as a message quotes it, short (a 5,000-digit number is not quoted whole)."""
    text = repr(v)
    return text if len(text) <= 40 else text[:37] + "..."


def _int(path: str, n: Any, obj: dict, key: str, default: int | None = None) -> int | None:
    v = obj.get(key, default)
    if v is None:
        return None
    return _tokens(path, n, key, v)


def _secs(path: str, n: Any, obj: dict, key: str, *, capped: bool = True) -> float | None:
    """Seconds from a trace: finite; a gap or a duration (``capped``) 0 to MAX_GAP_S."""
    v = obj.get(key)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise _bad(path, n, f"{key} {_show(v)}: expected a number of seconds")
    if v < 0 and key in ("tool_gap_s", "think_time"):
        raise _bad(path, n, f"{key} {v:g}: a tool gap cannot be negative; give the seconds "
                            "between the parent's reply and this call, 0 or more")
    if capped and abs(v) > MAX_GAP_S:
        raise _bad(path, n, f"{key} {v:g}: over 30 days, the longest llmbench replays; fix "
                            "the number (seconds)")
    return float(v)


def read_agent(path: str) -> _Read:
    out = _Read()
    for n, line in _lines(path):
        obj = _json_line(path, n, line)
        if not isinstance(obj, dict):
            raise _bad(path, n, "expected a JSON object: one model call")
        if "session" not in obj or "step" not in obj:
            raise _bad(path, n, "a call needs session and step (its ids)")
        sid, step = str(obj["session"]), str(obj["step"])
        output = _int(path, n, obj, "output_tokens")
        if not output:
            raise _bad(path, n, f"step {step} of session {sid} has no tokens: give output_tokens, "
                                "the reply length (1 or more)")
        parent = obj.get("parent")
        st = _Step(sid, step, n, None if parent is None else str(parent),
                   str(obj.get("agent") or "main"), output,
                   new=_int(path, n, obj, "new_tokens"), input=_int(path, n, obj, "input_tokens"),
                   gap=_secs(path, n, obj, "tool_gap_s"),
                   t=_secs(path, n, obj, "t", capped=False),
                   dur=_secs(path, n, obj, "duration_s"),
                   system=_int(path, n, obj, "system_tokens", 0) or 0,
                   background=bool(obj.get("background")))
        out.sessions.setdefault(sid, []).append(st)
    return out


# -- WEKA ----------------------------------------------------------------------------------------
def read_weka(path: str) -> _Read:
    out = _Read()
    records = _records(path)
    if records and isinstance(records[0][1], list):
        records = [(records[0][0], x) for x in records[0][1]]
    flat = [r for r in records if isinstance(r[1], dict) and "requests" not in r[1]]
    if flat:
        _weka_rows(path, flat, out)
    for n, tr in records:
        if not isinstance(tr, dict):
            raise _bad(path, n, "expected a JSON object: one WEKA trace")
        if "requests" not in tr:
            continue
        sid = str(tr.get("id") or f"trace{n}")
        if not isinstance(tr["requests"], list) or not tr["requests"]:
            raise _bad(path, n, f"trace {sid}: requests must be a non-empty list of calls")
        steps: list[_Step] = []
        system = (_int(path, n, tr, "system_tokens", 0) or 0) + (_int(path, n, tr, "tool_tokens", 0) or 0)
        _weka_agent(path, n, sid, "main", tr["requests"], None, system, False, steps, out, 0)
        out.sessions[sid] = steps
    return out


def _weka_agent(path: str, n: int, sid: str, agent: str, reqs: list, spawned_by: str | None,
                system: int, background: bool, steps: list[_Step], out: _Read, depth: int) -> None:
    if depth > MAX_AGENT_DEPTH:
        raise _bad(path, n, f"trace {sid}: sub-agents nested over {MAX_AGENT_DEPTH} levels deep "
                            f"(at {agent}); llmbench replays at most {MAX_AGENT_DEPTH}: cut the "
                            "trace there")
    if len(reqs) > MAX_AGENT_STEPS:
        raise _bad(path, n, f"trace {sid}: {agent} has {len(reqs):,} calls, over the "
                            f"{MAX_AGENT_STEPS:,} an agent may make; split the trace")
    prev: _Step | None = None
    pending_subs: list[tuple[int, dict]] = []
    for i, r in enumerate(reqs):
        where = f"{n} (trace {sid}, {agent} call {i + 1})"
        if not isinstance(r, dict):
            raise _bad(path, where, "expected a JSON object")
        kind = r.get("type")
        if kind == "subagent":
            pending_subs.append((i, r))
            continue
        if kind not in ("n", "s", None):
            raise _bad(path, where, f"type {kind!r}: expected n, s or subagent")
        inp = _int(path, where, r, "in", None)
        outp = _int(path, where, r, "out", None)
        if not inp and not outp:
            raise _bad(path, where, "a call with no tokens (in and out are 0 or missing)")
        think = _secs(path, where, r, "think_time")
        st = _Step(sid, f"{agent}:{i}" if agent != "main" else str(i), n,
                   prev.id if prev is not None else spawned_by, agent, max(outp or 0, 1),
                   input=inp or 0, t=_secs(path, where, r, "t", capped=False),
                   dur=_secs(path, where, r, "api_time"),
                   gap=think if prev is not None else None,
                   system=system if prev is None else 0,
                   background=background if prev is None else False)
        if not outp:
            out.warnings.append(f"{path}: trace {sid}: a call with out 0 asks for 1 token")
        steps.append(st)
        # sub-agents between the previous call and this one start after the previous call
        for j, sub in pending_subs:
            _weka_sub(path, n, sid, agent, j, sub, prev, steps, out, depth)
        pending_subs = []
        prev = st
    for j, sub in pending_subs:                   # after the agent's last call
        _weka_sub(path, n, sid, agent, j, sub, prev, steps, out, depth)


def _weka_sub(path: str, n: int, sid: str, agent: str, j: int, sub: dict, prev: _Step | None,
              steps: list[_Step], out: _Read, depth: int) -> None:
    where = f"{n} (trace {sid}, {agent} call {j + 1})"
    if prev is None:
        out.warnings.append(f"{path}: trace {sid}: a sub-agent before its parent's first call "
                            "was left out (nothing started it)")
        return
    reqs = sub.get("requests")
    if not isinstance(reqs, list) or not reqs:
        raise _bad(path, where, "a subagent marker needs its requests (a non-empty list)")
    name = str(sub.get("agent_id") or f"{agent}.sub{j}")
    system = (_int(path, where, sub, "system_tokens", 0) or 0) + (_int(path, where, sub, "tool_tokens", 0) or 0)
    _weka_agent(path, n, sid, name, reqs, prev.id, system,
                str(sub.get("status") or "") == "async_launched", steps, out, depth + 1)


def _weka_rows(path: str, rows: list[tuple[int, Any]], out: _Read) -> None:
    """GuideLLM's flattened WEKA rows: one call a line, grouped by id, in time order."""
    by: dict[str, list[tuple[float, int, dict]]] = {}
    for n, r in rows:
        for k in ("id", "input_length", "output_length"):
            if k not in r:
                raise _bad(path, n, f"a WEKA row needs {k} (id, timestamp, input_length, "
                                    "output_length)")
        if not r.get("input_length") and not r.get("output_length"):
            raise _bad(path, n, "a call with no tokens (input_length and output_length are 0)")
        by.setdefault(str(r["id"]), []).append(
            (_secs(path, n, r, "timestamp", capped=False) or 0.0, n, r))
    for sid, items in by.items():
        items.sort(key=lambda x: (x[0], x[1]))
        steps, prev = [], None
        for i, (t, n, r) in enumerate(items):
            inp = _int(path, n, r, "input_length") or 0
            outp = _int(path, n, r, "output_length") or 0
            st = _Step(sid, str(i), n, prev.id if prev else None, "main", max(outp, 1),
                       input=inp, t=t)
            steps.append(st)
            prev = st
        out.sessions[sid] = steps


# -- OTel GenAI ----------------------------------------------------------------------------------
def _otlp_value(v: Any) -> Any:
    if not isinstance(v, dict):
        return v
    for k in ("stringValue", "intValue", "doubleValue", "boolValue"):
        if k in v:
            x = v[k]
            return int(x) if k == "intValue" and isinstance(x, str) and x.lstrip("-").isdigit() else x
    if "arrayValue" in v:
        return [_otlp_value(x) for x in (v["arrayValue"].get("values") or [])]
    return None


def _attrs(span: dict) -> dict[str, Any]:
    a = span.get("attributes")
    if isinstance(a, list):                   # OTLP: [{key, value: {stringValue: ...}}]
        return {x.get("key"): _otlp_value(x.get("value")) for x in a if isinstance(x, dict)}
    return a if isinstance(a, dict) else {}


def _ts(v: Any) -> float | None:
    """A span time in seconds: ISO-8601, or a number in s, ms or ns."""
    if v is None:
        return None
    if isinstance(v, str):
        if v.isdigit():
            v = int(v[:40])
        else:
            try:
                d = datetime.fromisoformat(v.replace("Z", "+00:00"))
            except ValueError:
                return None
            return (d if d.tzinfo else d.replace(tzinfo=timezone.utc)).timestamp()
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        try:
            x = float(v)
        except OverflowError:                 # an integer of hundreds of digits
            return math.inf
        return x / 1e9 if x >= 1e16 else x / 1e3 if x >= 1e11 else x
    return None


def _field(span: dict, *names: str) -> Any:
    for k in names:
        if k in span and span[k] not in (None, ""):
            return span[k]
    ctx = span.get("context")
    if isinstance(ctx, dict):
        for k in names:
            if ctx.get(k):
                return ctx[k]
    return None


def _spans(path: str) -> list[tuple[int, dict]]:
    out: list[tuple[int, dict]] = []
    for n, obj in _records(path):
        items = obj if isinstance(obj, list) else [obj]
        for x in items:
            if not isinstance(x, dict):
                raise _bad(path, n, "expected a JSON object: a span, a session of spans or an "
                                    "OTLP export")
            if "resourceSpans" in x:
                for rs in _list(path, n, x, "resourceSpans"):
                    scopes = (_list(path, n, rs, "scopeSpans")
                              or _list(path, n, rs, "instrumentationLibrarySpans"))
                    for ss in scopes:
                        out += [(n, s) for s in _list(path, n, ss, "spans") if isinstance(s, dict)]
            elif isinstance(x.get("spans"), list):
                tid = x.get("trace_id") or x.get("session_id")
                out += [(n, {**s, **({"trace_id": tid} if tid and not _field(s, "trace_id", "traceId") else {})})
                        for s in x["spans"] if isinstance(s, dict)]
            else:
                out.append((n, x))
    return out


def _list(path: str, n: int, obj: Any, key: str) -> list:
    """An OTLP export's list under ``key`` (missing: empty); a value of another type is one line."""
    v = obj.get(key) if isinstance(obj, dict) else None
    if v is None:
        return []
    if not isinstance(v, list):
        raise _bad(path, n, f"{key} is a {type(v).__name__}; an OTLP JSON export holds a list "
                            "there (resourceSpans > scopeSpans > spans)")
    return v


def _when(path: str, n: int, s: dict, *names: str) -> float | None:
    """A span's start or end in seconds; a time that is no finite number is one line."""
    v = _field(s, *names)
    t = _ts(v)
    if t is not None and not math.isfinite(t):
        raise _bad(path, n, f"span {_field(s, 'span_id', 'spanId') or '?'}: {names[0]} "
                            f"{_show(v)}: expected a time (ISO-8601, or a number of s, ms or ns)")
    return t


def read_otel(path: str) -> _Read:
    out = _Read()
    spans = _spans(path)
    by_id: dict[str, tuple[int, dict]] = {}
    for n, s in spans:
        sid = _field(s, "span_id", "spanId", "id")
        if sid is not None:
            by_id[str(sid)] = (n, s)
    _no_cycle(path, spans, by_id)
    for key, items in _llm_calls(path, spans).items():
        out.sessions[key] = _otel_steps(path, key, items, by_id)
    return out


def _parent_of(s: dict) -> str | None:
    p = _field(s, "parent_span_id", "parentSpanId", "parent_id", "parentId")
    return None if p is None else str(p)


def _no_cycle(path: str, spans: list[tuple[int, dict]],
              by_id: dict[str, tuple[int, dict]]) -> None:
    """A cycle in the parent links: one line, naming a span in it."""
    for n, s in spans:
        seen, cur = set(), _field(s, "span_id", "spanId", "id")
        while cur is not None:
            cur = str(cur)
            if cur in seen:
                raise _bad(path, by_id[cur][0], f"span {cur}: its parent links form a cycle (a span "
                                                "is its own ancestor); fix parent_span_id")
            seen.add(cur)
            got = by_id.get(cur)
            cur = _parent_of(got[1]) if got else None


def _llm_calls(path: str, spans: list[tuple[int, dict]]
               ) -> dict[str, list[tuple[int, dict, dict]]]:
    """The LLM calls that did not fail, by session (the conversation id, else the trace id)."""
    sessions: dict[str, list[tuple[int, dict, dict]]] = {}
    for n, s in spans:
        a = _attrs(s)
        op = a.get("gen_ai.operation.name")
        status = s.get("status")
        code = status.get("code", status.get("status_code")) if isinstance(status, dict) else None
        if code in (2, "2", "ERROR", "STATUS_CODE_ERROR"):
            continue
        inp = a.get("gen_ai.usage.input_tokens", a.get("gen_ai.usage.prompt_tokens"))
        outp = a.get("gen_ai.usage.output_tokens", a.get("gen_ai.usage.completion_tokens"))
        if op in _NOT_LLM_OPS or not (op in _LLM_OPS or inp is not None or outp is not None):
            continue
        if not inp and not outp:
            raise _bad(path, n, f"span {_field(s, 'span_id', 'spanId') or '?'}: an LLM call with no "
                                "tokens (gen_ai.usage.input_tokens and output_tokens missing or 0)")
        key = a.get("gen_ai.conversation.id") or _field(s, "trace_id", "traceId") or "trace"
        sessions.setdefault(str(key), []).append((n, s, a))
    return sessions


def _agent_of(s: dict, by_id: dict[str, tuple[int, dict]]) -> str:
    """The span's nearest invoke_agent ancestor ("main": none)."""
    cur = _parent_of(s)
    while cur is not None and cur in by_id:
        p = by_id[cur][1]
        if _attrs(p).get("gen_ai.operation.name") == "invoke_agent":
            return cur
        cur = _parent_of(p)
    return "main"


def _agent_parent(agent: str, by_id: dict[str, tuple[int, dict]]) -> str:
    if agent == "main" or agent not in by_id:
        return "main"
    return _agent_of(by_id[agent][1], by_id)


def _otel_steps(path: str, key: str, items: list[tuple[int, dict, dict]],
                by_id: dict[str, tuple[int, dict]]) -> list[_Step]:
    """One session's calls as steps, in time order: each after its agent's previous call,
    a sub-agent's first after its parent agent's call that ended last before it."""
    rows = []
    for n, s, a in items:
        start = _when(path, n, s, "start_time", "startTimeUnixNano", "startTime",
                      "timestamp")
        end = _when(path, n, s, "end_time", "endTimeUnixNano", "endTime")
        rows.append((start if start is not None else 0.0, end, n, s, a, _agent_of(s, by_id)))
    rows.sort(key=lambda r: (r[0], r[2]))
    agents = list(dict.fromkeys(r[5] for r in rows))
    root = agents[0]
    steps: list[_Step] = []
    last: dict[str, _Step] = {}
    ends: dict[str, float] = {}
    for i, (start, end, n, s, a, ag) in enumerate(rows):
        inp = _usage(path, n, a, "gen_ai.usage.input_tokens", "gen_ai.usage.prompt_tokens")
        outp = _usage(path, n, a, "gen_ai.usage.output_tokens",
                      "gen_ai.usage.completion_tokens")
        name = "main" if ag == root else ag
        prev = last.get(name)
        parent = prev.id if prev is not None else None
        if prev is None and name != "main":
            up = _agent_parent(ag, by_id)
            up = "main" if up == root else up
            cands = [x for x in steps if x.agent == up and (ends.get(x.id) or x.t or 0) <= start]
            parent = cands[-1].id if cands else (last.get("main").id if last.get("main") else None)
            if parent is None:
                continue
        gap = None
        if prev is not None:
            e = ends.get(prev.id)
            gap = max(start - e, 0.0) if e is not None else None
        st = _Step(key, str(i), n, parent, name, max(outp, 1), input=inp, t=start,
                   dur=(end - start) if end is not None else None, gap=gap,
                   system=_system_tokens(a) if prev is None else 0)
        if end is not None:
            ends[st.id] = end
        steps.append(st)
        last[name] = st
    return steps


def _usage(path: str, n: int, a: dict, key: str, alias: str) -> int:
    """A span's token count (``key``, or its older name): a bounded whole number, else one line."""
    v = a.get(key, a.get(alias))
    return 0 if v is None or v == "" else _tokens(path, n, key, v)


def _system_tokens(a: dict) -> int:
    """The system prompt's size, estimated from the recorded system messages (4 characters a
    token): OTel records tokens for the whole prompt only."""
    text = a.get("gen_ai.system_instructions")
    chars = len(json.dumps(text)) if text else 0
    msgs = a.get("gen_ai.input.messages")
    if isinstance(msgs, str):
        try:
            msgs = json.loads(msgs)
        except ValueError:
            msgs = None
    for m in msgs if isinstance(msgs, list) else ():
        if isinstance(m, dict) and m.get("role") == "system":
            c = m.get("content") if "content" in m else m.get("parts")
            chars += len(c) if isinstance(c, str) else len(json.dumps(c))
    return min(chars // 4, MAX_AGENT_TOKENS)


# -- into plans -----------------------------------------------------------------------------------
def _plans(path: str, read: _Read) -> list[tuple[str, AgentPlan, list[str]]]:
    """Each session's main AgentPlan (sub-agents spawned where they start), checked: one first
    call, parents in the session, no cycle, one chain per agent."""
    out = []
    for sid, steps in read.sessions.items():
        if not steps:
            continue
        by = {}
        for st in steps:
            if st.id in by:
                raise _bad(path, st.line, f"session {sid}: step {st.id} appears twice; step ids are "
                                          "unique within a session")
            by[st.id] = st
        for st in steps:
            if st.parent is not None and st.parent not in by:
                raise _bad(path, st.line, f"session {sid}: step {st.id}'s parent {st.parent} is not "
                                          "in the session")
        acyclic: set[str] = set()             # steps whose ancestors end at the first call
        for st in steps:                      # a cycle: follow the parents
            seen: dict[str, None] = {}
            cur: _Step | None = st
            while cur is not None and cur.id not in acyclic:
                if cur.id in seen:
                    raise _bad(path, cur.line, f"session {sid}: the parent links of step {cur.id} "
                                               "form a cycle (a step is its own ancestor); each "
                                               "step's parent is an earlier one")
                seen[cur.id] = None
                cur = by[cur.parent] if cur.parent is not None else None
            acyclic.update(seen)
        roots = [st for st in steps if st.parent is None]
        if len(roots) != 1:
            raise _bad(path, (roots[1] if len(roots) > 1 else steps[0]).line,
                       f"session {sid}: {len(roots)} steps have no parent; exactly one (the "
                       "session's first call) has none")
        children: dict[str | None, list[_Step]] = {}
        for st in steps:
            children.setdefault(st.parent, []).append(st)
        notes: list[str] = []
        plan = _agent_plan(path, sid, roots[0], by, children, notes, 0)
        out.append((sid, plan, notes))
    return out


def _agent_plan(path: str, sid: str, first: _Step, by: dict[str, _Step],
                children: dict[str | None, list[_Step]], notes: list[str],
                depth: int) -> AgentPlan:
    # the recursion below is one level per sub-agent level: bounded here, not by Python's stack
    if depth > MAX_AGENT_DEPTH:
        raise _bad(path, first.line, f"session {sid}: sub-agents nested over {MAX_AGENT_DEPTH} "
                                     f"levels deep (at step {first.id}); llmbench replays at most "
                                     f"{MAX_AGENT_DEPTH}: cut the trace there")
    chain = [first]
    while True:
        nxt = [c for c in children.get(chain[-1].id, ()) if c.agent == chain[-1].agent]
        if len(nxt) > 1:
            raise _bad(path, nxt[1].line, f"session {sid}: steps {nxt[0].id} and {nxt[1].id} both "
                                          f"follow step {chain[-1].id} in agent {first.agent}; an "
                                          "agent is one chain of calls (a sub-agent takes its own "
                                          "agent name)")
        if not nxt:
            break
        chain.append(nxt[0])
        if len(chain) > MAX_AGENT_STEPS:
            raise _bad(path, nxt[0].line, f"session {sid}: agent {first.agent} makes over "
                                          f"{MAX_AGENT_STEPS:,} calls; split the session")
    plans: list[StepPlan] = []
    system = first.system
    prev: _Step | None = None
    for st in chain:
        if st.new is not None:
            new = st.new
        elif st.input is not None:
            base = (prev.input or 0) + prev.output if prev is not None else system
            new = st.input - base
            if new < 0:
                if prev is not None:
                    notes.append("shrank")      # the trace's context was compacted here
                new = 0 if prev is not None else st.input
        else:
            new = 0
        if prev is None:
            new = max(new, 1)                   # a task of at least one token
        # the gap recorded (on a first call: a sub-agent that starts late), else the one its
        # start time and the previous call's end make
        gap = st.gap if st.gap is not None else 0.0
        if prev is not None and st.gap is None and st.t is not None and prev.t is not None:
            gap = st.t - (prev.t + (prev.dur or 0.0))
            if gap < 0:
                if prev.dur is not None:
                    raise _bad(path, st.line, f"session {sid}: step {st.id} starts "
                                              f"{-gap:.3g} s before step {prev.id} ended: a "
                                              "negative tool gap; fix t or duration_s")
                gap = 0.0
            if prev.dur is None:
                notes.append("gaps")            # they include the recorded server's own time
        if gap > MAX_GAP_S:
            raise _bad(path, st.line, f"session {sid}: step {st.id} waits {gap:.3g} s after step "
                                      f"{prev.id if prev else st.parent}: over 30 days, the "
                                      "longest llmbench replays; fix its times")
        if new > MAX_AGENT_TOKENS:
            raise _bad(path, st.line, f"session {sid}: step {st.id} appends {new:,} tokens, over "
                                      f"{MAX_AGENT_TOKENS:,}; fix its token counts")
        subs = tuple(_agent_plan(path, sid, c, by, children, notes, depth + 1)
                     for c in children.get(st.id, ()) if c.agent != st.agent)
        plans.append(StepPlan(f"{st.id}", new, st.output, gap, subs))
        prev = st
    return AgentPlan(first.agent, "", system, tuple(plans), background=first.background)


def _with_systems(plan: AgentPlan, texts: dict[int, str]) -> AgentPlan:
    steps = tuple(StepPlan(s.id, s.new_tokens, s.reply_tokens, s.gap_s,
                           tuple(_with_systems(c, texts) for c in s.spawn)) for s in plan.steps)
    return AgentPlan(plan.name, texts.get(plan.system_tokens, ""), plan.system_tokens, steps,
                     plan.background)


def read_sessions(path: str, tok: Any, seed: int, fmt: str | None = None, limit: int | None = None,
                  tools: Any = None, reserve: int = 0) -> tuple[list[AgentSession], list[str], str]:
    """(sessions, warnings, the format read) from an agent trace file."""
    from llmbench.workload.synthetic import prepare_unit_words, text_of_tokens
    check_regular_file(path)      # a device or a pipe reads for ever (as a chat dataset's)
    kind = fmt or detect(path)
    if kind not in FORMATS:
        raise DatasetError(f"--dataset-format {kind!r}: for agent sessions choose "
                           + ", ".join(FORMATS))
    read = {"agent": read_agent, "weka": read_weka, "otel": read_otel}[kind](path)
    plans = _plans(path, read)
    if not plans:
        raise DatasetError(f"--dataset {path}: no session with a model call in it")
    if limit:
        plans = plans[:limit]
    prepare_unit_words(tok)
    sizes = sorted({a.system_tokens for _, p, _ in plans for a in p.walk() if a.system_tokens})
    # one system prompt per size: agents of one size are taken for the same agent product
    texts = {n: text_of_tokens(tok, random.Random(seed * 7 + n), n, f"You are agent {n}.",
                               reserve) for n in sizes}
    tools = tuple(tools) if tools else synthetic_tools(4)
    vocab = vocabulary(tok)
    sessions = [session_of(sid, _with_systems(p, texts), tools, vocab, seed)
                for sid, p, _ in plans]
    warnings = list(dict.fromkeys(read.warnings))
    shrank = sum(n.count("shrank") for _, _, notes in plans for n in notes)
    if shrank:
        warnings.append(f"{path}: {shrank} call(s) had a smaller prompt than the call before (the "
                        "trace's context was compacted); replayed with the history kept")
    if any("gaps" in notes for _, _, notes in plans):
        warnings.append(f"{path}: tool gaps taken from start times without durations: they "
                        "include the recorded server's own time")
    return sessions, warnings, kind

"""The agent loop: one agent session (workload.agents.AgentSession) played against a server.

An agent reads each call's whole reply, waits its tool's gap, appends the model's real reply
and the tool's result to its history and calls again (docs/agents.md), so its context grows
and its prefix repeats: what a server's KV cache holds or loses. Sub-agents run beside their
parent's tool, and its next call waits for them unless they run in the background. The tools
go in every request in the API's shape (wire.agents.request_fields).

A server that answers a call step in text rather than with a tool call still moves the session
on (the text goes into the history, the tool result follows as a user message); the record
shows it (step_kind "call" with no tool call). With ``--tool-choice required`` the final
answer is asked with ``tool_choice`` none, so that its length is the one asked.

Each request's record carries its session and step (Record.session_id ...), so the sessions
are rebuilt from records alone (analysis.sessions), in memory or from requests.jsonl.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import TYPE_CHECKING, Any, Sequence

from llmbench.load.eventloop import sleep_or_stop
from llmbench.wire.agents import ReplyText, request_fields, tool_calls_of
from llmbench.workload.agents import AgentPlan, AgentSession
from llmbench.workload.model import Turn

if TYPE_CHECKING:
    from llmbench.load.session import Session

# the shapes' request budget (load.shapes.user.Budget: take() -> bool), not imported: the
# shapes import this module
Budget = Any

perf_counter = time.perf_counter


class _Stop(Exception):
    """The run is stopping, or the budget is spent: the session ends here, cut short."""


def _fields(session: Session, conv: AgentSession) -> tuple[dict[str, Any], dict[str, Any]]:
    """(fields of a call step, fields of the final answer) for this session's API: its tools,
    unless the run sends tools of its own in every body (--tools FILE)."""
    params = session.client.params
    api = getattr(session.client.target, "api", "openai-chat")
    extra = params.extra_body or {}
    own = "tools" in extra
    choice = extra.get("tool_choice")
    if own:
        call: dict[str, Any] = {}
    else:
        call = request_fields(api, list(conv.tools), None, None)
    final = dict(call)
    if choice in ("required", "any", {"type": "any"}):
        # the answer is text of the asked length, not one more call
        final.update(request_fields(api, list(conv.tools), "none", None)
                     if not own else _choice_none(api))
    return call, final


def _choice_none(api: str) -> dict[str, Any]:
    return {"tool_choice": {"type": "none"}} if api == "anthropic" else {"tool_choice": "none"}


async def play_agent(session: Session, conv: AgentSession, budget: Budget | None, *,
                     user: int | None, scheduled: float, warmup: bool = False,
                     sem: asyncio.Semaphore | None = None, stop: asyncio.Event | None = None,
                     start_step: int = 0, history: Sequence[str] | None = None) -> bool:
    """Play one session; False when a call failed or the run stopped (cut short).

    ``start_step`` > 0: the session is joined mid-way (``--join spread``, the draw of
    load.shapes.user.mid_conversation): its main agent's earlier calls are history only, each
    reply the synthetic text in ``history`` (``_past_reply``), each tool result the one it
    would have had; the first request goes at once and carries all of it. The sub-agents
    those earlier calls started ran before the user came in and are not played; every call
    from ``start_step`` on fans out as its plan says."""
    assert conv.plan is not None
    stop = stop or session.stopping
    run = _SessionRun(session, conv, session.new_agent_session(), user, budget, warmup, sem, stop)
    session.agents_open[run.sid] = (session.step, perf_counter())
    try:
        return await run.agent(conv.plan, None, scheduled, start=start_step,
                               history=list(history or ()))
    except _Stop:
        return False
    finally:
        session.agents_open.pop(run.sid, None)


class _SessionRun:
    def __init__(self, session: Session, conv: AgentSession, sid: str, user: int | None,
                 budget: Budget | None, warmup: bool, sem: asyncio.Semaphore | None,
                 stop: asyncio.Event) -> None:
        self.session, self.conv, self.sid, self.user = session, conv, sid, user
        self.budget, self.warmup, self.sem, self.stop = budget, warmup, sem, stop
        self.call_fields, self.final_fields = _fields(session, conv)
        salt = session.salt
        self.salt_tokens = salt.tokens if salt else 0

    def _stopping(self) -> bool:
        return self.stop.is_set() or self.session.stopping.is_set()

    async def _tool_gap(self, gap_s: float) -> tuple[bool, bool]:
        """Wait a tool gap: (not stopped meanwhile, the run's --duration deadline cut it). A
        session under way stops at the deadline. The cut is decided before the wait, and the
        wait ends past the deadline: uvloop's timers are of a millisecond, and the user must
        not start another session in the instant before it."""
        dl = getattr(self.budget, "deadline", None) or getattr(self.budget, "sessions_end", None)
        left = None if dl is None else max(dl - perf_counter(), 0.0)
        if left is None or gap_s < left:
            return await sleep_or_stop(self.stop, gap_s), False
        if not await sleep_or_stop(self.stop, left):
            return False, True
        while perf_counter() < dl:
            await asyncio.sleep(dl - perf_counter() + 1e-3)
        return True, True

    async def agent(self, plan: AgentPlan, parent: str | None, scheduled: float,
                    main: bool = True, start: int = 0, history: Sequence[str] = ()) -> bool:
        """One agent's calls in order; sub-agents started as its replies say, joined before
        its next call (and all before it returns). False: a call failed (the session stops
        here, after the sub-agents already running finished: nothing measured is lost)."""
        conv = self.conv
        msgs: list[dict[str, Any]] = []
        if plan.system:
            msgs.append({"role": "system", "content": plan.system})
        # the client's count of the prompt (the server's usage replaces it when it reports
        # one); the session adds the salt's tokens to a first call's count itself
        context = plan.system_tokens
        children: list[asyncio.Task[bool]] = []
        joined: list[asyncio.Task[bool]] = []
        prev = parent
        waited_ms: float | None = None
        last_reply = ""
        ok = True
        try:
            start = min(max(start, 0), len(plan.steps) - 1)
            for i, st in enumerate(plan.steps):
                last = i == len(plan.steps) - 1
                if i < start or (i == start and i > 0):
                    # joined mid-way: the calls before ``start`` are history the server never
                    # served (no request, no sub-agent); the first sent has no tool gap
                    if i == 0:
                        msgs.append({"role": "user", "content": conv.task_text(plan)})
                    else:
                        self._results(msgs, plan, st, last_reply)
                    context += st.new_tokens
                    if i < start:
                        last_reply = self._past_reply(st, history[i] if i < len(history) else "")
                        context += st.reply_tokens
                        prev = st.id
                        continue
                    waited_ms = None
                elif i == 0:
                    # a sub-agent that starts late waits its gap (cut at the deadline too)
                    waited, cut = await self._tool_gap(st.gap_s) if st.gap_s > 0 else (True, False)
                    if not waited or cut:
                        raise _Stop
                    msgs.append({"role": "user", "content": conv.task_text(plan)})
                    context += st.new_tokens
                else:
                    t0 = perf_counter()
                    # the tool runs (its gap) while the sub-agents its call started run; the
                    # next call waits for both
                    waits: list[Any] = [self._tool_gap(st.gap_s)] + joined
                    got = await asyncio.gather(*waits)
                    joined = []
                    if not got[0][0] or got[0][1] or self._stopping():
                        raise _Stop
                    if not all(got[1:]):
                        ok = False
                        break                   # a sub-agent failed: its parent cannot go on
                    waited_ms = (perf_counter() - t0) * 1000.0
                    self._results(msgs, plan, st, last_reply)
                    context += st.new_tokens
                # --duration stops a session under way too (issue 49: a trace's tool gap of
                # days held the run open for ever): no call starts after the deadline, the one
                # in flight finishes (or --timeout-total cuts it), the session is cut short;
                # --requests counts every call
                if self._stopping() or (self.budget is not None and not self.budget.take()):
                    raise _Stop
                kind = ("final" if main else "answer") if last else "call"
                stamp = (self.sid, st.id, prev,
                         None if waited_ms is None else round(waited_ms, 3), kind)
                extra = self.final_fields if last else self.call_fields
                turn = Turn("", st.reply_tokens, context + (self.salt_tokens if i else 0))
                due = scheduled if i == start else perf_counter()
                if self.sem is not None:
                    async with self.sem:
                        rec, last_reply = await self._send(msgs, turn, due, i, extra, stamp)
                else:
                    rec, last_reply = await self._send(msgs, turn, due, i, extra, stamp)
                if not rec.ok:
                    ok = False
                    break
                context += rec.output_tokens or st.reply_tokens
                prev = st.id
                loop = asyncio.get_running_loop()
                for sub in st.spawn:
                    task = loop.create_task(self.agent(sub, st.id, perf_counter(), main=False))
                    children.append(task)
                    if not sub.background:
                        joined.append(task)
        except asyncio.CancelledError:
            # the run is being torn down: the sub-agents go with their parent
            for c in children:
                c.cancel()
            raise
        finally:
            if children:
                # every sub-agent already running finishes (or stops with the run): its
                # requests are measured and logged whatever happened to its parent
                done = await asyncio.gather(*children, return_exceptions=True)
                ok = ok and all(d is True for d in done)
        return ok

    async def _send(self, msgs: list[dict[str, Any]], turn: Turn, due: float, index: int,
                    extra: dict[str, Any], stamp: tuple) -> tuple[Any, str]:
        return await self.session.request(msgs, turn, scheduled=due, user=self.user,
                                          conversation=self.conv.id, turn_index=index,
                                          warmup=self.warmup, extra=extra or None, agent=stamp,
                                          lap=self.conv.lap)

    def _past_reply(self, step: Any, text: str) -> str:
        """A call's reply the server never gave (a session joined mid-way): ``text`` as a
        call of the session's first tool (its first parameter holding the text, so the reply
        carries about the asked tokens), or as text when the run sends tools of its own."""
        tools = self.conv.tools
        if not tools or not self.call_fields:
            return text
        fn = tools[0].get("function", {})
        params = (fn.get("parameters") or {}).get("properties") or {}
        arg = next(iter(params), "input")
        call = {"id": f"call_{self.sid}_{step.id}", "type": "function",
                "function": {"name": fn.get("name", "tool"),
                             "arguments": json.dumps({arg: text})}}
        return ReplyText("", [call])

    def _results(self, msgs: list[dict[str, Any]], plan: AgentPlan, step: Any, reply: str) -> None:
        """The model's reply as it came (its tool calls, or its text when it called none),
        then the tool's result (``step``'s new tokens), split over the calls it made."""
        calls = tool_calls_of(reply)
        text = self.conv.result_text(plan, step)
        if calls:
            msgs.append({"role": "assistant", "content": str(reply) or None, "tool_calls": calls})
            parts = _split(text, len(calls))
            for c, part in zip(calls, parts):
                msgs.append({"role": "tool", "tool_call_id": c["id"], "content": part})
        else:
            msgs.append({"role": "assistant", "content": str(reply)})
            msgs.append({"role": "user", "content": text})


def _split(text: str, n: int) -> list[str]:
    """``text`` in ``n`` parts of about as many words (one per tool call answered)."""
    if n <= 1:
        return [text]
    words = text.split(" ")
    k = max(len(words) // n, 1)
    parts = [" ".join(words[i * k:(i + 1) * k]) for i in range(n - 1)]
    parts.append(" ".join(words[(n - 1) * k:]))
    return [p or "ok" for p in parts]

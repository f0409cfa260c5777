"""``llmbench chat``: one user, a few turns of a real conversation, before any load. Each turn
is one request of the same client every command uses, into one Record; what is printed comes
from the records (TTFT, decode rate, the server's prompt and cached token counts) and the
reply's first words. Exit 1 when the server cannot stream a chat (an error, an HTML page, a
reply sent whole), with one line saying which."""

from __future__ import annotations

import asyncio
import textwrap
from dataclasses import dataclass, field
from time import perf_counter
from typing import TYPE_CHECKING, Any, Callable

from llmbench.records.record import Record, clean

# one person planning a trip: each turn leans on the ones before, as a real chat does
SCRIPT = (
    "Hi! I am planning three days in Lisbon next spring. What should I not miss?",
    "Thanks. Which of those would you do on the first day, and in what order?",
    "And where should I eat that evening, near the last place you named?",
    "If it rains on the second day, what would you change?",
    "Please sum up the whole plan in five short lines.",
)


@dataclass
class ChatPlan:
    """`llmbench chat`: the target and what each message asks for."""
    target: Any                     # client.target.Target
    params: Any                     # client.request.RequestParams
    timeouts: Any                   # client.request.Timeouts
    turns: int
    max_tokens: int


@dataclass
class ChatResult:
    """What `llmbench chat` got back: the records, the replies, the problem if any."""
    records: list[Record] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    problem: str | None = None      # why the server failed the check (None: it passed)


def turn_line(i: int, rec: Record, reply: str) -> list[str]:
    """What one turn prints (80 columns): its figures, then the reply's first words."""
    if not rec.ok:
        return [f"turn {i}: failed ({rec.error_kind}: {(rec.error or '')[:50]})"]
    ttft = rec.ttft or 0.0
    tpot = rec.tpot
    rate = f"{1.0 / tpot:.1f} tokens/s" if tpot else "one token: no rate"
    cached = ("cache not reported" if rec.cached_tokens is None
              else f"{rec.cached_tokens} cached")
    prompt = f"prompt {rec.prompt_tokens} tokens" if rec.prompt_tokens is not None else "prompt ?"
    head = (f"turn {i}: TTFT {ttft * 1000:.0f} ms, {rate}, {prompt} ({cached}), "
            f"{rec.output_tokens} out")
    words = " ".join(reply.split())
    shown = textwrap.shorten(words, width=70, placeholder=" ...") if words else "(no text)"
    return [head, f'  "{shown}"']


def problem_of(rec: Record, stream: bool) -> str | None:
    """Why this turn shows the server cannot be chatted with as llmbench measures it."""
    if rec.error_kind == "malformed_event" and "html" in (rec.error or "").lower()[:300]:
        return "it answered an HTML page, not an LLM API: check --url (the API is often at /v1)"
    if rec.error_kind == "malformed_event":
        return f"its reply is not an LLM API's stream ({(rec.error or '')[:80]})"
    if not rec.ok:
        return f"the request failed ({rec.error_kind}: {(rec.error or '')[:80]})"
    if stream and not rec.stream:
        return "it sent the reply whole although a stream was asked for: it cannot stream"
    return None


async def converse(plan: ChatPlan, say: Callable[[str], None]) -> ChatResult:
    from llmbench.client.request import Client
    out = ChatResult()
    # a new session name each time, first: the first turn's prompt is new to the server's
    # cache (another chat's would be found there), so what later turns find is this history
    import secrets
    messages: list[dict[str, str]] = [{"role": "system", "content": (
        f"You are a friendly travel guide (session {secrets.token_hex(4)}). Answer briefly.")}]
    async with Client(plan.target, plan.params, plan.timeouts) as client:
        for i in range(plan.turns):
            messages.append({"role": "user", "content": SCRIPT[i % len(SCRIPT)]})
            rec = Record(f"chat-{i + 1}", scheduled=perf_counter(), user=0,
                         conversation="chat-0", turn=i)
            text = await client.send(messages, plan.max_tokens, rec)
            clean(rec, plan.target.secrets())
            out.records.append(rec)
            reply = plan.target.redact(str(text)) or ""
            out.replies.append(reply)
            for line in turn_line(i + 1, rec, reply):
                say(line)
            out.problem = problem_of(rec, plan.params.stream)
            if out.problem:
                break
            messages.append({"role": "assistant", "content": str(text)})
    return out


def summary(result: ChatResult) -> str:
    """The closing line: what the turns after the first found in the server's cache."""
    later = result.records[1:]
    if not later:
        return "one turn: no later turn to find its history in the server's cache"
    cached = [r.cached_tokens for r in later]
    if all(c is None for c in cached):
        return ("the server reports no cached prompt tokens, so whether later turns reused "
                "the history cannot be seen")
    hits = [c for c in cached if c]
    if not hits:
        return ("later turns found none of their history in the server's cache: each "
                "prefilled the whole conversation again")
    return (f"turns 2-{len(result.records)} found {', '.join(str(c or 0) for c in cached)} "
            "prompt tokens in the server's cache: their history")


def perform(plan: ChatPlan, say: Callable[[str], None],
            fail: Callable[[str], None]) -> tuple[int, ChatResult]:
    """The conversation, printed with ``say``; the one line of a failed check with ``fail``;
    (exit code, result)."""
    result = asyncio.run(converse(plan, say))
    if result.problem:
        fail(f"error: {plan.target.shown(plan.target.endpoint)}: {result.problem}")
        return 1, result
    say(summary(result))
    return 0, result


if TYPE_CHECKING:
    from llmbench.specs.chat import ChatSpec


def perform_spec(opts: ChatSpec, say: Any, fail: Any) -> int:
    """A chat with the server (no --url: one on this machine, else the mock); the exit code."""
    from llmbench.commands.local import one_server
    with one_server(opts, "an embeddings API has no conversation; chat with a chat "
                    "API") as (spec, tgt, params, timeouts):
        say(f"chat with {tgt.model} at {tgt.shown(tgt.endpoint)}")
        code, _ = perform(ChatPlan(tgt, params, timeouts, spec.replies, spec.reply_tokens),
                          say, fail)
        return code

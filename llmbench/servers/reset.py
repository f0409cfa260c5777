"""Empty the server's prompt cache before a step or a sweep's setting (``--reset-cache``), and
check that it took.

A step that finds the previous step's prompts in the server's prefix cache is faster than the
same load on a fresh server: a repeated benchmark against a warm vLLM cache read up to 86 %
more throughput. So each server's own reset is called (``HOW``; llama.cpp's for each slot).
A 2xx is not proof (vLLM answers 200 with ``{"success": false}`` when it could not reset), so
every reset is checked the one way that works on every server that counts cached tokens: a
probe prompt of the reset's own is sent twice before it (the second time the server says how
much of it was cached) and once after; a reset that took leaves (almost) none of it cached. A
server with no reset, a reset that failed or did not take, or one that cannot be checked is said
in one line, and every attempt is kept (``outcomes``: run.json's ``cache_resets``).
"""

from __future__ import annotations

import json
import secrets
from dataclasses import asdict, dataclass
from time import perf_counter
from typing import Any, Callable

from llmbench.servers.refusal import said as _said

MODES = ("between-steps", "between-settings", "off")
# after a reset that took, a probe's prompt is at most this share cached (a BOS token, a
# server's block rounding); before it, at least that much must have been cached to tell
TOOK_SHARE = 0.1
PROBE_WORDS = 160
PRIME_TRIES = 3
_WORDS = ("river", "lantern", "copper", "meadow", "violet", "harbor", "pepper", "glacier",
          "saddle", "orchid", "thunder", "marble", "falcon", "cedar", "ember", "quartz")
# how each kind of server empties its prompt cache; None: it has no reset llmbench can call
HOW = {"vllm": "POST /reset_prefix_cache", "sglang": "POST /flush_cache",
       "llama.cpp": "POST /slots/{id}?action=erase", "mock": "POST /admin/reset_cache"}
# what to change when a kind's reset is refused
FIX = {"vllm": "start vLLM with VLLM_SERVER_DEV_MODE=1 (it serves /reset_prefix_cache only "
               "then)",
       "llama.cpp": "start llama-server with --slot-save-path DIR: its slot actions, erase "
                    "among them, need one"}


def check_mode(value: str | None, flag: str = "--reset-cache") -> str | None:
    if value is None:
        return None
    if value not in MODES:
        raise ValueError(f"{flag} {value!r}: choose {', '.join(MODES)}")
    return value


@dataclass
class ResetOutcome:
    """One reset: ``when`` (before step 2, before OLLAMA_NUM_PARALLEL=4), ``how`` (the call;
    None: the server has none), ``status``: took, did_not_take, failed, unchecked or
    no_reset; the probe's cached tokens before and after, its prompt length, the line said."""

    when: str
    how: str | None
    status: str
    cached_before: int | None = None
    cached_after: int | None = None
    probe_prompt_tokens: int | None = None
    seconds: float | None = None
    text: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class CacheReset:
    """Resets one server's cache and checks it. ``say`` prints a line (the ramp's console);
    ``kind`` the server's (servers/identity.py's names), asked the server when None."""

    def __init__(self, target: Any, say: Callable[[str], None], kind: str | None = None) -> None:
        self.target = target
        self.say = say
        self.kind = kind
        self._known = kind is not None
        self.outcomes: list[ResetOutcome] = []
        self._said_none = False

    # -- the server's calls ------------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        return {k: v for k, v in self.target.request_headers().items() if k != "content-type"}

    async def _call(self, session: Any, method: str, path: str) -> tuple[int, str]:
        import aiohttp
        url = self.target.server_root.rstrip("/") + path
        async with session.request(method, url, headers=self._headers(),
                                   timeout=aiohttp.ClientTimeout(total=30)) as r:
            return r.status, (await r.content.read(1 << 16)).decode("utf-8", "replace")

    async def _identify(self, session: Any) -> None:
        from llmbench.servers.local import identify_root
        ident = await identify_root(session, self.target.server_root.rstrip("/"), 5.0,
                                    self._headers())
        self.kind = ident.get("kind")
        self._known = True

    async def _reset(self, session: Any) -> tuple[bool, str]:
        """(the server said it reset, what it answered)."""
        kind = self.kind
        if kind == "llama.cpp":
            status, text = await self._call(session, "GET", "/slots")
            if status != 200:
                return False, f"GET /slots answered {status}"
            try:
                ids = [int(s["id"]) for s in json.loads(text)]
            except (ValueError, TypeError, KeyError):
                return False, "GET /slots did not list the slots"
            erased = []
            for i in ids:
                status, text = await self._call(session, "POST", f"/slots/{i}?action=erase")
                if status != 200:
                    return False, f"POST /slots/{i}?action=erase answered {status} ({_said(text)})"
                erased.append(str(i))
            return True, f"erased slot{'s' if len(ids) != 1 else ''} {', '.join(erased)}"
        path = HOW[kind].split()[1]             # type: ignore[index]
        status, text = await self._call(session, "POST", path)
        if status != 200:
            return False, f"{HOW[kind]} answered {status} ({_said(text)})"  # type: ignore[index]
        try:
            doc = json.loads(text) if text.strip() else {}
        except ValueError:
            doc = {}
        if isinstance(doc, dict) and doc.get("success") is False:
            return False, f'{HOW[kind]} answered 200 with {{"success": false}}'  # type: ignore[index]
        return True, "answered 200"

    async def _probe(self, client: Any, prompt: str, name: str) -> Any:
        from llmbench.records.record import Record
        rec = Record(name, scheduled=perf_counter())
        await client.send([{"role": "user", "content": prompt}], 1, rec, abandon=False)
        return rec

    # -- one reset -----------------------------------------------------------------------------
    async def __call__(self, when: str) -> ResetOutcome:
        """Reset the cache now and check it; the outcome is said and kept."""
        import aiohttp
        from llmbench.client.request import Client, RequestParams, Timeouts
        t0 = perf_counter()
        async with aiohttp.ClientSession(trust_env=False) as session:
            if not self._known:
                try:
                    await self._identify(session)
                except Exception:                   # noqa: BLE001 - an unknown server
                    self._known = True
            how = HOW.get(self.kind or "")
            if how is None:
                out = ResetOutcome(when, None, "no_reset", text=self._no_reset_line())
                return self._keep(out, t0, quiet=self._said_none)
            prompt = (f"Probe {secrets.token_hex(6)}: repeat these words. " + " ".join(
                _WORDS[int.from_bytes(secrets.token_bytes(1), "big") % len(_WORDS)]
                for _ in range(PROBE_WORDS)))
            params = RequestParams(stream=True)
            async with Client(self.target, params, Timeouts(10, 120, 60, 300)) as client:
                for _ in range(PRIME_TRIES):
                    # the probe twice, back to back: the second finds the first cached, unless
                    # a user's request took the slot between them (one slot, under load)
                    await self._probe(client, prompt, "reset-prime")
                    before = await self._probe(client, prompt, "reset-before")
                    n = before.prompt_tokens or 0
                    if before.cached_tokens is None or before.cached_tokens > n * TOOK_SHARE:
                        break
                try:
                    said, answer = await self._reset(session)
                except (aiohttp.ClientError, OSError, TimeoutError) as exc:
                    said, answer = False, f"{type(exc).__name__}: {exc}"[:100]
                if not said:
                    fix = FIX.get(self.kind or "")
                    out = ResetOutcome(when, how, "failed", text=(
                        f"warning: cache reset {when} failed: {answer}"
                        + (f"; {fix}" if fix else "")))
                    return self._keep(out, t0)
                after = await self._probe(client, prompt, "reset-after")
        return self._keep(self._judge(when, how, answer, before, after), t0)

    def _judge(self, when: str, how: str, answer: str, before: Any, after: Any) -> ResetOutcome:
        b, a = before.cached_tokens, after.cached_tokens
        n = after.prompt_tokens or before.prompt_tokens
        base = ResetOutcome(when, how, "unchecked", b, a, n)
        if not (before.ok and after.ok):
            bad = before if not before.ok else after
            base.text = (f"note: cache reset {when}: {how} {answer}, but its check failed "
                         f"({bad.error_kind}: {(bad.error or '')[:60]}): not known to have "
                         "taken")
            return base
        if b is None or a is None:
            base.text = (f"note: cache reset {when}: {how} {answer}; the server reports no "
                         "cached tokens, so whether it took cannot be checked")
            return base
        if b <= (n or 0) * TOOK_SHARE:
            base.text = (f"note: cache reset {when}: {how} {answer}; a repeated probe found "
                         f"only {b} of {n} tokens cached, so whether it took cannot be told")
            return base
        if a <= (n or 0) * TOOK_SHARE:
            base.status = "took"
            base.text = (f"cache reset {when}: {how} took (a probe found {a} of {n} tokens "
                         f"cached; {b} before)")
            return base
        base.status = "did_not_take"
        base.text = (f"warning: cache reset {when} did not take: {how} {answer}, but a probe "
                     f"then found {a} of {n} tokens still cached ({b} before); the step may "
                     "find earlier prompts in the cache")
        return base

    def _no_reset_line(self) -> str:
        from llmbench.servers.local import NAMES
        name = NAMES.get(self.kind or "", self.kind or "this server")
        return (f"note: {name} has no cache reset llmbench can call; later steps may find "
                "earlier prompts in its cache (each run's prompts are salted, a step's are not)")

    def _keep(self, out: ResetOutcome, t0: float, quiet: bool = False) -> ResetOutcome:
        out.seconds = round(perf_counter() - t0, 3)
        self.outcomes.append(out)
        if out.status == "no_reset":
            self._said_none = True
        if not quiet:
            self.say(out.text)
        return out

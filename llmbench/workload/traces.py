"""Production traces: parse them and build prompts of the trace's lengths.

Formats (picked from the file, not from a flag; docs/commands.md, ``--trace``, has their
fields):

- Mooncake JSONL: requests that share a hash id share that 512-token block verbatim (each
  block's text is built once per hash id), so the original's prefix-cache behaviour is
  reproduced.
- The Azure LLM inference CSV (Azure/AzurePublicDataset 2023/2024).
- Plain JSONL, lengths or ``messages`` (the last user message is the turn, a system message is
  kept); the turns of one ``session_id`` are one conversation, each sent after the previous
  reply and not before its own timestamp, with the real replies as history.
- A recording made by ``llmbench record`` (its format and how a request is sent again:
  workload/recording.py), replayed at its recorded times and each turn no sooner than its
  recorded gap after the live reply; the run's salt takes the place of as many tokens of a
  session's first message, so a prompt is as long as recorded; requests the server refused
  when recorded are left out. Turns out of order and parent links in a cycle are refused
  naming the line.

Bad input (a timestamp that is not a finite number, a line longer than files.MAX_LINE_BYTES...)
is one DatasetError naming file:line. A replay longer than MAX_REPLAY_S (30 days) at its
--trace-speed is refused by ``check_replay``, naming the line after its longest gap.
"""

from __future__ import annotations

import csv
import functools
import json
import math
import random
import re
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Iterator

from llmbench.workload.files import DatasetError, check_regular_file, json_line, read_lines, too_deep
from llmbench.workload.model import Conversation, Turn
from llmbench.workload.recording import HEADER_KEY, Replayed, messages_of, replayed, trim_start
from llmbench.workload.prefix import PrefixPlan, aligned_shared_tokens, shared_texts, warmup_conversations
from llmbench.workload.synthetic import _opening, prepare_unit_words, text_of_tokens
from llmbench.workload.tokenizer import Tokenizer

BLOCK_TOKENS = 512        # Mooncake's hash_ids: one per 512-token block
MAX_TOKENS = 2_000_000    # beyond any model's context: a bad line, not a prompt to build
MAX_REPLAY_S = 30 * 86400  # the longest replay, as options.MAX_DURATION_S for every duration


@dataclass(frozen=True)
class TraceItem:
    """One conversation of the trace: its turns and when each is due (s from the window's
    start, before --trace-speed)."""

    conv: Conversation
    due_s: tuple[float, ...]
    # a recording's think or tool time before each turn (s, before --trace-speed): the turn
    # goes no sooner than this after the previous reply ended; None: not recorded
    gaps_s: tuple[float | None, ...] = ()
    # a recording's turns as the replay sends them, in place of the text turns; () otherwise
    recorded: tuple[Replayed, ...] = ()

    @property
    def offset_s(self) -> float:
        return self.due_s[0]


@dataclass
class Trace:
    """A trace file read: its rows, format and where it came from."""
    path: str
    format: str                      # mooncake | azure | jsonl
    items: list[TraceItem]
    window_s: tuple[float, float] | None = None
    blocks: int = 0                  # distinct Mooncake blocks built
    # --prefix-hit-ratio on a trace of lengths: the plan and the shared prompts to warm first;
    # a Mooncake trace's own sharing: the hit ratio its hash_ids imply (an unbounded cache)
    prefix: dict[str, Any] | None = None
    warmup: list[Conversation] = field(default_factory=list)
    longest_gap: tuple[float, str] | None = None    # (s, file:line of the request after it)
    note: str | None = None          # said once: a recording's APIs (api_note)

    @property
    def requests(self) -> int:
        return sum(len(i.conv.turns) for i in self.items)

    @property
    def span_s(self) -> float:
        return max((d for i in self.items for d in i.due_s), default=0.0)

    def describe(self) -> dict[str, Any]:
        return {"path": self.path, "format": self.format, "requests": self.requests,
                "conversations": len(self.items), "span_s": round(self.span_s, 3),
                "window_s": list(self.window_s) if self.window_s else None,
                "shared_blocks": self.blocks,
                **({"prefix_hit": self.prefix} if self.prefix else {})}


_DUR = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")


def parse_window(text: str) -> tuple[float, float]:
    """'10m-20m' -> (600.0, 1200.0) seconds from the trace's first request; '-' ends open."""
    lo_s, sep, hi_s = text.partition("-")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}

    def one(part: str, default: float) -> float:
        if not part.strip():
            return default
        m = _DUR.match(part)
        if not m:
            raise DatasetError(f"--trace-window {text!r}: expected START-END such as 10m-20m "
                               "or 30s-90s (units ms, s, m, h)")
        return float(m.group(1)) * scale[m.group(2)]

    if not sep:
        raise DatasetError(f"--trace-window {text!r}: expected START-END such as 10m-20m")
    lo, hi = one(lo_s, 0.0), one(hi_s, float("inf"))
    if not hi > lo:
        raise DatasetError(f"--trace-window {text!r}: the end must come after the start")
    return lo, hi


def _int(v: Any, where: str, name: str, lo: int = 0, hi: int | None = None) -> int:
    if (isinstance(v, bool) or not isinstance(v, (int, float)) or v != v or v in (
            float("inf"), float("-inf")) or v != int(v) or v < lo):
        raise DatasetError(f"{where}: {name} {v!r} is not a whole number >= {lo}; fix the line")
    if hi is not None and v > hi:
        raise DatasetError(f"{where}: {name} {int(v)} is above {hi}; fix the line")
    return int(v)


@dataclass
class _Row:
    """One trace row as read: where in the file, when it starts, its lengths."""
    where: str
    t_s: float
    input_tokens: int | None
    output_tokens: int | None
    hash_ids: tuple[int, ...] | None = None
    user: str | None = None
    system: str | None = None
    session: str | None = None
    gap_s: float | None = None        # a recording's think/tool time before this turn
    turn: int | None = None           # a recording's turn number in its session
    parent: str | None = None         # a recording's parent session
    replay: Replayed | None = None    # a recording's request as the replay sends it



def _timestamp_ms(d: dict[str, Any], where: str) -> float:
    """A finite number >= 0: json reads NaN and Infinity, and a NaN due time compares false
    with every bound until the event loop cannot convert it."""
    ts = d.get("timestamp")
    if (isinstance(ts, bool) or not isinstance(ts, (int, float)) or not math.isfinite(ts)
            or ts < 0):
        raise DatasetError(f"{where}: needs \"timestamp\" in milliseconds (a finite number "
                           f">= 0, not {ts!r}); fix the line")
    return float(ts)


def _jsonl_rows(path: str) -> Iterator[_Row]:
    first = None                     # the file's first line that is not blank
    for n, line in read_lines(path):
        first = first or n
        where = f"{path}:{n}"
        try:
            d = json.loads(line)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: not JSON ({exc.msg}); one JSON object per line")
        except RecursionError:
            raise too_deep(where) from None
        if not isinstance(d, dict):
            raise DatasetError(f"{where}: expected a JSON object per line")
        if HEADER_KEY in d:
            if n != first:
                raise DatasetError(f"{where}: a recording's header line in the middle of the "
                                   "file; one recording per file")
            continue
        ts = _timestamp_ms(d, where)
        if "request" in d and "api" in d:
            status = d.get("status")
            if isinstance(status, int) and not 200 <= status < 300:
                continue          # refused as recorded (a wrong model, a bad body): not replayed
            try:
                yield recorded_row(d, where, ts)
            except RecursionError:
                raise too_deep(where) from None
            continue
        out = d.get("output_length", d.get("max_tokens"))
        row = _Row(where, ts / 1000.0, None,
                   None if out is None else _int(out, where, "output_length", 1, MAX_TOKENS))
        sid = d.get("session_id")
        row.session = None if sid is None else str(sid)
        if "messages" in d:
            msgs = d["messages"]
            if (not isinstance(msgs, list) or not msgs
                    or not all(isinstance(m, dict) and isinstance(m.get("content"), str)
                               for m in msgs)):
                raise DatasetError(f"{where}: \"messages\" must be a list of "
                                   "{\"role\": ..., \"content\": \"...\"}")
            users = [m["content"] for m in msgs if m.get("role", "user") == "user"]
            if not users:
                raise DatasetError(f"{where}: \"messages\" has no user message")
            row.user = users[-1]
            sys_msgs = [m["content"] for m in msgs if m.get("role") == "system"]
            row.system = sys_msgs[0] if sys_msgs else None
        elif "input_length" in d:
            row.input_tokens = _int(d["input_length"], where, "input_length", 1,
                                   MAX_TOKENS)
            if "hash_ids" in d:
                h = d["hash_ids"]
                if not isinstance(h, list):
                    raise DatasetError(f"{where}: \"hash_ids\" must be a list of integers")
                row.hash_ids = tuple(_int(x, where, "hash id") for x in h)
        else:
            raise DatasetError(f"{where}: needs \"input_length\" (and \"output_length\") "
                               "or \"messages\"")
        yield row


def recorded_row(d: dict[str, Any], where: str, ts_ms: float) -> _Row:
    """One recorded request as a turn: its own new messages are the turn's text, its system
    prompt the conversation's; ``replay``: what the replay sends (recording.Replayed)."""
    req, api = d["request"], d["api"]
    if not isinstance(req, dict) or not isinstance(api, str):
        raise DatasetError(f"{where}: \"request\" must be the request's JSON object and "
                           "\"api\" its API's name")
    msgs = messages_of(api, req)
    new_from = _int(d.get("new_from", 0), where, "new_from", 0, len(msgs))
    turn = _int(d.get("turn", 0), where, "turn", 0)
    sid = d.get("session_id")
    if sid is None:
        raise DatasetError(f"{where}: a recorded request needs its \"session_id\"")
    gap = d.get("after_ms")
    if gap is not None and (isinstance(gap, bool) or not isinstance(gap, (int, float))
                            or not math.isfinite(gap) or gap < 0):
        raise DatasetError(f"{where}: after_ms {gap!r} is not a time >= 0 (ms); fix the line")
    first = new_from == 0
    system = [m.text for m in msgs if m.role in ("system", "developer")] if first else []
    got_in = d.get("input_length")
    own = [m.text for m in msgs[new_from:] if m.role not in ("system", "developer")]
    out = d.get("output_length") or d.get("max_tokens")
    parent = d.get("parent_session")
    return _Row(where, ts_ms / 1000.0,
                None if got_in is None else _int(got_in, where, "input_length", 1, MAX_TOKENS),
                None if out is None else _int(out, where, "output_length", 1, MAX_TOKENS),
                user="\n".join(t for t in own if t) or ".",
                system="\n\n".join(t for t in system if t) or None, session=str(sid),
                gap_s=None if gap is None else gap / 1000.0, turn=turn,
                parent=None if parent is None else str(parent),
                replay=replayed(api, req, new_from, turn))


def api_note(rows: list[_Row]) -> str | None:
    """The run's one note on a recording's replay APIs; None when all are chat's (the default)."""
    own: dict[str, int] = {}
    other = 0
    for r in rows:
        if r.replay is None:
            continue
        if r.replay.api is None:
            other += 1
        else:
            own[r.replay.api] = own.get(r.replay.api, 0) + 1
    if not other and set(own) <= {"openai-chat"}:
        return None
    said = ", ".join(f"{n} {api}" for api, n in sorted(own.items()))
    note = ("--trace: each recorded request is replayed in the API it was recorded with, "
            f"whatever --api says ({said or 'none'})")
    if other:
        note += f"; {other} of other APIs in the run's --api, as text"
    return note


def check_sessions(rows: list[_Row], path: str) -> None:
    """A recording's session links must be a history: each session's turns 0, 1, 2 ... in time
    order, and parent links that end (no session its own ancestor)."""
    last: dict[str, _Row] = {}
    parents: dict[str, tuple[str, str]] = {}
    for r in rows:
        if r.turn is None or r.session is None:
            continue
        prev = last.get(r.session)
        want = 0 if prev is None else (prev.turn or 0) + 1
        if r.turn != want:
            raise DatasetError(f"{r.where}: session {r.session!r} turn {r.turn} comes where turn "
                               f"{want} should (turns out of order or repeated); fix the line")
        last[r.session] = r
        if r.parent is not None and r.session not in parents:
            parents[r.session] = (r.parent, r.where)
    for s, (p, where) in parents.items():
        seen = {s}
        while p in parents:
            if p in seen:
                raise DatasetError(f"{where}: parent_session links of {s!r} form a cycle "
                                   f"(through {p!r}); a session cannot be its own ancestor")
            seen.add(p)
            p = parents[p][0]


def _azure_time(text: str) -> float:
    # "2023-11-16 18:15:46.6805900": seven fractional digits, more than datetime takes
    s = text.strip()
    head, dot, frac = s.partition(".")
    if dot:
        s = head + "." + (frac[:6]).ljust(6, "0")
    return datetime.fromisoformat(s).timestamp()


def _azure_rows(path: str) -> Iterator[_Row]:
    """The CSV's rows, read by files.read_lines; a line that is not CSV is one error line."""
    at = [0]                         # the file line the reader is on

    def lines() -> Iterator[str]:
        for n, line in read_lines(path):
            at[0] = n
            yield line
    reader = csv.DictReader(lines())
    try:
        yield from _azure_checked(path, reader, at)
    except csv.Error as exc:
        raise DatasetError(f"{path}:{at[0]}: not a CSV row ({exc}); an Azure trace has "
                           "TIMESTAMP,ContextTokens,GeneratedTokens")


def _azure_checked(path: str, reader: csv.DictReader, at: list[int]) -> Iterator[_Row]:
    need = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
    missing = [c for c in need if c not in (reader.fieldnames or [])]
    if missing:
        raise DatasetError(f"{path}:1: an Azure trace CSV needs the columns "
                           f"{', '.join(need)}; missing {', '.join(missing)}")
    for rec in reader:
        where = f"{path}:{at[0]}"
        try:
            t = _azure_time(rec["TIMESTAMP"] or "")
        except ValueError:
            raise DatasetError(f"{where}: TIMESTAMP {rec['TIMESTAMP']!r} is not a date and "
                               "time like 2023-11-16 18:15:46.6805900")
        try:
            ctx, gen = int(rec["ContextTokens"] or ""), int(rec["GeneratedTokens"] or "")
        except ValueError:
            raise DatasetError(f"{where}: ContextTokens and GeneratedTokens must be whole "
                               "numbers")
        if not (1 <= ctx <= MAX_TOKENS and 0 <= gen <= MAX_TOKENS):
            raise DatasetError(f"{where}: ContextTokens must be 1-{MAX_TOKENS}, "
                               f"GeneratedTokens 0-{MAX_TOKENS}")
        yield _Row(where, t, ctx, max(gen, 1))


def _format_of(path: str) -> str:
    if path.lower().endswith(".csv"):
        return "azure"
    for n, line in read_lines(path):
        try:
            d = json_line(line, f"{path}:{n}")
        except DatasetError:
            return "jsonl"       # the parser names the line
        return "mooncake" if isinstance(d, dict) and "hash_ids" in d else "jsonl"
    return "jsonl"


class _Blocks:
    """Mooncake's blocks: one text per hash id, built once and reused verbatim."""

    def __init__(self, tok: Tokenizer, seed: int) -> None:
        self.tok, self.seed = tok, seed
        self.ids: dict[int, list[int]] = {}

    def tokens(self, h: int) -> list[int]:
        ids = self.ids.get(h)
        if ids is None:
            # the opening makes blocks of different hash ids differ at their first token
            text = text_of_tokens(self.tok, random.Random(self.seed * 1_000_003 + h), BLOCK_TOKENS,
                                  _opening(self.tok, self.seed, h))
            ids = self.ids[h] = self.tok.encode(text)[:BLOCK_TOKENS]
        return ids

    def prompt(self, hash_ids: tuple[int, ...], n: int, unique: str) -> str:
        ids: list[int] = []
        for h in hash_ids:
            if len(ids) >= n:
                break
            ids += self.tokens(h)[: n - len(ids)]
        text = self.tok.decode(ids)
        if len(ids) < n:     # more tokens than the blocks hold: unique text for the rest
            text = (text + " " + text_of_tokens(self.tok, random.Random(unique), n - len(ids),
                                                unique)).strip()
        return text


@dataclass(frozen=True)
class PrefixAim:
    """--prefix-hit-ratio on a trace; ``prefixes``: how many distinct shared prompts."""

    ratio: float
    block_tokens: int = 16
    prefixes: int = 1


def implied_hit_ratio(rows: list[_Row]) -> float | None:
    """The prefix-cache hit ratio a Mooncake trace's hash_ids imply for an unbounded cache: a
    request's leading blocks already sent (by hash id) are cached; the first unseen block ends
    its hit, as a prefix cache matches prefixes only."""
    seen: dict[int, int] = {}          # hash id -> most tokens of that block sent so far
    hit = total = 0
    for r in rows:
        if r.hash_ids is None or not r.input_tokens:
            continue
        n = r.input_tokens
        total += n
        matching = True
        for k, h in enumerate(r.hash_ids):
            block_n = min(BLOCK_TOKENS, n - k * BLOCK_TOKENS)
            if block_n <= 0:
                break
            have = seen.get(h, 0)
            if matching:
                hit += min(have, block_n)
                matching = have >= block_n
            seen[h] = max(have, block_n)
    return hit / total if total else None


class _SharedPrompts:
    """The shared system prompts of a --prefix-hit-ratio trace: one text per prefix, as long as
    the longest share any request needs; a request sharing ``s`` tokens gets its first ``s``
    tokens, so every shorter share is a prefix of the one warmed."""

    def __init__(self, tok: Tokenizer, aim: PrefixAim, longest: int, seed: int) -> None:
        self.tok = tok
        texts = shared_texts(tok, max(aim.prefixes, 1), longest, seed) if longest else []
        self.full = texts
        self.words = [t.split() for t in texts] if tok.unit_words else None
        self.ids = None if tok.unit_words else [tok.encode(t)[:longest] for t in texts]

    def take(self, k: int, tokens: int) -> str | None:
        if not self.full or tokens <= 0:
            return None
        k %= len(self.full)
        if self.words is not None:      # one word = one token: exact
            return " ".join(self.words[k][:tokens])
        assert self.ids is not None
        return self.tok.decode(self.ids[k][:tokens])


def _check_aim(rows: list[_Row], path: str, fmt: str) -> None:
    """--prefix-hit-ratio needs prompts the replay builds from lengths, one request each."""
    if fmt == "mooncake" or any(r.hash_ids is not None for r in rows):
        raise DatasetError(f"--prefix-hit-ratio: {path} is a Mooncake trace: its hash_ids fix "
                           "what is shared (the ratio they imply is verified anyway); drop "
                           "--prefix-hit-ratio")
    if any(r.user is not None for r in rows):
        raise DatasetError(f"--prefix-hit-ratio: {path} carries its own messages; the ratio can "
                           "be aimed at only with a trace of lengths (Azure CSV, or JSONL with "
                           "input_length)")
    sessions = [r.session for r in rows if r.session is not None]
    if len(sessions) != len(set(sessions)):
        raise DatasetError(f"--prefix-hit-ratio: {path} has sessions of several turns, whose "
                           "history is cached anyway; aim at a ratio with single-request traces "
                           "only (drop --prefix-hit-ratio or the session_id field)")


def load_trace(path: str, tok: Tokenizer, seed: int = 0,
               window_s: tuple[float, float] | None = None,
               limit: int | None = None, aim: PrefixAim | None = None,
               reserve: int = 0) -> Trace:
    """The trace's requests in time order, as conversations with their due times. With ``aim``
    (a trace of lengths), each prompt is one of ``aim.prefixes`` shared system prompts cut to
    the block-aligned share of its own length, then text of its own (llmbench.workload.prefix).
    ``reserve``: the run's salt's tokens, left out of prompts built to lengths (workload.salt)."""
    check_regular_file(path, "--trace")
    fmt = _format_of(path)
    rows = list(_azure_rows(path) if fmt == "azure" else _jsonl_rows(path))
    if not rows:
        raise DatasetError(f"--trace {path}: no requests in the file")
    rows.sort(key=lambda r: r.t_s)       # stable: equal times keep file order (session turns)
    check_sessions(rows, path)
    first = rows[0].t_s
    if window_s is not None:
        lo, hi = window_s
        span = rows[-1].t_s - first
        rows = [r for r in rows if lo <= r.t_s - first < hi]
        if not rows:
            raise DatasetError(f"--trace-window: no request of {path} falls in it (the trace "
                               f"spans 0-{span:g} s); pick a window inside the trace")
        first += lo
    if limit is not None:
        rows = rows[:limit]
    longest = _longest_gap(rows)
    if tok.server is not None:
        prepare_unit_words(tok)
    shares: list[int] = []
    shared: _SharedPrompts | None = None
    if aim is not None:
        _check_aim(rows, path, fmt)
        shares = [aligned_shared_tokens(aim.ratio, r.input_tokens or 1, aim.block_tokens)
                  for r in rows]
        shared = _SharedPrompts(tok, aim, max(shares, default=0), seed)
    blocks = _Blocks(tok, seed)
    sessions: dict[str, list[tuple[_Row, float, Turn, str | None]]] = {}
    for i, r in enumerate(rows):
        if r.user is not None:
            text = r.user
        elif r.hash_ids is not None:
            text = blocks.prompt(r.hash_ids, max((r.input_tokens or 1) - reserve, 1),
                                 f"[u{seed}-{i}]")
        else:
            own_n = (r.input_tokens or 1) - (shares[i] if shared else 0) - reserve
            text = text_of_tokens(tok, random.Random(seed * 7919 + i), max(own_n, 1),
                                  _opening(tok, seed, i))
        system = r.system
        if shared is not None:
            system = shared.take(i, shares[i])
        count = tok.local.count(text) if tok.server is not None and tok.local else tok.count(text)
        if system is not None and shared is not None:
            count += shares[i]           # the prompt is the shared part and the text
        key = f"s:{r.session}" if r.session is not None else f"r:{i}"
        sessions.setdefault(key, []).append((r, r.t_s - first, Turn(text, r.output_tokens, count),
                                             system))
    counted = functools.lru_cache(maxsize=None)(tok.count)   # the salt's trim, once per opening
    items = []
    for key, turns in sessions.items():
        rec = [r.replay for r, *_ in turns if r.replay is not None]
        if rec and reserve and turns[0][0].replay is not None:
            rec[0] = replace(rec[0], own=trim_start(rec[0].own, reserve, counted))
        # a session the window or --requests cut after its first turn is sent as text
        whole = len(rec) == len(turns) and rec[0].own and turns[0][0].turn == 0
        gaps = tuple(r.gap_s for r, *_ in turns)
        items.append(TraceItem(Conversation(f"trace-{key}", tuple(t for _, _, t, _ in turns),
                                            turns[0][3]),
                               tuple(d for _, d, _, _ in turns),
                               gaps if any(g is not None for g in gaps) else (),
                               tuple(rec) if whole else ()))
    prefix, warm = _prefix_of(rows, fmt, aim, shared, shares, tok, seed)
    return Trace(path, fmt, items, window_s, len(blocks.ids), prefix, warm, longest,
                 api_note(rows))


def _prefix_of(rows: list[_Row], fmt: str, aim: PrefixAim | None,
               shared: _SharedPrompts | None, shares: list[int], tok: Tokenizer, seed: int
               ) -> tuple[dict[str, Any] | None, list[Conversation]]:
    """The trace's shared-prefix plan (run.json's "prefix") and the conversations that warm the
    cache: --prefix-hit-ratio's, or what a Mooncake trace's hash_ids imply (no warm-up)."""
    if aim is not None and shared is not None:
        total = sum(r.input_tokens or 1 for r in rows)
        plan = PrefixPlan(aim.ratio, aim.block_tokens,
                          round(sum(shares) / len(shares)) if shares else 0, max(aim.prefixes, 1))
        # what whole blocks allow for these lengths, next to the ratio asked for
        return ({**plan.to_dict(), "planned": round(sum(shares) / total, 4) if total else None,
                 "source": "--prefix-hit-ratio"},
                warmup_conversations(shared.full, tok, seed, 1))
    implied = implied_hit_ratio(rows) if fmt == "mooncake" else None
    if implied is None:
        return None, []
    return ({"target": round(implied, 4), "block_tokens": BLOCK_TOKENS,
             "source": "the trace's hash_ids (an unbounded cache)"}, [])


def _longest_gap(rows: list[_Row]) -> tuple[float, str] | None:
    """The longest pause between two requests in time order, and the line after it."""
    gaps = [(b.t_s - a.t_s, b.where) for a, b in zip(rows, rows[1:])]
    return max(gaps, key=lambda g: g[0], default=None)


def _human_s(s: float) -> str:
    year = 365.25 * 86400
    if s >= 2 * year:
        return f"{s / year:,.0f} years"
    if s >= 2 * 86400:
        return f"{s / 86400:,.0f} days"
    return f"{s / 3600:,.1f} hours"


def check_replay(trace: Trace, speed: float) -> None:
    """Refuses a replay longer than MAX_REPLAY_S (module doc): the Mooncake traces span an
    hour; a 1e15 ms gap is a broken line, and waiting it out takes 31,000 years."""
    took_s = trace.span_s / speed
    if took_s <= MAX_REPLAY_S:
        return
    gap = ""
    if trace.longest_gap is not None:
        gap_s, where = trace.longest_gap
        gap = f"; its longest gap, {_human_s(gap_s / speed)}, comes before {where}"
    raise DatasetError(f"--trace {trace.path}: replaying it would take {_human_s(took_s)} at "
                       f"--trace-speed {speed:g} and llmbench replays at most 30 days{gap}: pick "
                       "a part with --trace-window, raise --trace-speed or fix the timestamps")


def trace_workload(path: str, tok: Tokenizer, seed: int = 0,
                   window_s: tuple[float, float] | None = None,
                   limit: int | None = None, aim: PrefixAim | None = None,
                   reserve: int = 0) -> tuple[Trace, Any]:
    """(Trace, Workload): the trace and the workload record run.json keeps of it, with the
    trace's prefix plan (verified after the run) and warm-up (``_prefix_of``)."""
    from llmbench.workload.model import Workload
    from llmbench.workload.tokenize_error import ServerTokenizeError
    try:
        tr = load_trace(path, tok, seed, window_s, limit, aim, reserve)
    except ServerTokenizeError:
        if tok.fallback is None:
            raise
        tok = tok.fallback
        tr = load_trace(path, tok, seed, window_s, limit, aim, reserve)
    wl = Workload([i.conv for i in tr.items], source=path, tokenizer=tok.name, seed=seed,
                  params={"dataset": "trace", **tr.describe()},
                  warnings=[w for w in (tok.note, tr.note) if w],
                  tokenizer_info=tok.describe(),
                  warmup=tr.warmup, prefix=tr.prefix)
    return tr, wl

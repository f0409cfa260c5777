"""``datasets inspect FILE`` for files that are sessions rather than prompts: a recording made
by ``llmbench record`` (workload/recording.py) and the agent traces llmbench replays
(workload/agent_traces.py): what each holds, in a few lines."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from llmbench.workload.files import DatasetError, read_lines
from llmbench.workload.recording import HEADER_KEY, PrefixShare, messages_of


def _dist(xs: list[float], unit: str = "") -> str:
    if not xs:
        return "-"
    s = sorted(xs)

    def p(q: float) -> float:
        return s[min(len(s) - 1, int(q * len(s)))]
    return (f"min {s[0]:.0f}  p50 {p(0.5):.0f}  mean {sum(s) / len(s):.1f}  p90 {p(0.9):.0f}  "
            f"max {s[-1]:.0f}{unit}")


@dataclass
class RecordingSummary:
    """What a recorded trace holds, in one line and a few counts."""
    path: str
    text: str = "?"
    requests: int = 0
    turns: dict[str, int] = field(default_factory=dict)      # session -> requests
    sub_sessions: int = 0                                     # sessions with a parent
    inputs: list[float] = field(default_factory=list)
    outputs: list[float] = field(default_factory=list)
    gaps_ms: list[float] = field(default_factory=list)
    ttft_ms: list[float] = field(default_factory=list)
    apis: Counter[str] = field(default_factory=Counter)
    shared: float | None = None
    span_s: float = 0.0

    def lines(self) -> list[str]:
        share = "-" if self.shared is None else f"{self.shared * 100:.1f} %"
        return [f"source:         {self.path} (an llmbench recording, text {self.text})",
                f"requests:       {self.requests} over {self.span_s:.1f} s",
                f"sessions:       {len(self.turns)} ({self.sub_sessions} started beside "
                "another: sub-agents, branches)",
                f"turns/session:  {_dist(list(self.turns.values()))}",
                f"prompt tokens:  {_dist(self.inputs)}",
                f"output tokens:  {_dist(self.outputs)}",
                f"gaps:           {_dist(self.gaps_ms, ' ms')} (think, tool time)",
                f"TTFT recorded:  {_dist(self.ttft_ms, ' ms')}",
                f"shared prefix:  {share} of prompt tokens repeat an earlier request's prefix",
                "APIs:           " + ", ".join(f"{k} {v}" for k, v in self.apis.most_common())]


def is_recording(path: str) -> bool:
    for _, line in read_lines(path):
        try:
            d = json.loads(line)
        except (ValueError, RecursionError):
            return False
        return isinstance(d, dict) and HEADER_KEY in d
    return False


def summarise_recording(path: str, tok: Any) -> RecordingSummary:
    out = RecordingSummary(path)
    share = PrefixShare(tok.count)
    for n, line in read_lines(path):
        where = f"{path}:{n}"
        try:
            d = json.loads(line)
        except (ValueError, RecursionError):
            raise DatasetError(f"{where}: not JSON; a recording is one JSON object per line")
        if not isinstance(d, dict):
            raise DatasetError(f"{where}: expected a JSON object per line")
        if HEADER_KEY in d:
            out.text = str(d.get("text"))
            continue
        req, api = d.get("request"), d.get("api")
        if not isinstance(req, dict) or not isinstance(api, str):
            raise DatasetError(f"{where}: a recorded request needs \"api\" and \"request\"")
        out.requests += 1
        sid = str(d.get("session_id"))
        out.turns[sid] = out.turns.get(sid, 0) + 1
        if d.get("turn") == 0 and d.get("parent_session") is not None:
            out.sub_sessions += 1
        for key, xs in (("input_length", out.inputs), ("output_length", out.outputs),
                        ("after_ms", out.gaps_ms), ("ttft_ms", out.ttft_ms)):
            v = d.get(key)
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                xs.append(float(v))
        ts = d.get("timestamp")
        if isinstance(ts, (int, float)):
            out.span_s = max(out.span_s, ts / 1000.0)
        out.apis[api] += 1
        share.add(messages_of(api, req))
    out.shared = share.share
    return out


def summarise_agents(path: str, tok: Any) -> list[str]:
    """An agent trace as the agent loop will play it: sessions, calls, sub-agents, lengths, gaps."""
    from llmbench.workload.agent_traces import read_sessions
    sessions, warnings, kind = read_sessions(path, tok, 0)
    calls, subs, new, reply, gaps = [], 0, [], [], []
    for s in sessions:
        assert s.plan is not None
        agents = s.plan.walk()
        subs += len(agents) - 1
        calls.append(float(sum(len(a.steps) for a in agents)))
        for a in agents:
            for st in a.steps:
                new.append(float(st.new_tokens))
                reply.append(float(st.reply_tokens))
                if st.gap_s:
                    gaps.append(st.gap_s * 1000)
    return [f"source:         {path} (an agent trace, format {kind})",
            f"sessions:       {len(sessions)} ({subs} sub-agents)",
            f"calls/session:  {_dist(calls)}",
            f"new tokens:     {_dist(new)} per call",
            f"reply tokens:   {_dist(reply)}",
            f"tool gaps:      {_dist(gaps, ' ms')}",
            *(f"note: {w}" for w in warnings)]


def summarise_file(path: str, tok: Any) -> list[str] | None:
    """The summary's lines when ``path`` is a recording or an agent trace; None otherwise (a
    file of prompts: the workload's own summary)."""
    from llmbench.workload.agent_traces import detect
    try:
        recording = is_recording(path)
        if not recording:
            detect(path)
    except (DatasetError, RecursionError):
        # not one of these (or not readable as one): the dataset reader says what is wrong
        return None
    if recording:
        return summarise_recording(path, tok).lines()
    return summarise_agents(path, tok)

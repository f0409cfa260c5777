#!/usr/bin/env python3
"""How faithfully ``run --trace RECORDING`` replayed a recording made by ``llmbench record``
(issue 47's acceptance): prints the figures, exits 1 when one is out of bounds.

    python scripts/record_compare.py RECORDING RUN_FOLDER

- sessions and turns per session, equal;
- per request: prompt and output tokens (the server's usage in both), within 2 %;
- each turn sent after its previous reply ended;
- arrival times (from the first request) within 20 ms p99 of the recording's;
- the server's cached prompt-token share, within 5 points.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(rec_path: str, folder: str) -> int:
    rec = [json.loads(x) for x in Path(rec_path).read_text().splitlines()]
    # what the replay sends: the requests the server took when recorded (others are left out)
    rec = [d for d in rec if "request" in d and 200 <= (d.get("status") or 200) < 300]
    run = Path(folder)
    if not (run / "requests.jsonl").exists():      # a --out folder holding one run
        inner = sorted(run.glob("*/requests.jsonl"))
        if len(inner) == 1:
            run = inner[0].parent
    runs = [json.loads(x) for x in (run / "requests.jsonl").read_text().splitlines()]
    runs = [r for r in runs if not r.get("warmup")]
    by_key = {(d["session_id"], d["turn"]): d for d in rec}
    got: dict[tuple[str, int], dict] = {}
    for r in runs:
        sid = str(r.get("conversation", "")).removeprefix("trace-s:")
        got[(sid, int(r.get("turn") or 0))] = r
    ok = True

    def say(cond: bool, text: str) -> None:
        nonlocal ok
        ok &= cond
        print(("ok   " if cond else "FAIL ") + text)

    def shape(keys) -> dict[str, int]:
        out: dict[str, int] = {}
        for s, _ in keys:
            out[s] = out.get(s, 0) + 1
        return out
    a, b = shape(by_key), shape(got)
    failed = [r for r in runs if not r.get("ok")]
    say(a == b, f"sessions {len(a)} vs {len(b)}, turns {sum(a.values())} vs {sum(b.values())}"
        + (f" ({len(failed)} replayed requests failed, the rest of their sessions unsent: "
           + "; ".join(sorted({str(r.get('error'))[:60] for r in failed})) + ")"
           if failed else ""))
    p_err, o_err, p_same = [], [], []

    def same_history(s: str, t: int) -> bool:
        """Whether every earlier reply of the session came back as long as recorded (a live
        reply of another length, a tool call's arguments, changes the prompts after it)."""
        return all(got.get((s, u), {}).get("output_tokens") == by_key[(s, u)].get("output_length")
                   for u in range(t) if (s, u) in by_key)
    for k, d in by_key.items():
        r = got.get(k)
        if r is None or not d.get("input_length") or not r.get("prompt_tokens") \
                or r.get("prompt_tokens_source") != "server":
            continue            # a failed request has no server count to compare
        err = abs(r["prompt_tokens"] - d["input_length"]) / d["input_length"]
        p_err.append(err)
        if same_history(*k):
            p_same.append(err)
        if d.get("output_length") and r.get("output_tokens") is not None:
            o_err.append(abs(r["output_tokens"] - d["output_length"]) / d["output_length"])
    worst_p = max(p_err, default=0.0)
    worst_o = max(o_err, default=0.0)
    mean_p = sum(p_err) / len(p_err) if p_err else 0.0
    say(worst_p <= 0.02, f"prompt tokens: worst {worst_p * 100:.2f} %, mean {mean_p * 100:.2f} % "
        f"off over {len(p_err)} requests")
    if len(p_same) < len(p_err):
        print(f"     of them {len(p_same)} after replies as long as recorded: worst "
              f"{max(p_same, default=0.0) * 100:.2f} %, mean "
              f"{sum(p_same) / max(len(p_same), 1) * 100:.2f} %")
    say(worst_o <= 0.02, f"output tokens: worst {worst_o * 100:.2f} % off")
    order = all(got[(s, t)]["start"] >= got[(s, t - 1)]["end"]
                for (s, t) in got if t > 0 and (s, t - 1) in got)
    say(order, "each turn sent after its previous reply")
    # the replay's t0: its first request's scheduled time (its start may be a little late)
    t_rec0 = min(d["timestamp"] for d in rec) / 1000
    t_run0 = min(r["scheduled"] for r in runs)

    def p99(xs: list[float]) -> float:
        xs = sorted(xs)
        return xs[min(len(xs) - 1, int(0.99 * len(xs)))] if xs else 0.0
    off = {k: ((got[k]["start"] - t_run0) - (d["timestamp"] / 1000 - t_rec0)) * 1000
           for k, d in by_key.items() if k in got}
    # a later turn waits for its reply, then its recorded gap: when the live server answered
    # later than the recorded one did, the turn is that much later by design
    slower = {k for k, d in by_key.items() if k in got and d["turn"] > 0
              and (d["session_id"], d["turn"] - 1) in got
              and (got[(d["session_id"], d["turn"] - 1)]["end"] - t_run0) * 1000
              > (by_key[(d["session_id"], d["turn"] - 1)]["timestamp"]
                 + by_key[(d["session_id"], d["turn"] - 1)]["e2el_ms"]) - t_rec0 * 1000 + 20}
    kept = [abs(v) for k, v in off.items() if k not in slower]
    say(p99(kept) <= 20, f"arrival times: p99 {p99(kept):.1f} ms off the recording's over "
        f"{len(kept)} requests ({len(off) - len(kept)} more waited for a reply that came later "
        f"than recorded: all requests p99 {p99([abs(v) for v in off.values()]):.1f} ms)")
    lag = [(r["start"] - r["scheduled"]) * 1000 for r in runs]
    print(f"     dispatch lag (start - due): p99 {p99(lag):.1f} ms")

    def share(items, cached: str, prompt: str) -> float | None:
        c = [(x.get(cached), x.get(prompt)) for x in items]
        c = [(x, y) for x, y in c if x is not None and y]
        return sum(x for x, _ in c) / sum(y for _, y in c) if c else None
    s_rec = share(rec, "cached_tokens", "input_length")
    s_run = share(runs, "cached_tokens", "prompt_tokens")
    if s_rec is None or s_run is None:
        print(f"--   cached prompt-token share: not reported (recording {s_rec}, replay {s_run})")
    else:
        say(abs(s_rec - s_run) <= 0.05, f"cached prompt-token share: recording "
            f"{s_rec * 100:.1f} %, replay {s_run * 100:.1f} %")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    sys.exit(main(sys.argv[1], sys.argv[2]))

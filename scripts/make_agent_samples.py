"""Write the small sample agent traces in datasets/ (one per format ``--workload agent
--dataset FILE`` reads: workload/agent_traces.py).

    python scripts/make_agent_samples.py [--out datasets]

Seeded, so the files are the same on every run. Each holds the same few coding-agent sessions
in its own format: a main agent of 3-6 calls whose prompts grow by each tool result, and in one
session of two a call that starts two sub-agents (joined before the main agent's next call):

- agent_sessions_sample.jsonl: llmbench's own format (docs/agents.md), one call a line;
- agent_weka_sample.jsonl: WEKA-style traces (the Weka KV-cache tester's fields, as AIPerf and
  GuideLLM read them), one trace a line, sub-agents as ``type: "subagent"`` markers;
- agent_otel_sample.jsonl: OpenTelemetry GenAI spans, one a line (``invoke_agent`` spans
  scope the agents, ``chat`` spans are the calls, ``execute_tool`` spans the tools).
"""

from __future__ import annotations

import argparse
import json
import random
import zlib
from pathlib import Path

SYSTEM, SUB_SYSTEM = 1200, 600


def sessions(rng: random.Random, n: int = 6) -> list[dict]:
    """The sessions on paper: per agent, its calls (new tokens, output tokens, gap before)."""
    out = []
    for s in range(n):
        main = []
        for k in range(rng.randint(3, 6)):
            main.append({"new": rng.randint(60, 200) if k == 0 else rng.randint(150, 900),
                         "out": rng.randint(20, 80) if k else rng.randint(20, 60),
                         "gap": 0.0 if k == 0 else round(rng.uniform(0.1, 1.5), 3)})
        main[-1]["out"] = rng.randint(120, 300)
        subs = []
        if s % 2 == 1 and len(main) > 2:
            for j in range(2):
                subs.append([{"new": rng.randint(40, 120) if k == 0 else rng.randint(100, 400),
                              "out": rng.randint(20, 60),
                              "gap": 0.0 if k == 0 else round(rng.uniform(0.1, 0.8), 3)}
                             for k in range(rng.randint(2, 3))])
        out.append({"id": f"s{s}", "main": main, "subs": subs, "spawn_at": 1})
    return out


def llmbench_format(plan: list[dict]) -> list[dict]:
    rows = []
    for s in plan:
        prev = None
        for k, c in enumerate(s["main"]):
            row = {"session": s["id"], "step": str(k), "output_tokens": c["out"],
                   "new_tokens": c["new"]}
            if prev is not None:
                row["parent"] = prev
                row["tool_gap_s"] = c["gap"]
            else:
                row["system_tokens"] = SYSTEM
            rows.append(row)
            if k == s["spawn_at"] and s["subs"]:
                for j, sub in enumerate(s["subs"]):
                    sprev = str(k)
                    for m, sc in enumerate(sub):
                        srow = {"session": s["id"], "step": f"{k}.{j}.{m}", "parent": sprev,
                                "agent": f"explore-{j}", "output_tokens": sc["out"],
                                "new_tokens": sc["new"]}
                        if m == 0:
                            srow["system_tokens"] = SUB_SYSTEM
                        else:
                            srow["tool_gap_s"] = sc["gap"]
                        rows.append(srow)
                        sprev = srow["step"]
            prev = str(k)
    return rows


def weka(plan: list[dict]) -> list[dict]:
    traces = []
    for s in plan:
        t, ctx, reqs = 0.0, SYSTEM, []
        for k, c in enumerate(s["main"]):
            t += c["gap"]
            ctx += c["new"]
            api = round(0.2 + ctx / 4000, 3)
            reqs.append({"t": round(t, 3), "type": "s", "model": "agent-model", "in": ctx,
                         "out": c["out"], "hash_ids": [], "stop": "end_turn" if k == len(s["main"]) - 1
                         else "tool_use", "api_time": api,
                         **({"think_time": c["gap"]} if k else {})})
            ctx += c["out"]
            t += api
            if k == s["spawn_at"] and s["subs"]:
                for j, sub in enumerate(s["subs"]):
                    st, sctx, sreqs = 0.0, SUB_SYSTEM, []
                    for m, sc in enumerate(sub):
                        st += sc["gap"]
                        sctx += sc["new"]
                        sreqs.append({"t": round(st, 3), "type": "s", "model": "sub-model",
                                      "in": sctx, "out": sc["out"], "hash_ids": [],
                                      **({"think_time": sc["gap"]} if m else {})})
                        sctx += sc["out"]
                        st += 0.3
                    reqs.append({"t": round(t, 3), "type": "subagent", "agent_id": f"explore-{j}",
                                 "subagent_type": "Explore", "status": "completed",
                                 "duration_ms": int(st * 1000), "requests": sreqs,
                                 "models": ["sub-model"], "system_tokens": SUB_SYSTEM,
                                 "tool_tokens": 0})
        traces.append({"id": s["id"], "models": ["agent-model"], "block_size": 64,
                       "hash_id_scope": "local", "system_tokens": SYSTEM - 400, "tool_tokens": 400,
                       "requests": reqs})
    return traces


def otel(plan: list[dict]) -> list[dict]:
    spans = []
    t0 = 1_750_000_000.0

    def span(trace: str, sid: str, parent: str | None, name: str, start: float, end: float,
             attrs: dict) -> dict:
        return {"trace_id": trace, "span_id": sid, "parent_span_id": parent, "name": name,
                "start_time": int(start * 1e9), "end_time": int(end * 1e9), "attributes": attrs,
                "status": {"code": "OK"}}

    for s in plan:
        trace = f"{zlib.crc32(s['id'].encode()):08x}{zlib.crc32(s['id'][::-1].encode()):08x}"
        root = f"{s['id']}-agent"
        t, ctx, n = t0, SYSTEM, 0
        calls: list[dict] = []

        def agent_calls(steps, agent_span, ctx0, t_start, tag, resume=False):
            nonlocal n
            t, ctx = t_start, ctx0
            for k, c in enumerate(steps):
                if k or resume:       # a call after a tool (the first of a resumed agent too)
                    tool = f"{tag}-tool{k}"
                    spans.append(span(trace, tool, agent_span, "execute_tool read_file", t,
                                      t + c["gap"], {"gen_ai.operation.name": "execute_tool",
                                                     "gen_ai.tool.name": "read_file"}))
                    t += c["gap"]
                ctx += c["new"]
                dur = 0.2 + ctx / 4000
                n += 1
                spans.append(span(trace, f"{tag}-chat{k}", agent_span, "chat agent-model", t,
                                  t + dur, {"gen_ai.operation.name": "chat",
                                            "gen_ai.request.model": "agent-model",
                                            "gen_ai.usage.input_tokens": ctx,
                                            "gen_ai.usage.output_tokens": c["out"]}))
                ctx += c["out"]
                t += dur
                calls.append({"t": t})
            return t

        spans.append(span(trace, root, None, "invoke_agent coder", t, t + 60,
                          {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "coder"}))
        spawn = s["spawn_at"]
        end = agent_calls(s["main"][:spawn + 1], root, ctx, t, f"{s['id']}-main")
        ctx = SYSTEM + sum(c["new"] + c["out"] for c in s["main"][:spawn + 1])
        joined = end
        for j, sub in enumerate(s["subs"]):
            sa = f"{s['id']}-sub{j}"
            spans.append(span(trace, sa, root, "invoke_agent explore", end, end + 5,
                              {"gen_ai.operation.name": "invoke_agent",
                               "gen_ai.agent.name": f"explore-{j}"}))
            joined = max(joined, agent_calls(sub, sa, SUB_SYSTEM, end, sa))
        rest = s["main"][spawn + 1:]
        if rest:
            rest = [dict(rest[0], gap=round(max(rest[0]["gap"], joined - end), 3))] + rest[1:]
            # the main agent's next call starts after its tool and its sub-agents
            agent_calls(rest, root, ctx, end, f"{s['id']}-main2", resume=True)
        t0 += 120
    return spans


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "datasets")
    args = ap.parse_args()
    rng = random.Random(35)
    plan = sessions(rng)
    args.out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("agent_sessions_sample.jsonl", llmbench_format(plan)),
                       ("agent_weka_sample.jsonl", weka(plan)),
                       ("agent_otel_sample.jsonl", otel(plan))):
        path = args.out / name
        path.write_text("".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows))
        print(f"wrote {path} ({len(rows)} lines)")


if __name__ == "__main__":
    main()

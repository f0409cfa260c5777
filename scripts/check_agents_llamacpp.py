"""A ramp of agents against a real llama.cpp server, and whether the verdict names its KV cache.

llama.cpp keeps one conversation's KV per slot (``-np``): with its host-memory prompt cache off
(``--cache-ram 0``), N slots keep N agent sessions warm, and a session that finds its slot
taken by another prefills its whole context again. So a ramp of agents over ``-np 2`` holds
about 2 agents and breaks at 3 on the cache: the verdict should say so, with the server's own
counters (llamacpp:prompt_tokens_cached_total against prompt_tokens_total, from --metrics).

The server needs its Jinja templates for tools (``--jinja``); the shared server's ``gemma``
template is not one, so this script's folder holds a Gemma template that renders the tools and
the calls (scripts/realserver/gemma-tools.jinja). A 270M model answers in text, not with tool
calls: ``--tool-choice none`` (llama.cpp's parser answers an error event when a reply does not
parse as a call), and the run says how many steps answered in text.

  shared/realserver/serve.sh 18810 2 1 --jinja --chat-template-file \\
      scripts/realserver/gemma-tools.jinja --cache-ram 0           # prints the PID
  python scripts/check_agents_llamacpp.py --url http://127.0.0.1:18810/v1 --users 1,2,3

Prints per step: agents, sessions completed, a session's median time, the share of prompt
tokens served from the cache (the replies' usage, and the server's counters), the tokens each
call prefilled; then the verdict and the load average before and after (the machine is
shared: quote it with the figures).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import llmbench  # noqa: E402
from llmbench.analysis.cachebound import _window, server_cache, step_cache  # noqa: E402
from llmbench.records.record import load_records  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", default="gemma-3-270m")
    ap.add_argument("--users", default="1,2,3")
    ap.add_argument("--hold", default="40s")
    ap.add_argument("--gate", default="session.p50<=22s")
    ap.add_argument("--out", default="results")
    a = ap.parse_args()
    load0 = os.getloadavg()
    r = llmbench.ramp(url=a.url, model=a.model, workload_type="agent", users=a.users,
                      hold=a.hold, ramp_in="2s", agent_steps="3", agent_system_tokens="60",
                      agent_task_tokens="20", agent_result_tokens="40", agent_call_tokens="8",
                      agent_answer_tokens="8", agent_tool_latency="300ms", agent_tools=1,
                      tool_choice="none", threshold=[a.gate], out=a.out, progress=False)
    folder = Path(r.path)
    doc = json.loads((folder / "run.json").read_text())
    recs = load_records(folder / "requests.jsonl")
    samples = [json.loads(x) for x in (folder / "server.jsonl").read_text().splitlines()]
    print(f"{'agents':>6} {'sessions':>8} {'p50 s':>7} {'cached':>7} {'server':>7} "
          f"{'prefill/call':>12}")
    for s in doc["steps"]:
        c = step_cache(_window(recs, s), s["load"])
        sv = server_cache(samples, s["hold_start"], s["hold_end"])
        ss = s.get("sessions") or {}
        med = (ss.get("duration") or {}).get("median")
        print(f"{s['load']:>6g} {ss.get('completed', 0):>8} "
              f"{(med or 0) / 1000:>7.1f} {100 * (c.cached_share or 0):>6.0f}% "
              f"{100 * (sv.hit_rate or 0) if sv else 0:>6.0f}% {c.prefilled_per_call or 0:>12.0f}")
    v = doc["verdict"]
    print(f"\nverdict: {v['kind']}: {v['result']}")
    for e in v["evidence"]:
        print(f"  {e}")
    print(f"load average before {load0[0]:.1f}, after {os.getloadavg()[0]:.1f}; {folder}")


if __name__ == "__main__":
    main()

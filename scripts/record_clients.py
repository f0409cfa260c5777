#!/usr/bin/env python3
"""Real clients through ``llmbench record`` (issue 47's acceptance), printing figures.

    python scripts/record_clients.py --direct http://127.0.0.1:8080 --via http://127.0.0.1:8001

1. Sessions as applications send them, through --via (the recorder): the ``openai`` SDK in a
   multi-turn streamed chat and in a tool-calling loop (--tools: the server must take tools,
   llama.cpp with --jinja), and the ``anthropic`` SDK (Messages API, streamed), with think
   gaps between turns. Each must work unchanged: the script stops at the first failure.
2. TTFT overhead: the same streamed request (--overhead N times) straight to --direct and
   through --via, interleaved, as the openai SDK sees it (first content chunk); p50/p99 of
   each and the difference.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

import anthropic
import openai

WORDS = ("harbour ferry timetable rain pushchair fjord bridge museum lunch budget ticket "
         "station cabin hike bakery market evening morning children granny map").split()


MODEL = "mock"
TOOL_CHOICE = "required"


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


SYSTEM = ("You are a patient travel planner. Keep answers short and concrete, give prices "
          "in euros, and ask one question back when something is unclear.")
TOOL = {"type": "function", "function": {
    "name": "train_times", "description": "Departures between two stations today",
    "parameters": {"type": "object", "properties": {
        "origin": {"type": "string"}, "destination": {"type": "string"}},
        "required": ["origin", "destination"]}}}


def chat(base: str, seed: int, turns: int, think_s: float) -> None:
    rng = random.Random(seed)
    c = openai.OpenAI(base_url=base + "/v1", api_key="sk-not-a-real-key", max_retries=0)
    msgs = [{"role": "system", "content": SYSTEM}]
    for _ in range(turns):
        msgs.append({"role": "user", "content": sentence(rng, rng.randint(8, 40))})
        s = c.chat.completions.create(model=MODEL, messages=msgs, stream=True,
                                      max_tokens=rng.randint(8, 24),
                                      stream_options={"include_usage": True})
        text = "".join(ch.choices[0].delta.content or "" for ch in s if ch.choices)
        msgs.append({"role": "assistant", "content": text})
        time.sleep(think_s * rng.uniform(0.5, 1.5))


def tools(base: str, seed: int, steps: int, tool_s: float) -> None:
    rng = random.Random(seed)
    c = openai.OpenAI(base_url=base + "/v1", api_key="sk-not-a-real-key", max_retries=0)
    msgs = [{"role": "system", "content": SYSTEM},
            {"role": "user", "content": "Find me a train from Oslo to Bergen. "
             + sentence(rng, 10)}]
    for _ in range(steps):
        r = c.chat.completions.create(model=MODEL, messages=msgs, tools=[TOOL],
                                      tool_choice=TOOL_CHOICE, max_tokens=48)
        m = r.choices[0].message
        msgs.append(m.model_dump(exclude_none=True))
        time.sleep(tool_s * rng.uniform(0.5, 1.5))        # the tool runs
        # a small model may answer in text (gemma-3-270m does): the application then says
        # what it found as the user, and the tools still go in every request
        for call in m.tool_calls or ():
            msgs.append({"role": "tool", "tool_call_id": call.id,
                         "content": "Departures: " + sentence(rng, 12)})
        if not m.tool_calls:
            msgs.append({"role": "user", "content": "Departures: " + sentence(rng, 12)})
    c.chat.completions.create(model=MODEL, messages=msgs, max_tokens=16)


def messages(base: str, seed: int, turns: int, think_s: float) -> None:
    rng = random.Random(seed)
    c = anthropic.Anthropic(base_url=base, api_key="sk-ant-not-a-real-key", max_retries=0)
    hist: list[dict] = []
    for _ in range(turns):
        hist.append({"role": "user", "content": sentence(rng, rng.randint(8, 30))})
        with c.messages.stream(model=MODEL, max_tokens=rng.randint(8, 20), system=SYSTEM,
                               messages=hist) as s:
            text = "".join(s.text_stream)
        hist.append({"role": "assistant", "content": text or "."})
        time.sleep(think_s * rng.uniform(0.5, 1.5))


def ttft(base: str, prompt: str) -> float:
    c = openai.OpenAI(base_url=base + "/v1", api_key="sk-not-a-real-key", max_retries=0)
    t0 = time.perf_counter()
    s = c.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": prompt}],
                                  stream=True, max_tokens=4)
    first = None
    for ch in s:
        if first is None and ch.choices and ch.choices[0].delta.content:
            first = time.perf_counter()
    return ((first or time.perf_counter()) - t0) * 1000


def q(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--direct", required=True)
    ap.add_argument("--via", required=True)
    ap.add_argument("--sessions", type=int, default=2, help="of each kind")
    ap.add_argument("--think", type=float, default=0.5)
    ap.add_argument("--no-tools", action="store_true")
    ap.add_argument("--overhead", type=int, default=40)
    ap.add_argument("--model", default="mock")
    ap.add_argument("--tool-choice", default="required",
                    help="auto for a model that cannot always call (llama.cpp answers 500)")
    a = ap.parse_args()
    global MODEL, TOOL_CHOICE
    MODEL, TOOL_CHOICE = a.model, a.tool_choice
    jobs = []
    with ThreadPoolExecutor(8) as pool:
        for i in range(a.sessions):
            jobs.append(pool.submit(chat, a.via, i, 3, a.think))
            jobs.append(pool.submit(messages, a.via, 100 + i, 2, a.think))
            if not a.no_tools:
                jobs.append(pool.submit(tools, a.via, 200 + i, 2, a.think))
            time.sleep(0.3)
        for j in jobs:
            j.result()
    print(f"clients: {len(jobs)} sessions through {a.via} worked unchanged (openai chat "
          f"streamed, {'no tools' if a.no_tools else 'tool loops'}, anthropic Messages)")
    if a.overhead:
        direct, via = [], []
        for i in range(a.overhead):
            body = sentence(random.Random(i), 20)
            pair = [(direct, a.direct, "D"), (via, a.via, "V")]
            for xs, url, tag in (pair if i % 2 else pair[::-1]):
                # prompts that differ from their first word: no arm finds the other's cache
                xs.append(ttft(url, f"{tag}{i} {body}"))
        for name, xs in (("direct", direct), ("via recorder", via)):
            print(f"TTFT {name:13s} p50 {q(xs, 50):7.2f} ms  p99 {q(xs, 99):7.2f} ms  "
                  f"mean {statistics.mean(xs):7.2f} ms")
        print(f"added: p50 {q(via, 50) - q(direct, 50):+.2f} ms, p99 "
              f"{q(via, 99) - q(direct, 99):+.2f} ms over {a.overhead} pairs")


if __name__ == "__main__":
    main()

"""--api anthropic against a real server: the Messages API measured with the same clock as chat.

Against one server (llama.cpp's, ../shared/realserver, serves both /v1/chat/completions and
/v1/messages), one request at a time, the same prompts on both APIs, interleaved: for each
prompt an untimed warm-up request (so the server's prompt cache holds it for both alike), then
chat and Messages in alternating order (chat first for even prompts, Messages first for odd
ones). Prints per API: requests, failures, TTFT median and quartiles (and the median of the
per-prompt differences, which a load that drifts over the run does not move), the reply lengths asked
and got (temperature 0: the same reply on both APIs), the finish reasons, the server's prompt
and cached-token counts (usage from the server), and the load average before and after (the
machine is shared: quote it with the figures). With ``--key`` (a server started with
``--api-key KEY``): the key goes as x-api-key and is accepted, and a request without it is
refused with 401 as the API words it.

  shared/realserver/serve.sh 18300 1          # prints the PID; kill it afterwards
  python scripts/check_messages_api.py --url http://127.0.0.1:18300 --prompts 12
  python scripts/check_messages_api.py --url http://127.0.0.1:18300 --key sk-test --prompts 8
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llmbench.client.request import Client, RequestParams, Timeouts  # noqa: E402
from llmbench.client.target import make_target  # noqa: E402
from llmbench.records.record import Record  # noqa: E402

WORDS = ("river stone cloud ember north maple garden window silver quiet harbor lantern "
         "meadow copper thunder orchard").split()


def prompts(n: int, words: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"Write a long story about {rng.choice(WORDS)}. Context: "
            + " ".join(rng.choice(WORDS) for _ in range(words)) for _ in range(n)]


async def one(client: Client, prompt: str, max_tokens: int, i: int) -> Record:
    rec = Record(f"check-{i}", scheduled=time.perf_counter())
    await client.send([{"role": "user", "content": prompt}], max_tokens, rec)
    return rec


def quartiles(values: list[float]) -> str:
    if not values:
        return "-"
    q = statistics.quantiles(values, n=4) if len(values) > 1 else values * 3
    return f"median {statistics.median(values):7.1f} ms  (p25 {q[0]:.1f}, p75 {q[2]:.1f})"


async def main(a: argparse.Namespace) -> int:
    base = a.url.rstrip("/")
    base = base if base.endswith("/v1") else base + "/v1"
    params = RequestParams(stream=True, temperature=0.0)
    chat = Client(make_target(base, a.model, api="openai-chat", api_key=a.key), params,
                  Timeouts(total_s=120))
    msgs = Client(make_target(base, a.model, api="anthropic", api_key=a.key), params,
                  Timeouts(total_s=120))
    got: dict[str, list[Record]] = {"openai-chat": [], "anthropic": []}
    load0 = os.getloadavg()
    async with chat, msgs:
        for i, p in enumerate(prompts(a.prompts, a.words, a.seed)):
            await one(chat, p, a.max_tokens, -i)                  # warm the prompt cache
            order = [("openai-chat", chat), ("anthropic", msgs)]
            for api, c in (order if i % 2 == 0 else order[::-1]):
                got[api].append(await one(c, p, a.max_tokens, i))
        if a.key:
            bare = Client(make_target(base, a.model, api="anthropic", api_key=""), params)
            async with bare:
                refused = await one(bare, "hello", 4, 999)
    load1 = os.getloadavg()
    print(f"{a.prompts} prompts of ~{a.words + 6} words, max_tokens {a.max_tokens}, one request "
          f"at a time; load average {load0[0]:.2f} before, {load1[0]:.2f} after")
    ttft: dict[str, list[float]] = {}
    failures = 0
    for api, recs in got.items():
        ok = [r for r in recs if r.ok]
        failures += len(recs) - len(ok)
        ttft[api] = [r.ttft * 1000 for r in ok if r.ttft is not None]
        lengths = sorted({r.output_tokens for r in ok})
        finishes = sorted({str(r.finish_reason) for r in ok})
        prompt_toks = sorted({r.prompt_tokens for r in ok})
        cached = sorted({r.cached_tokens for r in ok})
        print(f"{api:>12}: {len(ok)}/{len(recs)} ok  TTFT {quartiles(ttft[api])}")
        print(f"{'':>12}  output tokens {lengths} (asked {a.max_tokens}), finish {finishes}, "
              f"prompt tokens {prompt_toks[:4]}{'...' if len(prompt_toks) > 4 else ''}, "
              f"cached {cached[:4]}{'...' if len(cached) > 4 else ''}, token source "
              f"{sorted({r.output_tokens_source for r in ok})}")
        for r in recs:
            if not r.ok:
                print(f"{'':>12}  failed: {r.error_kind}: {r.error}")
    same = [x.output_tokens == y.output_tokens for x, y in zip(got["openai-chat"], got["anthropic"])]
    print(f"same reply length on both APIs: {sum(same)}/{len(same)}")
    d = statistics.median(ttft["anthropic"]) - statistics.median(ttft["openai-chat"])
    print(f"TTFT median, Messages - chat: {d:+.1f} ms")
    # the same prompt back to back: a load that drifts over the run cancels out of each pair
    pairs = [y.ttft - x.ttft for x, y in zip(got["openai-chat"], got["anthropic"])
             if x.ok and y.ok and x.ttft is not None and y.ttft is not None]
    if pairs:
        print(f"TTFT, Messages - chat, per prompt: median {statistics.median(pairs) * 1000:+.1f} ms "
              f"over {len(pairs)} pairs")
    if a.key:
        print(f"without the key: {refused.status} {refused.error_kind}: {refused.error}")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True, help="the server's root or .../v1")
    ap.add_argument("--model", default="gemma-3-270m")
    ap.add_argument("--prompts", type=int, default=12)
    ap.add_argument("--words", type=int, default=48)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--key", default=None, help="the server's --api-key")
    sys.exit(asyncio.run(main(ap.parse_args())))

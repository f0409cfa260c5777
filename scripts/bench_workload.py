"""Loading and sampling a large ShareGPT-format file: time and peak memory.

  python scripts/bench_workload.py --conversations 100000 --sample 1000
  python scripts/bench_workload.py --conversations 100000 --sample 1000 --multi-turn

Writes a synthetic ShareGPT file of the given size (varied lengths, 1-6 turns) to a temporary
folder, then times llmbench's vLLM-style single-turn sampling (streaming parse, byte offsets,
seeded shuffle, filters) or whole-conversation loading, and reports peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from llmbench.workload import WorkloadSpec, build_workload, load_tokenizer  # noqa: E402

WORDS = "the model server token stream answer request user time load first slot queue".split()


def write_file(path: str, n: int) -> None:
    rng = random.Random(1)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("[")
        for i in range(n):
            turns = []
            for _ in range(rng.randint(1, 6)):
                turns.append({"from": "human", "value": " ".join(rng.choices(WORDS, k=rng.randint(3, 300)))})
                turns.append({"from": "gpt", "value": " ".join(rng.choices(WORDS, k=rng.randint(3, 400)))})
            fh.write(("," if i else "") + json.dumps({"id": f"c{i}", "conversations": turns}))
        fh.write("]")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--conversations", type=int, default=100000)
    ap.add_argument("--sample", type=int, default=1000)
    ap.add_argument("--multi-turn", action="store_true")
    ap.add_argument("--tokenizer", default="approx")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "sharegpt.json")
        t = time.perf_counter()
        write_file(path, a.conversations)
        size_mb = os.path.getsize(path) / 1e6
        print(f"wrote {a.conversations} conversations, {size_mb:.0f} MB, in {time.perf_counter() - t:.1f} s")
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        tok = load_tokenizer(a.tokenizer)
        t = time.perf_counter()
        wl = build_workload(WorkloadSpec(dataset=path, count=a.sample, multi_turn=a.multi_turn,
                                         limit=a.sample if a.multi_turn else None,
                                         turns=8 if a.multi_turn else 1), tok)
        took = time.perf_counter() - t
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(f"{'whole conversations' if a.multi_turn else 'vLLM single-turn sampling'}: "
              f"{len(wl.conversations)} sampled in {took:.2f} s; peak RSS {rss0:.0f} -> {rss1:.0f} MB "
              f"(file {size_mb:.0f} MB); fingerprint {wl.fingerprint}")


if __name__ == "__main__":
    main()

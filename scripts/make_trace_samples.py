"""Write the small sample traces in datasets/ (one per format ``run --trace`` reads).

    python scripts/make_trace_samples.py [--out datasets]

Seeded, so the files are the same on every run. Shapes follow the published traces: Mooncake's
requests share leading 512-token blocks (a few system prompts, growing conversations), Azure's
have bursty arrivals and long contexts with short replies, the plain JSONL has chat sessions.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from datetime import datetime, timedelta
from pathlib import Path


def mooncake(rng: random.Random, n: int = 40) -> list[dict]:
    rows, t_ms, next_id = [], 0, 100
    prefixes = [[1, 2], [3, 4, 5], [6]]          # shared leading blocks (system prompts)
    for _ in range(n):
        t_ms += int(rng.expovariate(1 / 250))    # ~4 requests/s
        head = rng.choice(prefixes)
        own = list(range(next_id, next_id + rng.randint(0, 3)))
        next_id += len(own)
        blocks = head + own
        length = 512 * (len(blocks) - 1) + rng.randint(1, 512)
        rows.append({"timestamp": t_ms, "input_length": length,
                     "output_length": rng.randint(16, 256), "hash_ids": blocks})
    return rows


def azure(rng: random.Random, n: int = 40) -> list[list]:
    t = datetime(2023, 11, 16, 18, 15, 46)
    rows = []
    for _ in range(n):
        t += timedelta(microseconds=int(rng.expovariate(1 / 0.25) * 1e6))
        rows.append([t.strftime("%Y-%m-%d %H:%M:%S.%f") + "0", rng.randint(100, 4000),
                     rng.randint(5, 400)])
    return rows


def sessions(rng: random.Random, n_sessions: int = 8) -> list[dict]:
    rows = []
    for s in range(n_sessions):
        t_ms = int(rng.uniform(0, 8000))
        for turn in range(rng.randint(1, 4)):
            rows.append({"timestamp": t_ms, "session_id": f"s{s}",
                         "messages": [{"role": "user",
                                       "content": f"Question {turn + 1} of session {s}: "
                                                  + rng.choice(["explain caching",
                                                                "summarise the last answer",
                                                                "give an example",
                                                                "what are the trade-offs"])}],
                         "output_length": rng.randint(16, 128)})
            t_ms += int(rng.uniform(1000, 4000))   # the user's think time in the original
    rows += [{"timestamp": int(rng.uniform(0, 10000)), "input_length": rng.randint(50, 800),
              "output_length": rng.randint(16, 128)} for _ in range(8)]
    return sorted(rows, key=lambda r: r["timestamp"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "datasets"))
    out = Path(ap.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "trace_mooncake_sample.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in mooncake(random.Random(1)))
    with open(out / "trace_azure_sample.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["TIMESTAMP", "ContextTokens", "GeneratedTokens"])
        w.writerows(azure(random.Random(2)))
    with open(out / "trace_sessions_sample.jsonl", "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in sessions(random.Random(3)))
    print(f"wrote 3 sample traces to {out}")


if __name__ == "__main__":
    main()

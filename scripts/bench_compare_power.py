"""How often `llmbench compare` raises a false alarm, and how often it catches a real change.

Runs pairs of short runs against the built-in mock (1 slot... see MOCK below) and compares each
pair with the same code `llmbench compare` uses:

- A/A pairs: two runs against the same mock settings. Any change flagged is a false alarm.
  Reported two ways: per metric, how often the 95 % interval excludes 0 on either side (the
  test at the 95 % level; target <= 5 %), and per pair, how often the gate
  (--max-regression 10 %) fired on anything.
- Known changes: the candidate's tokens are X % slower (token rate x (1 - X), so ITL / (1 - X);
  with short prompts and no think time the output throughput drops by about X too), X = 10,
  25, 40 %. Reported: how often the gate flags the throughput drop (target: 25 % flagged in
  >= 90 % of pairs) and any regression at all.

Both a single-level run (`llmbench run --concurrency C --duration D`) and a ramp-to-ramp
compare (`llmbench ramp --users ...`). The hold / duration used is printed: the detection rate
holds for that length (longer holds detect smaller changes).

    python scripts/bench_compare_power.py                 # about 15 minutes on 2 busy cores
    python scripts/bench_compare_power.py --pairs 10 --ramp-pairs 5
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import subprocess
import urllib.request
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ.setdefault("LLMBENCH_TOKENIZER", "approx")
from llmbench.cli.app import app  # noqa: E402
from llmbench.analysis.compare import compare, load_runs  # noqa: E402
from llmbench.report import auto  # noqa: E402

# compare reads run.json and requests.jsonl only: skip each run's HTML report (charts take
# longer than a short run)
auto.write_report = lambda run_dir: None

MOCK = dict(ttft_ms=40.0, itl_ms=10.0, jitter=0.3, parallel=2, models=["m"])
CHANGES = (0.10, 0.25, 0.40)
METRICS = ("ttft.p95", "itl.p95", "output_throughput")
GATE = 0.10


def llmbench(*args: str) -> None:
    """The CLI in this process: a new interpreter per run cost more than the run itself."""
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            app(list(args), standalone_mode=False)
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise SystemExit(f"llmbench {args[0]} failed ({exc.code}): {out.getvalue()[-400:]}")


def one(kind: str, url: str, out: Path, args: argparse.Namespace, seed: int) -> Path:
    out.mkdir(parents=True)
    common = ["--url", url, "--model", "m", "--prompt-tokens", "10", "--output-tokens",
              str(args.tokens), "--seed", str(seed), "--out", str(out)]
    if kind == "run":
        llmbench("run", *common, "--concurrency", str(args.concurrency),
                 "--duration", f"{args.duration}s")
    else:
        llmbench("ramp", *common, "--users", args.users, "--ramp-in", "1s",
                 "--hold", f"{args.hold}s", "--think", "0", "--turns", "1",
                 "--threshold", "ttft.p95<=60s")
    return next(p for p in out.iterdir() if p.is_dir())


def judge(a: Path, b: Path) -> dict:
    res = compare(load_runs([a, b]), METRICS, max_regression=GATE)
    per_metric = {}
    for c in res.checks:
        if c.metric in METRICS and c.ci:
            lo, hi = c.ci
            per_metric.setdefault(c.metric, []).append(not (lo <= 0 <= hi))
    thr = [c for c in res.checks if c.metric == "output_throughput"]
    return {"gate": bool(res.regressions), "per_metric": per_metric,
            "thr_flagged": any(c.regression for c in thr),
            "thr_change": [c.change for c in thr if c.change is not None]}


class Mock:
    """The mock in its own process (its own interpreter lock: in this one, its timing would
    share a core's worth of Python with the runs being measured); settings changed over HTTP."""

    def __init__(self) -> None:
        code = ("import json, sys, time; sys.path.insert(0, sys.argv[1]);"
                "from llmbench.mock_server import MockConfig, MockServer;"
                "m = MockServer(MockConfig(**json.loads(sys.argv[2]))); m.__enter__();"
                "print(m.url, flush=True); time.sleep(1e9)")
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(ROOT), json.dumps(MOCK)],
                                     stdout=subprocess.PIPE, text=True)
        self.url = self.proc.stdout.readline().strip()

    def configure(self, **changes: float) -> None:
        req = urllib.request.Request(self.url + "/admin/config", json.dumps(changes).encode(),
                                     {"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=10).read()

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


def campaign(kind: str, m: Mock, tmp: Path, pairs: int, changes: tuple[float, ...],
             args: argparse.Namespace) -> None:
    url = m.url + "/v1"
    seed = 0
    t0 = time.time()
    aa = []
    for i in range(pairs):
        m.configure(itl_ms=MOCK["itl_ms"])
        a = one(kind, url, tmp / f"{kind}-aa{i}a", args, seed := seed + 1)
        b = one(kind, url, tmp / f"{kind}-aa{i}b", args, seed := seed + 1)
        aa.append(judge(a, b))
    what = (f"run --concurrency {args.concurrency} --duration {args.duration}s" if kind == "run"
            else f"ramp --users {args.users} --hold {args.hold}s --think 0")
    print(f"\n== {kind}: {what}, mock {MOCK}, {args.tokens} output tokens ==")
    print(f"A/A pairs: {pairs}")
    tests = {}
    for r in aa:
        for metric, flags in r["per_metric"].items():
            tests.setdefault(metric, []).extend(flags)
    for metric, flags in tests.items():
        print(f"  {metric:<18} 95% interval excludes 0: {sum(flags)}/{len(flags)} "
              f"= {100 * sum(flags) / len(flags):.1f}%  (target <= 5%)")
    all_flags = [f for v in tests.values() for f in v]
    print(f"  all metrics        95% interval excludes 0: {sum(all_flags)}/{len(all_flags)} "
          f"= {100 * sum(all_flags) / max(len(all_flags), 1):.1f}%")
    g = sum(r["gate"] for r in aa)
    print(f"  gate --max-regression {GATE * 100:.0f}% fired (any metric): {g}/{pairs} "
          f"= {100 * g / pairs:.1f}%")
    for x in changes:
        res = []
        for i in range(pairs):
            m.configure(itl_ms=MOCK["itl_ms"])
            a = one(kind, url, tmp / f"{kind}-c{x}-{i}a", args, seed := seed + 1)
            m.configure(itl_ms=MOCK["itl_ms"] / (1 - x))
            b = one(kind, url, tmp / f"{kind}-c{x}-{i}b", args, seed := seed + 1)
            res.append(judge(a, b))
        n = len(res)
        det = sum(r["thr_flagged"] for r in res)
        changes_seen = [c for r in res for c in r["thr_change"]]
        mean_change = sum(changes_seen) / max(len(changes_seen), 1)
        print(f"{x * 100:.0f}% slower tokens: {n} pairs, throughput change measured "
              f"{mean_change * 100:+.1f}% on average; throughput drop flagged (gate "
              f"{GATE * 100:.0f}%) in {det}/{n} = {100 * det / n:.0f}%; any regression in "
              f"{sum(r['gate'] for r in res)}/{n}")
    m.configure(itl_ms=MOCK["itl_ms"])
    print(f"({time.time() - t0:.0f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=12, help="A/A pairs and pairs per change (run)")
    ap.add_argument("--ramp-pairs", type=int, default=8, help="the same for ramps (0: skip)")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--duration", type=float, default=4.0, help="run length, s")
    ap.add_argument("--users", default="2,4")
    ap.add_argument("--hold", type=float, default=4.0, help="ramp hold per step, s")
    ap.add_argument("--tokens", type=int, default=24)
    args = ap.parse_args()
    m = Mock()
    try:
        with tempfile.TemporaryDirectory() as d:
            if args.pairs:
                campaign("run", m, Path(d), args.pairs, CHANGES, args)
            if args.ramp_pairs:
                campaign("ramp", m, Path(d), args.ramp_pairs, (0.25,), args)
    finally:
        m.close()


if __name__ == "__main__":
    main()

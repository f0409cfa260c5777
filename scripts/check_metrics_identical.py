"""Every figure llmbench derives from records, written bit for bit, to show that a refactor of
the metric definitions changed no number.

    python scripts/check_metrics_identical.py --save /tmp/before.json     # on the old code
    python scripts/check_metrics_identical.py --compare /tmp/before.json  # on the new code

Inputs: every run folder with a requests.jsonl under results/examples and ../shared/real-runs
(or the folders given), and seeded synthetic records with every kind of field (failures,
warm-up, interrupted, multi-turn, token counts, reasoning, tools, structured replies,
embeddings, backends, probe paths). Outputs fingerprinted: the summary (on a RecordStore and
on a list of Records, with extra percentiles, "within" shares and goodput SLOs), each ramp
step's summary, steady state and knee, the verdict, backends, the timeline, the latencies
reports and compare read (results.latencies), the request table (results.table), the router
A/B step, Little's law and the HTML report's bytes. Floats are compared by their bits
(``float.hex``), arrays by their bytes.

A change meant to move some figures states them: ``--expected FILE`` (TOML, repeatable) lists
``[[expected]]`` entries, each a ``figure`` pattern (fnmatch, on the figure as printed:
``verdict.evidence[]``), an optional ``inputs`` pattern and the ``reason``. The comparison then
exits 0 when every difference is one of them and 1 otherwise, and prints the expected ones with
their reasons apart from the rest (scripts/metrics_expected_typed.toml: the typed contract's).
A folder saved under another checkout's path is matched by its name.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from llmbench.analysis import (backends, metrics, router_ab, slo, stats, stepstats,  # noqa: E402
                               timeline, verdict)
from llmbench.records.record import Record, load_records  # noqa: E402
from llmbench.records.store import RecordStore  # noqa: E402
from llmbench.results import latencies, table  # noqa: E402

PCTS = (50.0, 90.0, 95.0, 99.0, 99.9)
WITHIN = (("ttft", 500.0), ("e2el", 2000.0), ("itl", 20.0), ("itl_per_token", 15.0),
          ("max_gap", 100.0))
SLO = {"ttft": 500.0, "tpot": 30.0, "e2el": 3000.0}
THRESHOLDS = ("ttft.p95<=60ms", "itl.p50<=20ms", "e2el.p99<=300ms")


try:                                # the typed result contract (Summary, Step, Verdict...)
    from llmbench.results.contract import Part  # noqa: E402
    from llmbench.results.schema import Step  # noqa: E402
    TYPED = True
except ImportError:                 # code from before it: results travel as dicts
    Part, Step, TYPED = (), None, False  # type: ignore[assignment,misc]


def bits(obj: Any) -> Any:
    """``obj`` with every float as its exact bits and every array as a hash of its bytes; a
    part of the typed result as the run.json it writes (so figures compare across the change
    from dicts to the typed contract)."""
    if Part and isinstance(obj, Part):
        return bits(obj.to_dict())
    if isinstance(obj, float):
        return obj.hex() if math.isfinite(obj) else repr(obj)
    if isinstance(obj, np.floating):
        return bits(float(obj))
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.ndarray):
        return f"{obj.dtype}{obj.shape}:" + hashlib.sha256(np.ascontiguousarray(obj).tobytes()
                                                           ).hexdigest()[:16]
    if isinstance(obj, dict):
        return {str(k): bits(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [bits(v) for v in obj]
    if hasattr(obj, "__dataclass_fields__"):
        return {k: bits(getattr(obj, k)) for k in obj.__dataclass_fields__}
    return obj


def synthetic(n: int = 600, seed: int = 7) -> list[Record]:
    """Records with every kind of field the figures read (test_record_store.varied and more:
    tool calls, structured replies, embeddings, probe paths, steps with hold windows)."""
    sys.path.insert(0, str(ROOT))
    from tests.helpers.records import varied
    recs = varied(n, seed)
    rng = random.Random(seed)
    for i, r in enumerate(recs):
        r.path = ("router", "direct")[i % 2]
        if r.ok and r.token_times:
            if i % 7 == 0:
                r.first_tool = r.token_times[0] + rng.random() * 0.001
            if i % 5 == 0:
                r.output_valid = bool(i % 10)
        if r.step is None:
            r.step = (i // 100) % 6
    return recs


def as_steps(steps: list[dict[str, Any]]) -> list[Any]:
    """Steps as the verdict and the knee take them: typed where the contract is typed."""
    if not TYPED:
        return steps
    plain = json.loads(json.dumps(steps, default=lambda o: o.to_dict()))
    return [Step.from_dict(d) for d in plain]


def at(step: Any, name: str) -> Any:
    return step[name] if isinstance(step, dict) else getattr(step, name)


def folder_steps(run: dict[str, Any]) -> list[Any]:
    return as_steps([s for s in run.get("steps") or [] if s.get("hold_start") is not None])


def synthetic_steps(recs: list[Record]) -> list[dict[str, Any]]:
    """Hold windows over the synthetic records' steps, as a ramp's run.json holds them."""
    out = []
    for idx in sorted({r.step for r in recs if r.step is not None}):
        mine = [r for r in recs if r.step == idx]
        a, b = min(r.start for r in mine), max(r.start for r in mine)
        hold_start, hold_end = a + (b - a) * 0.2, b + 0.001
        window = [r for r in mine if hold_start <= r.start < hold_end and not r.warmup]
        s = metrics.summarize(window, t0=hold_start, t_end=hold_end)
        out.append({"index": idx, "load": float(idx + 1), "ramp_start": a,
                    "hold_start": hold_start, "hold_end": hold_end, "held": idx < 3,
                    "checks": slo.check_all([slo.parse_threshold(t) for t in THRESHOLDS], s),
                    "summary": s})
        out[-1]["held"] = all(at(c, "ok") for c in out[-1]["checks"])
    return as_steps(out)


def figures(name: str, recs: list[Record], run: dict[str, Any] | None,
            folder: Path | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    store = RecordStore.of(recs)
    out["summary_store"] = metrics.summarize(RecordStore.of(recs))
    out["summary_records"] = metrics.summarize(list(recs))
    out["summary_asked"] = metrics.summarize(RecordStore.of(recs), percentiles=PCTS,
                                            within=WITHIN, goodput_slo_ms=SLO, stall_s=0.05)
    out["per_request"] = [metrics.per_request(r) for r in recs if r.ok and r.token_times]
    steps = folder_steps(run) if run else synthetic_steps(recs)
    st_out = []
    for s in steps:
        index, a, b = at(s, "index"), at(s, "hold_start"), at(s, "hold_end")
        w = store.in_window(index, a, b)
        st_out.append({
            "window_n": len(w),
            "summary": metrics.summarize(w, t0=a, t_end=b),
            "steady": stepstats.steady_state(list(store), index, a, b),
        })
    out["steps"] = st_out
    if steps:
        out["knee"] = stepstats.knee(steps, list(store))
        out["verdict"] = verdict.explain(steps, list(store))
        out["little"] = stats.served_at_once(list(store), at(steps[-1], "hold_start"),
                                             at(steps[-1], "hold_end"), 0.05)
    out["backends"] = backends.backends(store)
    plain = list(store)
    t0 = min(r.scheduled for r in plain)
    t_end = max(r.done for r in plain)
    out["timeline"] = timeline.build(store, t0, t_end, steps=steps)
    out["rows"] = [table.request_row(r, t0) for r in plain]
    if any(r.path for r in plain):
        for r in plain:
            r.step = 0 if r.step is None else r.step
        out["router_ab"] = router_ab.evaluate_step(0, 4, [r for r in plain if r.step == 0],
                                                   n_boot=200)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "requests.jsonl"
        path.write_text("".join(json.dumps(r.to_json()) + "\n" for r in recs))
        lat = latencies.read_latencies(path)
        out["latencies"] = {k: getattr(lat, k) for k in lat.__dataclass_fields__ if k != "path"}
        out["latencies_itls"] = lat.itls()
    if folder is not None:
        from llmbench.report import html
        out["report_html"] = hashlib.sha256(html.render(folder).encode()).hexdigest()
    return out


def inputs(folders: list[Path]) -> list[tuple[str, list[Record], dict | None, Path | None]]:
    got = []
    for f in folders:
        req = f / "requests.jsonl"
        if not req.exists():
            continue
        run = json.loads((f / "run.json").read_text()) if (f / "run.json").exists() else None
        got.append((str(f), load_records(req), run, f))
    for seed in (7, 11):
        got.append((f"synthetic-{seed}", synthetic(600, seed), None, None))
    return got


def default_folders() -> list[Path]:
    roots = [ROOT / "results" / "examples", ROOT.parent.parent / "shared" / "real-runs",
             Path("/work/shared/real-runs")]
    seen: dict[Path, None] = {}
    for root in roots:
        if root.exists():
            for p in sorted(root.rglob("requests.jsonl")):
                seen[p.parent.resolve()] = None
    return list(seen)


def diff(a: Any, b: Any, where: str, out: list[tuple[str, Any, Any]]) -> None:
    if type(a) is not type(b):
        out.append((where, a, b))
    elif isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                out.append((f"{where}.{k}", a.get(k, "<absent>"), b.get(k, "<absent>")))
            else:
                diff(a[k], b[k], f"{where}.{k}", out)
    elif isinstance(a, list):
        if len(a) != len(b):
            out.append((where, f"{len(a)} items", f"{len(b)} items"))
        for i, (x, y) in enumerate(zip(a, b)):
            diff(x, y, f"{where}[{i}]", out)
    elif a != b:
        out.append((where, a, b))


def section(where: str) -> str:
    """'<input>.steps[2].steady.ttft_p50_ms[0]' -> 'steps[].steady.ttft_p50_ms[]'."""
    import re
    rest = where.split(".", 1)[1] if "." in where else where
    for name in sorted(NAMES, key=len, reverse=True):
        if where.startswith("." + name + ".") or where.startswith(name + "."):
            rest = where[len(name) + 1:].lstrip(".")
            break
    return re.sub(r"\[\d+\]", "[]", rest)


def as_float(v: Any) -> float | None:
    try:
        return float.fromhex(v) if isinstance(v, str) else None
    except ValueError:
        return None


NAMES: list[str] = []


def load_expected(path: Path) -> list[dict[str, str]]:
    """The [[expected]] entries of a TOML file: figure (a pattern), reason, optional inputs."""
    import tomllib
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        sys.exit(f"--expected {path}: {exc}")
    out = doc.get("expected")
    if not isinstance(out, list) or not all(isinstance(e, dict) and isinstance(e.get("figure"), str)
                                            and isinstance(e.get("reason"), str) for e in out):
        sys.exit(f"--expected {path}: needs [[expected]] tables, each with figure and reason")
    return out


def which_expected(where: str, expected: list[dict[str, str]]) -> int | None:
    """The first entry that explains the difference at ``where``, if any."""
    import fnmatch
    sec = section(where)
    name = next((n for n in sorted(NAMES, key=len, reverse=True)
                 if where.lstrip(".").startswith(n + ".")), "")
    for i, e in enumerate(expected):
        if fnmatch.fnmatchcase(sec, e["figure"]) and fnmatch.fnmatchcase(name, e.get("inputs") or "*"):
            return i
    return None


def same_names(before: dict[str, Any], got: dict[str, Any]) -> dict[str, Any]:
    """``before`` with a folder saved under another checkout's path (results/examples of a
    git archive) named as this run names it, when the folder's name matches one input only."""
    out = {}
    for name, v in before.items():
        if name not in got:
            tail = Path(name).name
            match = [n for n in got if Path(n).name == tail and n not in before]
            name = match[0] if len(match) == 1 else name
        out[name] = v
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folders", nargs="*", type=Path)
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--save", type=Path)
    g.add_argument("--compare", type=Path)
    ap.add_argument("--expected", type=Path, action="append", default=[],
                    help="TOML list of differences a change means to make, with reasons")
    a = ap.parse_args()
    expected = [e for f in a.expected for e in load_expected(f)]
    got = {name: bits(figures(name, recs, run, folder))
           for name, recs, run, folder in inputs(a.folders or default_folders())}
    n_values = sum(len(json.dumps(v)) for v in got.values())
    if a.save:
        a.save.write_text(json.dumps(got, indent=0, sort_keys=True))
        print(f"saved {len(got)} inputs ({n_values:,} characters of figures) to {a.save}")
        return 0
    before = same_names(json.loads(a.compare.read_text()), got)
    NAMES.extend(before)
    problems: list[tuple[str, Any, Any]] = []
    diff(before, json.loads(json.dumps(got)), "", problems)
    meant: dict[int, list[tuple[str, Any, Any]]] = {}
    for p in list(problems):
        i = which_expected(p[0], expected)
        if i is not None:
            meant.setdefault(i, []).append(p)
            problems.remove(p)
    by: dict[str, list[tuple[str, Any, Any]]] = {}
    for p in problems:
        by.setdefault(section(p[0]), []).append(p)
    for name in got:
        mine = [p for p in problems if p[0].lstrip(".").startswith(name + ".")]
        known = sum(1 for ps in meant.values() for p in ps if p[0].lstrip(".").startswith(name + "."))
        print(f"{name}: " + ("bit-identical" if not mine else f"{len(mine)} values differ")
              + (f" ({known} expected differences)" if known else ""))
    if expected:
        print("expected differences (count: reason):")
        for i, e in enumerate(expected):
            pat = e["figure"] + (f" in {e['inputs']}" if e.get("inputs") else "")
            print(f"  {pat}: {len(meant.get(i, []))}: {e['reason']}" if i in meant else
                  f"  {pat}: none seen (the entry is stale or too wide?)")
    if by:
        print("differences by figure (count, largest absolute and relative difference):")
    for sec, ps in sorted(by.items()):
        deltas = [(abs(x - y), abs(x - y) / max(abs(x), 1e-300)) for _, x0, y0 in ps
                  if (x := as_float(x0)) is not None and (y := as_float(y0)) is not None]
        worst = (f"  max |d| {max(d for d, _ in deltas):.3g}, max rel {max(r for _, r in deltas):.2g}"
                 if deltas else f"  e.g. {ps[0][1]!r} -> {ps[0][2]!r}")
        print(f"  {sec}: {len(ps)}{worst}")
    n_meant = sum(len(v) for v in meant.values())
    print(f"{len(got)} inputs: " + ("bit-identical" if not problems else
                                    f"{len(problems)} differences")
          + (f" besides {n_meant} expected" if n_meant else ""))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

"""Does the twin behave like the real server? Fit the mock from a run folder, replay the same ramp
against it (a mock child process on a free loopback port) and print, per step, the real and the
twin's TTFT p50/p95, ITL p50, output throughput and whether the step held.

    python scripts/validate_twin.py ../shared/real-runs/llamacpp-gemma270m-np4
    python scripts/validate_twin.py RUN_np4 --parallel 1 --against RUN_np1   # cross-prediction

Exit 0 when the twin held as many users as the real server and its TTFT p50 and ITL p50 are
within --tolerance on every step both held; 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmbench.mock_server.engine import MockConfig  # noqa: E402
from llmbench.mock_server.fit import describe, fit_run, save_profile  # noqa: E402
from llmbench.mock_server.server import MockProcess  # noqa: E402


def _fmt_range(v: Any) -> str:
    if isinstance(v, (list, tuple)):
        return f"{v[0]:g}" if v[0] == v[1] else f"{v[0]:g}-{v[1]:g}"
    return f"{v:g}"


def ramp_args(run: dict[str, Any]) -> list[str]:
    """The ramp options of the real run, from its run.json."""
    cfg = run.get("config") or {}
    rp = cfg.get("ramp") or {}
    req = cfg.get("request") or {}
    wl = run.get("workload") or {}
    params = wl.get("params") or {}
    if wl.get("source") not in (None, "synthetic"):
        raise SystemExit(f"error: {wl.get('source')} workloads are not replayed yet; "
                         "validate_twin replays synthetic ramps")
    args = ["--users", ",".join(f"{s:g}" for s in rp.get("steps", [1, 2, 4])),
            "--by", rp.get("by", "users"),
            "--ramp-in", f"{rp.get('ramp_in_s', 3):g}s", "--hold", f"{rp.get('hold_s', 20):g}s",
            "--seed", str(rp.get("seed", wl.get("seed", 0)))]
    think = rp.get("think_s") or [0, 0]
    args += ["--think", "0" if not think[1] else f"{think[0]:g}s-{think[1]:g}s"]
    for t in rp.get("thresholds") or []:
        args += ["--threshold", t]
    if params.get("prompt_tokens"):
        args += ["--prompt-tokens", _fmt_range(params["prompt_tokens"])]
    if params.get("output_tokens"):
        args += ["--output-tokens", _fmt_range(params["output_tokens"])]
    if params.get("turns"):
        args += ["--turns", str(params["turns"])]
    if req.get("ignore_eos"):
        args += ["--ignore-eos"]
    if rp.get("keep_going"):
        args += ["--keep-going"]
    return args


def replay(run: dict[str, Any], cfg: MockConfig, out: Path) -> dict[str, Any]:
    model = ((run.get("config") or {}).get("target") or {}).get("model") or cfg.models[0]
    with MockProcess(cfg) as m:
        cmd = [sys.executable, "-m", "llmbench.cli", "ramp", "--url", m.url + "/v1",
               "--model", model, *ramp_args(run), "--out", str(out), "--no-progress"]
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(ROOT))
    runs = sorted(q for q in out.iterdir() if (q / "run.json").exists())
    if not runs:
        raise SystemExit("error: the replay wrote no run folder:\n" + p.stdout[-2000:] + p.stderr[-2000:])
    return json.loads((runs[-1] / "run.json").read_text())


def held_users(run: dict[str, Any]) -> float:
    return max((s["load"] for s in run["steps"] if s["held"]), default=0)


def within(a: float | None, b: float | None, tol: float) -> bool:
    return a is not None and b is not None and abs(b - a) <= tol * abs(a)


def table(real: dict[str, Any], twin: dict[str, Any], tol: float) -> tuple[str, bool]:
    head = (f"{'users':>5} | {'held':>9} | {'TTFT p50 ms':>15} | {'TTFT p95 ms':>15} | "
            f"{'ITL p50 ms':>13} | {'out tok/s':>11} | within {tol:.0%}")
    lines = [head, "-" * len(head)]
    ok = held_users(real) == held_users(twin)
    twin_steps = {s["load"]: s for s in twin["steps"]}
    for s in real["steps"]:
        t = twin_steps.get(s["load"])
        a = s["summary"]
        b = t["summary"] if t else {}
        both_held = bool(t and s["held"] and t["held"])
        good = both_held and within(a.get("p50_ttft_ms"), b.get("p50_ttft_ms"), tol) and \
            within(a.get("p50_itl_ms"), b.get("p50_itl_ms"), tol)
        if both_held and not good:
            ok = False

        def pair(key: str, fmt: str = "{:.0f}") -> str:
            x, y = a.get(key), b.get(key)
            return f"{fmt.format(x) if x is not None else '-'} / {fmt.format(y) if y is not None else '-'}"
        held = f"{'yes' if s['held'] else 'no'} / {('yes' if t['held'] else 'no') if t else '-'}"
        mark = ("yes" if good else "NO") if both_held else "(not held)"
        lines.append(f"{s['load']:>5g} | {held:>9} | {pair('p50_ttft_ms'):>15} | "
                     f"{pair('p95_ttft_ms'):>15} | {pair('p50_itl_ms', '{:.1f}'):>13} | "
                     f"{pair('output_throughput', '{:.1f}'):>11} | {mark}")
    lines.append(f"users held: real {held_users(real):g}, twin {held_users(twin):g}"
                 f"  (real / twin in every cell)")
    return "\n".join(lines), ok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path, help="the real server's run folder to fit from")
    ap.add_argument("--against", type=Path, help="compare with this run instead (same workload)")
    ap.add_argument("--parallel", type=int, help="override the fitted slots")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override any other fitted setting (repeatable)")
    ap.add_argument("--tolerance", type=float, default=0.25)
    ap.add_argument("--save-profile", type=Path)
    ap.add_argument("--out", type=Path, help="keep the replay's run folder here")
    a = ap.parse_args()
    fit = fit_run(a.run_dir)
    print(describe(fit))
    if a.save_profile:
        save_profile(fit, a.save_profile)
    cfg = MockConfig()
    cfg.update(fit.mock)
    changes: dict[str, Any] = {}
    if a.parallel is not None:
        changes["parallel"] = a.parallel
    for kv in a.set:
        k, _, v = kv.partition("=")
        changes[k] = json.loads(v) if v[:1] in "[{" or v in ("true", "false") else v
    cfg.update(changes)
    real_dir = a.against or a.run_dir
    real = json.loads((real_dir / "run.json").read_text())
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        twin = replay(real, cfg, a.out)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            twin = replay(real, cfg, Path(tmp))
    text, ok = table(real, twin, a.tolerance)
    print(f"real: {real_dir}   twin: fitted from {a.run_dir}"
          + (f", {changes}" if changes else ""))
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

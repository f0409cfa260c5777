"""The run folder and its versioned run.json.

<out>/<YYYYmmdd-HHMMSS>-<kind>[-label]/
  run.json        configuration (no secrets), environment, summary, steps, verdict
  requests.jsonl  one record per request, appended as requests finish
  timeline.jsonl  per-second state (ramp)
"""

from __future__ import annotations

import json
import os
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1


class RunFolderError(ValueError):
    pass


def new_run_dir(out: str | Path, kind: str, label: str | None = None) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S")
    name = f"{stamp}-{kind}"
    if label:
        name += "-" + re.sub(r"[^A-Za-z0-9_.=-]+", "_", label)[:60]
    base = Path(out)
    base.mkdir(parents=True, exist_ok=True)
    path = base / name
    n = 1
    while path.exists():
        n += 1
        path = base / f"{name}-{n}"
    path.mkdir()
    return path


def write_json(path: str | Path, obj: Any) -> None:
    """Atomically: a crash mid-write never leaves a torn run.json."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(obj, fh, indent=2, default=_default, allow_nan=False)
        fh.write("\n")
    os.replace(tmp, path)


def _default(o: Any) -> Any:
    if isinstance(o, (set, tuple)):
        return list(o)
    if hasattr(o, "__dataclass_fields__"):
        from dataclasses import asdict
        return asdict(o)
    return str(o)


def clean_nan(obj: Any) -> Any:
    """Valid JSON: NaN (no value) becomes null; +-inf becomes the string "inf"/"-inf" (as vLLM
    writes an infinite request rate), so an infinite p95 "incl. failures" is not read as missing."""
    if isinstance(obj, float):
        if obj != obj:
            return None
        if obj in (float("inf"), float("-inf")):
            return "inf" if obj > 0 else "-inf"
        return obj
    if isinstance(obj, dict):
        return {k: clean_nan(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [clean_nan(v) for v in obj]
    return obj


def environment() -> dict[str, Any]:
    from . import __version__
    return {"llmbench": __version__, "python": sys.version.split()[0],
            "platform": platform.platform(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "argv": scrub_argv(sys.argv[1:])}


SECRET_FLAGS = ("--api-key", "--header")


def scrub_argv(argv: list[str]) -> list[str]:
    """The command line without secrets: values of --api-key and --header are replaced."""
    out: list[str] = []
    hide_next = False
    for a in argv:
        if hide_next:
            out.append("***" if not a.count("=") or a.startswith("--api-key") else a.split("=", 1)[0] + "=***")
            hide_next = False
            continue
        flag = a.split("=", 1)[0]
        if flag in SECRET_FLAGS:
            if "=" in a:
                out.append(flag + "=***")
            else:
                out.append(a)
                hide_next = True
            continue
        out.append(a)
    return out


def load_run(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    f = path / "run.json"
    if not f.is_file():
        raise RunFolderError(f"{path}: no run.json here; give a run folder made by llmbench run/ramp")
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{f}:{exc.lineno}: run.json is not valid JSON ({exc.msg})")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RunFolderError(f"{f}: schema version {version} is not the {SCHEMA_VERSION} this "
                             "llmbench reads; re-run it or use a matching llmbench version")
    return data


def headline(run: dict[str, Any]) -> str:
    kind = run.get("kind")
    if run.get("status") == "failed":
        return "failed: " + str(run.get("error", ""))[:80]
    if kind == "ramp":
        return (run.get("verdict") or {}).get("result", "")
    if kind == "run":
        s = run.get("summary") or {}
        ttft = s.get("median_ttft_ms")         # None when no request succeeded
        return (f"{s.get('completed')} ok, {s.get('failed')} failed, TTFT p50 "
                + ("–" if ttft is None else f"{float(ttft):.0f} ms")
                + f", {s.get('output_throughput') or 0:.1f} tok/s")
    if kind == "probe":
        b = run.get("router_bound")
        return f"router-bound from {b['users']} users" if b else "no router-bound step"
    return ""


def list_runs(out: str | Path) -> list[dict[str, Any]]:
    """Run folders under ``out``, newest first; unreadable ones are listed with the reason."""
    base = Path(out)
    rows = []
    if not base.is_dir():
        return rows
    for d in sorted((p for p in base.iterdir() if p.is_dir()), reverse=True):
        if not (d / "run.json").exists():
            continue
        try:
            run = load_run(d)
        except RunFolderError as exc:
            rows.append({"folder": d.name, "error": str(exc)})
            continue
        env = run.get("environment") or {}
        rows.append({"folder": d.name, "kind": run.get("kind"), "status": run.get("status"),
                     "date": time.strftime("%Y-%m-%d %H:%M", time.localtime(run.get("started_at") or 0)),
                     "command": "llmbench " + " ".join(env.get("argv") or []),
                     "labels": run.get("labels") or {}, "headline": headline(run)})
    return rows

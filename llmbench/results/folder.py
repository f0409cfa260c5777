"""The run folder and its versioned run.json.

<out>/<YYYYmmdd-HHMMSS>-<kind>[-label]/
  run.json        configuration (no secrets), environment, summary, steps, verdict
  requests.jsonl  one record per request, appended as requests finish
  timeline.jsonl  per-second state (ramp)
"""

from __future__ import annotations

import errno
import json
import os
import platform
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmbench.results.schema import Summary

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
    """Atomically: a crash mid-write never leaves a torn run.json. A write that fails (disk
    full, file too large, read-only) leaves the previous file as it was and raises the
    OSError with the file's name (``write_error_line`` says it)."""
    path = Path(path)
    tmp = path.with_suffix(path.suffix + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=2, default=_default, allow_nan=False)
            fh.write("\n")
        os.replace(tmp, path)
    except OSError as exc:
        try:
            tmp.unlink()
        except OSError:
            pass
        if exc.filename is None or str(exc.filename) == str(tmp):
            exc.filename = str(path)
        raise


# what the filesystem says when results cannot be written: not the user's path being wrong
DISK_ERRNOS = frozenset(getattr(errno, n) for n in ("ENOSPC", "EFBIG", "EROFS", "EDQUOT", "EIO")
                        if hasattr(errno, n))


def is_write_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_ERRNOS


def write_error_line(exc: OSError) -> str:
    """"cannot write results/x/requests.jsonl: no space left on device"."""
    what = (exc.strerror or str(exc)).rstrip(".")
    return f"cannot write {exc.filename}: {what[:1].lower() + what[1:]}"


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
    from llmbench.version import __version__
    return {"llmbench": __version__, "python": sys.version.split()[0],
            "platform": platform.platform(), "machine": platform.machine(),
            "cpus": os.cpu_count(), "argv": scrub_argv(sys.argv[1:])}


SECRET_FLAGS = ("--api-key", "--header", "--redact")


def _scrub_header(item: str) -> str:
    """'K: V' -> 'K: ***', 'K=V' -> 'K=***': the whole value, whatever it holds ('=' in base64)."""
    from llmbench.client.target import split_header
    kv = split_header(item)
    if kv is None:
        return "***"
    sep = item[len(kv[0])]
    return kv[0] + sep + (" ***" if kv[1].startswith(" ") else "***")


def scrub_argv(argv: list[str]) -> list[str]:
    """The command line without secrets: the values of --api-key and --header are replaced
    whole, every URL loses its user:password@ part (a --proxy given without a scheme too)
    and the values of secret-looking query parameters (target.redact_query, with the names
    given to --redact); a --redact text is hidden wherever it appears."""
    from llmbench.client.target import _QUERY_ITEM, redact_query, strip_userinfo
    redacted = [v for f, v in _flag_values(argv) if f == "--redact"]
    # a --redact item that names a query parameter in the command line is a name (shown);
    # any other is a secret text itself
    params = {m.group(2).lower().replace("-", "_") for a in argv for m in _QUERY_ITEM.finditer(a)}
    texts = sorted((t for t in redacted if len(t) >= 4
                    and t.lower().replace("-", "_") not in params), key=len, reverse=True)

    def scrub(text: str) -> str:
        text = redact_query(strip_userinfo(text), tuple(redacted))
        for t in texts:
            text = text.replace(t, "***")
        return text
    out: list[str] = []
    hide_next: str | None = None
    for a in argv:
        if hide_next is not None:
            out.append(_scrub_header(a) if hide_next == "--header" else
                       scrub(a) if hide_next == "--redact" else "***")
            hide_next = None
            continue
        flag, eq, value = a.partition("=")
        if flag in SECRET_FLAGS:
            if eq:
                out.append(flag + "=" + (_scrub_header(value) if flag == "--header" else
                                         scrub(value) if flag == "--redact" else "***"))
            else:
                out.append(a)
                hide_next = flag
            continue
        if flag == "--proxy" and eq:
            out.append(flag + "=" + _scrub_proxy(value))
        elif out and out[-1] == "--proxy":
            out.append(_scrub_proxy(a))
        else:
            out.append(scrub(a))
    return out


def _flag_values(argv: list[str]) -> list[tuple[str, str]]:
    """(flag, value) for every '--flag value' and '--flag=value' in argv."""
    out = []
    for i, a in enumerate(argv):
        flag, eq, value = a.partition("=")
        if eq and flag.startswith("--"):
            out.append((flag, value))
        elif a.startswith("--") and i + 1 < len(argv):
            out.append((a, argv[i + 1]))
    return out


def _scrub_proxy(value: str) -> str:
    """A proxy URL without its credentials, with or without a scheme."""
    from llmbench.client.netconfig import hide_credentials
    return hide_credentials(value)


@dataclass
class RunDoc:
    """run.json, schema 1: the fields every run folder has, and the kind's own part (``body``:
    summary, steps, verdict, checks...). Written by ``write`` only, atomically, with NaN made
    null and infinities made strings, so no two commands can spell the common part apart."""

    kind: str                                  # run | ramp | probe
    status: str                                # running | complete | partial | failed | interrupted
    started_at: float
    config: dict[str, Any]
    labels: dict[str, str] = field(default_factory=dict)
    t0_perf: float | None = None
    workload: dict[str, Any] | None = None
    environment: dict[str, Any] = field(default_factory=lambda: environment())
    body: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"schema_version": SCHEMA_VERSION, "kind": self.kind,
                               "status": self.status, "started_at": self.started_at}
        if self.t0_perf is not None:
            out["t0_perf"] = self.t0_perf
        out["labels"] = self.labels
        out["config"] = self.config
        if self.workload is not None:
            out["workload"] = self.workload
        out["environment"] = self.environment
        out.update(self.body)
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "RunDoc":
        """A run.json read back (schema 1): the common fields, and the rest as the body."""
        common = ("schema_version", "kind", "status", "started_at", "t0_perf", "labels",
                  "config", "workload", "environment")
        return cls(str(data.get("kind")), str(data.get("status")), data.get("started_at") or 0.0,
                   data.get("config") or {}, data.get("labels") or {}, data.get("t0_perf"),
                   data.get("workload"), data.get("environment") or {},
                   {k: v for k, v in data.items() if k not in common})

    def write(self, run_dir: Path | None) -> dict[str, Any]:
        """Write run.json (when there is a folder); returns what was written."""
        data = clean_nan(self.to_json())
        if run_dir is not None:
            write_json(Path(run_dir) / "run.json", data)
        return data


# run.json holds summaries, steps and one monitor sample a second: an hour's run is under 1 MB
MAX_RUN_JSON_BYTES = 256 << 20


def load_run(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    f = path / "run.json"
    if not f.is_file():
        raise RunFolderError(f"{path}: no run.json here; give a run folder made by llmbench run/ramp")
    size = f.stat().st_size
    if size > MAX_RUN_JSON_BYTES:       # read whole, a 3 GB one cost 6 GB and a minute
        raise RunFolderError(f"{f}: {size / 1e6:,.0f} MB, larger than any run.json llmbench "
                             f"writes (at most {MAX_RUN_JSON_BYTES >> 20} MB are read)")
    try:
        data = json.loads(f.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise RunFolderError(f"{f}:{exc.lineno}: run.json is not valid JSON ({exc.msg})")
    except RecursionError:
        raise RunFolderError(f"{f}: run.json is nested too deeply to be one llmbench wrote")
    except UnicodeDecodeError:
        raise RunFolderError(f"{f}: run.json is not UTF-8 text; give a run folder made by llmbench")
    if not isinstance(data, dict):
        raise RunFolderError(f"{f}: run.json holds a JSON {type(data).__name__}, not the object "
                             "llmbench writes; give a run folder made by llmbench run/ramp")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise RunFolderError(f"{f}: schema version {version} is not the {SCHEMA_VERSION} this "
                             "llmbench reads; re-run it or use a matching llmbench version")
    return data


def headline(run: dict[str, Any]) -> str:
    kind = run.get("kind")
    if run.get("status") in ("failed", "interrupted") and not run.get("summary") \
            and not run.get("steps"):
        return f"{run.get('status')}: " + str(run.get("error", ""))[:80]
    if run.get("status") == "running":
        return "no summary yet (llmbench report rebuilds it from requests.jsonl)"
    if kind == "ramp":
        v = run.get("verdict")
        return str(v.get("result", "")) if isinstance(v, dict) else ""
    if kind == "run":
        raw = run.get("summary")
        if not isinstance(raw, dict):
            return "no summary"
        s = Summary.from_dict(raw)
        if s.total_embeddings is not None:
            e2el, rate = s.e2el.median, s.embeddings_throughput
            return (f"{s.completed} ok, {s.failed} failed, latency p50 "
                    + (f"{e2el:.0f} ms" if isinstance(e2el, (int, float)) else "–")
                    + ", " + (f"{rate:.1f} embeddings/s" if isinstance(rate, (int, float)) else "–"))
        ttft, tput = s.ttft.median, s.output_throughput
        return (f"{s.completed} ok, {s.failed} failed, TTFT p50 "
                + (f"{ttft:.0f} ms" if isinstance(ttft, (int, float)) else "–")
                + ", " + (f"{tput:.1f} tok/s" if isinstance(tput, (int, float)) else "– tok/s"))
    if kind == "probe":
        b = run.get("router_bound")
        return (f"router-bound from {b.get('users')} users" if isinstance(b, dict)
                else "no router-bound step")
    return ""


def _date_of(run: dict[str, Any], folder: Path) -> str:
    """When the run started: run.json's time, else the folder name's stamp, else its mtime
    (a run that failed its preflight once had no time and showed 1970)."""
    t = run.get("started_at")
    if isinstance(t, (int, float)) and t > 0:
        return time.strftime("%Y-%m-%d %H:%M", time.localtime(t))
    m = re.match(r"(\d{8})-(\d{6})", folder.name)
    if m:
        try:
            return time.strftime("%Y-%m-%d %H:%M", time.strptime(m.group(1) + m.group(2), "%Y%m%d%H%M%S"))
        except ValueError:
            pass
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(folder.stat().st_mtime))


def _alive(pid: Any) -> bool:
    """Is the process that wrote a "running" run.json still there? (Unknown counts as yes.)"""
    if not isinstance(pid, int):
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def list_runs(out: str | Path) -> list[dict[str, Any]]:
    """Run folders under ``out``, newest first; unreadable ones are listed with the reason."""
    base = Path(out)
    rows = []
    if not base.is_dir():
        return rows
    for d in sorted((p for p in base.iterdir() if p.is_dir()), reverse=True):
        if (d / "sweep.json").exists() and not (d / "run.json").exists():
            rows.append(_sweep_row(d))
            continue
        if not (d / "run.json").exists():
            continue
        rows.append(_run_row(d))
    return rows


def _run_row(d: Path) -> dict[str, Any]:
    try:
        run = load_run(d)
    except RunFolderError as exc:
        return {"folder": d.name, "error": str(exc)}
    return _row(d, run, run.get("kind"), headline(run), "a summary")


def _row(d: Path, doc: dict[str, Any], kind: Any, line: str, what: str) -> dict[str, Any]:
    env = doc.get("environment") if isinstance(doc.get("environment"), dict) else {}
    argv = env.get("argv") if isinstance(env.get("argv"), list) else []
    labels = doc.get("labels") if isinstance(doc.get("labels"), dict) else {}
    status = doc.get("status")
    from llmbench.results import lock
    live = lock.writer(d) is not None if (d / lock.LOCK).exists() else _alive(doc.get("pid"))
    if status == "running" and not live:
        status = f"stopped without {what} (killed?)"
    return {"folder": d.name, "kind": kind, "status": status, "date": _date_of(doc, d),
            # scrubbed again: folders written by older versions leaked some forms
            "command": "llmbench " + " ".join(scrub_argv([str(a) for a in argv])),
            "labels": labels, "headline": line}


def _sweep_row(d: Path) -> dict[str, Any]:
    """A sweep folder: its answer as the headline, and the ramp of each setting inside it."""
    f = d / "sweep.json"
    try:
        doc = json.loads(f.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return {"folder": d.name, "error": f"{f}: not a readable sweep.json ({exc})"}
    except RecursionError:
        return {"folder": d.name, "error": f"{f}: sweep.json is nested too deeply to be one "
                                           "llmbench wrote"}
    if not isinstance(doc, dict):
        return {"folder": d.name, "error": f"{f}: holds a JSON {type(doc).__name__}, not an object"}
    ramps = []
    for r in doc.get("results") or []:
        if isinstance(r, dict) and isinstance(r.get("run_dir"), str):
            sub = (d / r["run_dir"]).resolve()
            if sub.parent == d.resolve() and (sub / "run.json").exists():
                ramps.append({**_run_row(sub), "setting": r.get("name")})
    return {**_row(d, doc, "sweep", str(doc.get("answer") or "(no answer yet)"), "an answer"),
            "ramps": ramps}

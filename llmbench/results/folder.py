"""The run folder: its name, the environment and command line it records (secrets scrubbed),
and the list of folders (``llmbench runs``). run.json itself is ``results.schema.Run``: written
by ``Run.save``, read by ``Run.load``; docs/results.md lists the files a folder holds.
"""

from __future__ import annotations

import errno
import os
import platform
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmbench.results.display import local_time
from llmbench.results.jsonfile import RunFolderError, clean_nan, write_json
from llmbench.results.schema import SCHEMA_VERSION, Run, Sweep

__all__ = ["RunFolderError", "SCHEMA_VERSION", "clean_nan", "environment", "headline",
           "is_write_error", "list_runs", "new_run_dir", "scrub_argv", "write_error_line",
           "write_json"]


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


# what the filesystem says when results cannot be written: not the user's path being wrong
DISK_ERRNOS = frozenset(getattr(errno, n) for n in ("ENOSPC", "EFBIG", "EROFS", "EDQUOT", "EIO")
                        if hasattr(errno, n))


def is_write_error(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in DISK_ERRNOS


def write_error_line(exc: OSError) -> str:
    """"cannot write results/x/requests.jsonl: no space left on device"."""
    what = (exc.strerror or str(exc)).rstrip(".")
    return f"cannot write {exc.filename}: {what[:1].lower() + what[1:]}"


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
    from llmbench.client.netconfig import hide_credentials
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

    def hidden(flag: str, value: str) -> str:
        return (_scrub_header(value) if flag == "--header" else
                scrub(value) if flag == "--redact" else "***")
    out: list[str] = []
    hide_next: str | None = None
    for a in argv:
        if hide_next is not None:
            out.append(hidden(hide_next, a))
            hide_next = None
            continue
        flag, eq, value = a.partition("=")
        if flag in SECRET_FLAGS:
            if eq:
                out.append(flag + "=" + hidden(flag, value))
            else:
                out.append(a)
                hide_next = flag
            continue
        # a proxy URL loses its credentials, with or without a scheme
        if flag == "--proxy" and eq:
            out.append(flag + "=" + hide_credentials(value))
        elif out and out[-1] == "--proxy":
            out.append(hide_credentials(a))
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


def headline(run: Run) -> str:
    """The run's answer in a line: a ramp's verdict, a run's figures, a probe's router-bound."""
    if run.status in ("failed", "interrupted") and not run.measured_anything:
        return f"{run.status}: " + str(run.state.error or "")[:80]
    if run.status == "running":
        return "no summary yet (llmbench report rebuilds it from requests.jsonl)"
    if run.kind == "ramp":
        return run.verdict.headline if run.verdict is not None else ""
    if run.kind == "run":
        s = run.summary
        if s is None:
            return "no summary"
        if s.total_embeddings is not None:
            e2el, rate = s.e2el.median, s.embeddings_throughput
            return (f"{s.completed} ok, {s.failed} failed, latency p50 "
                    + (f"{e2el:.0f} ms" if isinstance(e2el, (int, float)) else "–")
                    + ", " + (f"{rate:.1f} embeddings/s" if isinstance(rate, (int, float)) else "–"))
        ttft, tput = s.ttft.median, s.output_throughput
        return (f"{s.completed} ok, {s.failed} failed, TTFT p50 "
                + (f"{ttft:.0f} ms" if isinstance(ttft, (int, float)) else "–")
                + ", " + (f"{tput:.1f} tok/s" if isinstance(tput, (int, float)) else "– tok/s"))
    if run.kind == "probe":
        b = run.findings.router.bound
        return f"router-bound from {b.users} users" if b is not None else "no router-bound step"
    return ""


def _date_of(run: Run | Sweep, folder: Path) -> str:
    """When the run started: run.json's time, else the folder name's stamp, else its mtime
    (a run that failed its preflight once had no time and showed 1970)."""
    when = local_time(run.started_at if isinstance(run, Sweep) else run.state.started_at,
                      "%Y-%m-%d %H:%M")
    if when:
        return when
    m = re.match(r"(\d{8})-(\d{6})", folder.name)
    if m:
        try:
            return time.strftime("%Y-%m-%d %H:%M", time.strptime(m.group(1) + m.group(2), "%Y%m%d%H%M%S"))
        except ValueError:
            pass
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(folder.stat().st_mtime))


@dataclass
class RunRow:
    """One folder of ``llmbench runs``: when, what, the command (scrubbed), labels and the
    headline; ``error`` when it cannot be read; a sweep's ``ramps``, each with its setting."""

    folder: str
    kind: Any = None
    status: str | None = None
    date: str = ""
    command: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    headline: str = ""
    error: str | None = None
    setting: str | None = None
    ramps: list["RunRow"] = field(default_factory=list)


def list_runs(out: str | Path) -> list[RunRow]:
    """Run folders under ``out``, newest first; unreadable ones are listed with the reason."""
    base = Path(out)
    rows: list[RunRow] = []
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


def _run_row(d: Path) -> RunRow:
    try:
        run = Run.load(d)
    except RunFolderError as exc:
        return RunRow(d.name, error=str(exc))
    return _row(d, run, run.kind, headline(run), "a summary")


def _row(d: Path, run: Run | Sweep, kind: Any, line: str, what: str) -> RunRow:
    env = run.environment if isinstance(run.environment, dict) else {}
    argv = env.get("argv") if isinstance(env.get("argv"), list) else []
    labels = run.labels if isinstance(run, Sweep) else run.state.labels
    status = run.status
    from llmbench.results import lock
    pid = run.pid if isinstance(run, Sweep) else run.state.pid
    # no lock: is the process that wrote a "running" run.json still there? (unknown: yes)
    live = lock.writer(d) is not None if (d / lock.LOCK).exists() else (
        not isinstance(pid, int) or lock.alive(pid))
    if status == "running" and not live:
        status = f"stopped without {what} (killed?)"
    return RunRow(d.name, kind, status, _date_of(run, d),
                  # scrubbed again: folders written by older versions leaked some forms
                  "llmbench " + " ".join(scrub_argv([str(a) for a in argv])), labels, line)


def _sweep_row(d: Path) -> RunRow:
    """A sweep folder: its answer as the headline, and the ramp of each setting inside it."""
    f = d / "sweep.json"
    try:
        sweep = Sweep.load(d)
    except RunFolderError as exc:
        return RunRow(d.name, error=f"{f}: not a readable sweep.json ({exc})")
    row = _row(d, sweep, "sweep", str(sweep.answer or "(no answer yet)"), "an answer")
    for r in sweep.results:
        if isinstance(r.run_dir, str):
            sub = (d / r.run_dir).resolve()
            if sub.parent == d.resolve() and (sub / "run.json").exists():
                ramp = _run_row(sub)
                ramp.setting = r.name
                row.ramps.append(ramp)
    return row

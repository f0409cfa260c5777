"""The dashboard's page from its state (pure): numbers as text, tables and charts as HTML.

Every text that came from a server, a dataset or a user (model names, URLs, error bodies,
setting names, server fields) goes through ``html.escape`` here; the page's script only puts
these strings where they belong (``textContent`` for a number, ``innerHTML`` for a fragment
built here), it never builds markup from data. Charts are the HTML report's: the same builders
(llmbench/report/charts.py) drawn by the same engine (svgplot).
"""

from __future__ import annotations

from functools import partial
from typing import Any, Sequence

from llmbench.report import charts
from llmbench.results.schema import Check, Overhead, ProbeStep, Step
from llmbench.specs.thresholds import OPS
from llmbench.report.console import fmt_ms
from llmbench.report.html import (CSS as REPORT_CSS, _chart, cell, chart_thresholds, e,
                                  parsed_thresholds, steps_table, verdict_box)
from llmbench.report.live import duration
from llmbench.report.svgplot import finite as _num

_duration = partial(duration, unknown="–")     # the terminal's "?" is the page's "–"
FAVICON = '<link rel="icon" href="data:,">'       # no /favicon.ico request (a 404 in the console)


_count = partial(cell, fmt="{:.0f}")
_load = partial(cell, fmt="{:g}")        # a load, or a count that may be fractional (a median)


CARDS = (  # (key, label): the numbers at the top, each a <span data-k=KEY>
    ("status", "status"), ("step", "step"), ("load", "load"), ("in_flight", "in flight"),
    ("done", "done"), ("failed", "failed"), ("tok_s", "token events/s"),
    ("ttft_p50", "TTFT p50"), ("ttft_p95", "TTFT p95"), ("itl_p50", "ITL p50"),
    ("itl_p95", "ITL p95"), ("elapsed", "elapsed"), ("eta", "ETA"))
GENERATOR = (("lag", "event-loop lag p99"), ("cpu", "CPU"), ("send_delay", "send delay p99"),
             ("busiest", "busiest process"))


def texts(state: dict[str, Any]) -> dict[str, str]:
    """The numbers the page shows, as the text of each ``data-k`` element."""
    meta = state.get("meta") or {}
    tick = state.get("tick") or {}
    g = tick.get("gauges") or {}
    so = tick.get("step_so_far") or {}
    unit = meta.get("unit") or "users"
    n_steps = meta.get("n_steps")
    step = g.get("step")
    out: dict[str, str] = {"status": state.get("status") or "starting"}
    if step is not None and n_steps:
        out["step"] = f"{step + 1}/{n_steps} {g.get('phase') or 'ramp-in'}"
    else:
        out["step"] = "–"
    load = g.get("load")
    if unit == "users":
        if meta.get("kind") == "run" and meta.get("rate") is not None:
            out["load"] = f"{_load(meta['rate'])} req/s"
        elif meta.get("kind") == "run" and meta.get("concurrency") is not None:
            out["load"] = f"{_load(meta['concurrency'])} concurrent"
        else:
            out["load"] = f"{_count(g.get('users'))}/{_load(load)} users"
    else:
        out["load"] = f"{_load(load)} req/s"
    for k in ("in_flight", "done", "failed"):
        out[k] = _count(g.get(k))
    out["tok_s"] = _count(g.get("tok_s"))
    for k in ("ttft_p50", "ttft_p95", "itl_p50", "itl_p95"):
        out[k] = fmt_ms(so.get(f"{k}_ms"))
    t_s = tick.get("t_s")
    out["elapsed"] = _duration(t_s)
    out["eta"] = _eta(meta, state, g, t_s)
    lag, cpu = _num(g.get("lag_p99_ms")), _num(g.get("cpu_pct"))
    out["lag"] = "–" if lag is None else f"{lag:.1f} ms"
    out["cpu"] = "–" if cpu is None else f"{cpu:.0f}%"
    out["send_delay"] = fmt_ms(g.get("send_delay_p99_ms"))
    out["busiest"] = str(g.get("busiest")) if g.get("busiest") is not None else "–"
    return out


def _eta(meta: dict[str, Any], state: dict[str, Any], g: dict[str, Any], t_s: Any) -> str:
    t = _num(t_s)
    if t is None or state.get("status") in ("final", "ended"):
        return "–"
    step, n, step_s = g.get("step"), meta.get("n_steps"), _num(meta.get("step_s"))
    if step is not None and n and step_s:
        started = _num(state.get("step_started_s"))
        in_step = max(t - started, 0.0) if started is not None else 0.0
        return _duration(max(step_s - in_step, 0.0) + (n - step - 1) * step_s)
    duration = _num(meta.get("duration_s"))
    if duration:
        return _duration(max(duration - t, 0.0))
    requests = _num(meta.get("requests"))
    done = _num(g.get("done")) or 0.0
    if requests and done and t > 0:
        return _duration((requests - done) / (done / t))
    return "–"


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], cls: str = "",
           classes: Sequence[str] = ()) -> str:
    out = [f'<table class="{e(cls)}"><tr>' + "".join(f"<th>{e(h)}</th>" for h in headers)
           + "</tr>"]
    for i, row in enumerate(rows):
        c = f' class="{e(classes[i])}"' if i < len(classes) and classes[i] else ""
        out.append(f"<tr{c}>" + "".join(f"<td>{e(v)}</td>" for v in row) + "</tr>")
    return "".join(out) + "</table>"


def _so_far(t: Any, so: dict[str, Any]) -> float | None:
    """The current step's figure a TTFT or ITL percentile threshold reads, so far (None when
    the live figures do not hold it: it is judged when the step ends)."""
    if t.metric not in ("ttft", "itl") or t.within_ms is not None:
        return None
    stat = {"median": "p50", "p50": "p50", "p95": "p95", "p99": "p99"}.get(t.stat or "")
    return None if stat is None else _num(so.get(f"{t.metric}_{stat}_ms"))


def thresholds_table(state: dict[str, Any]) -> str:
    """Each step's thresholds as they pass or fail: judged steps from their checks, the step
    in progress from its figures so far (TTFT and ITL percentiles; the rest when it ends)."""
    meta = state.get("meta") or {}
    ths = list(meta.get("thresholds") or [])
    steps = typed_steps(state)
    if not ths and steps:
        ths = [c.threshold for c in steps[0].checks if c.threshold]
    if not ths:
        return '<p class="meta">No thresholds.</p>'
    unit = meta.get("unit") or "users"
    rows, classes = [], []
    for st in steps:
        by = {c.threshold: c for c in st.checks}
        cells = [f"{_load(st.load)}"]
        for text in ths:
            c = by.get(text)
            if c is None:
                cells.append("–")
            elif c.ok:
                cells.append(f"✓ {_actual(c)}")
            elif c.insufficient:
                cells.append("not enough data")
            else:
                cells.append(f"✗ {_actual(c)}")
        extra = [c.text for c in st.checks if c.threshold not in ths and not c.ok]
        cells.append(st.state)
        if extra:
            cells[-1] += ": " + "; ".join(str(x) for x in extra)
        rows.append(cells)
        classes.append("held" if st.held else "over")
    tick = state.get("tick") or {}
    g = tick.get("gauges") or {}
    judged = {st.index for st in steps}
    if state.get("status") == "running" and g.get("step") is not None \
            and g.get("step") not in judged:
        so = tick.get("step_so_far") or {}
        cells = [f"{_load(g.get('load'))} (so far)"]
        for t in parsed_thresholds(ths):
            v = _so_far(t, so)
            if v is None:
                cells.append("… at the step's end")
            else:
                ok = OPS[t.op](v, t.value)      # as the step is judged when it ends
                cells.append(f"{'✓' if ok else '✗'} {fmt_ms(v)} so far")
        cells += ["…"] * (len(ths) + 1 - len(cells)) + ["in progress"]
        rows.append(cells[:len(ths) + 2])
        classes.append("live")
    return _table([unit, *ths, "result"], rows, "thresholds", classes)


def _actual(c: Check) -> str:
    if c.metric in ("ttft", "itl", "tpot", "e2el", "ttfo") or \
            c.threshold.split(".")[0] in ("ttft", "itl", "tpot", "e2el"):
        return fmt_ms(c.actual)
    return "–" if c.actual is None else f"{c.actual:.3g}"


def typed_steps(state: dict[str, Any]) -> list[Step]:
    """The judged steps as the result contract's (they come as run.json has them: the page's
    messages), read back once per set of steps; [] for a probe's (``typed_probe_steps``)."""
    if (state.get("meta") or {}).get("kind") == "probe":
        return []
    return _typed(state, Step)


def typed_probe_steps(state: dict[str, Any]) -> list[ProbeStep]:
    return _typed(state, ProbeStep) if (state.get("meta") or {}).get("kind") == "probe" else []


# the last steps read, and what they read as (the list itself is kept: a new list of the same
# length is read again, never taken for the old one)
_TYPED: dict[type, tuple[list[Any], list[Any]]] = {}


def _typed(state: dict[str, Any], cls: Any) -> list[Any]:
    steps = state.get("steps") or []
    last = _TYPED.get(cls)
    if last is not None and last[0] is steps and len(last[1]) == len(steps):
        return last[1]
    try:
        got = [cls.from_dict(s) for s in steps]
    except (KeyError, TypeError, ValueError):
        got = []
    _TYPED[cls] = (steps, got)
    return got


def errors_table(state: dict[str, Any]) -> str:
    tick = state.get("tick") or {}
    errs = tick.get("errors") or {}
    if not errs:
        return '<p class="meta">No failed request.</p>'
    samples = tick.get("error_samples") or {}
    rows = [[k, n, samples.get(k, "")] for k, n in errs.items()]
    return _table(["kind", "requests", "first 200 characters of the error"], rows, "errors")


def server_table(state: dict[str, Any]) -> str:
    """The server's own state from the server probe (its /metrics, /slots, /api/ps ...)."""
    g = ((state.get("tick") or {}).get("gauges") or {})
    servers = g.get("server") or {}
    machine = _machine_rows(g.get("machine") or {})
    if not servers and not machine:
        note = (state.get("meta") or {}).get("server_note")
        return f'<p class="meta">{e(note or "No server probe reading yet.")}</p>'
    rows = list(machine)
    for name, sample in servers.items():
        if not isinstance(sample, dict):
            continue
        for k, v in sample.items():
            if k in ("t", "wall"):
                continue
            if isinstance(v, float):
                v = f"{v:.3g}"
            elif isinstance(v, (dict, list)):
                v = ", ".join(f"{a}: {b}" for a, b in v.items()) if isinstance(v, dict) \
                    else ", ".join(map(str, v))
            rows.append([name, k, v])
    return _table(["target", "field", "value"], rows, "server")


def _machine_rows(m: dict[str, Any]) -> list[list[Any]]:
    """The server's machine over the last seconds, from its telemetry."""
    w = f"last {m.get('window_s', 5):g} s"
    rows: list[list[Any]] = []
    if m.get("server_cores") is not None:
        rows.append(["server process", f"cores used ({w})", cell(m["server_cores"], "{:.2f}")])
    if m.get("server_rss_bytes") is not None:
        rows.append(["server process", "resident memory", cell(m["server_rss_bytes"] / 1e9, "{:.2f} GB")])
    if m.get("machine_busy_cores") is not None:
        of = f" of {m['machine_cpus']}" if m.get("machine_cpus") else ""
        rows.append([f"machine ({m.get('machine_source', 'proc')})", f"busy cores ({w})",
                     cell(m["machine_busy_cores"], "{:.2f}") + of])
    for k, label, fmt in (("gpu_util_pct", "utilisation", "{:.0f}%"),
                          ("gpu_power_w", "power", "{:.0f} W"),
                          ("gpu_mem_mib", "memory used", "{:.0f} MiB")):
        if m.get(k) is not None:
            rows.append([f"GPU {m.get('gpu_name') or ''}".strip(), f"{label} ({w})",
                         cell(m[k], fmt)])
    return rows


def sessions_html(state: dict[str, Any]) -> str:
    """Agent sessions so far (--workload agent): this step's (those that started in it) and
    the run's; nothing when no session ran."""
    so = ((state.get("tick") or {}).get("sessions") or {})
    if not so:
        return ""
    rows = []
    for label, key in (("this step", "step"), ("the run", "run")):
        x = so.get(key)
        if not isinstance(x, dict):
            continue
        dur = _num(x.get("duration_median_s"))
        rows.append([label, _count(x.get("running")), _count(x.get("completed")),
                     _count(x.get("failed")), _count(x.get("joined")),
                     _load(x.get("running_steps_median")), _load(x.get("steps_median")),
                     fmt_ms(None if dur is None else dur * 1000)])
    return ("<h2>Agent sessions</h2>" + _table(
        ["", "running", "done", "failed", "joined mid-way", "calls so far (running, p50)",
         "calls (done, p50)", "session time (done, p50)"], rows, "sessions")
        + '<p class="meta">A step\'s sessions are those whose first call started in it; '
        "running: under way now.</p>")


def sweep_table(state: dict[str, Any]) -> str:
    sw = state.get("sweep")
    if not sw:
        return ""
    unit = (sw.get("meta") or {}).get("unit") or "users"
    rows = []
    for r in sw.get("results") or []:
        held = r.get("held")
        rows.append([r.get("name"), r.get("status"),
                     "–" if held is None else f"{_load(held)} {unit}", r.get("verdict") or ""])
    head = (f"<p><b>Sweep</b> of {e((sw.get('meta') or {}).get('settings'))}: setting "
            f"{e((sw.get('index') or 0) + 1)} of {e(len((sw.get('meta') or {}).get('grid') or []))}"
            f" now ({e(sw.get('name'))}).</p>")
    return head + _table(["setting", "status", "held", "verdict"], rows, "sweep")


def verdict_html(state: dict[str, Any]) -> str:
    v = state.get("verdict")
    if not v:
        kind = (state.get("meta") or {}).get("kind")
        return ('<div class="verdict pending">No verdict yet: it comes with the first judged '
                f'step{"" if kind == "ramp" else " (or the end of the run)"}.</div>')
    meta = state.get("meta") or {}
    n, of = len(state.get("steps") or []), meta.get("n_steps")
    so_far = "" if state.get("status") in ("final", "ended") else (
        f'<p class="meta">So far: {e(n)} of {e(of)} steps judged; the ramp goes on.</p>'
        if of else '<p class="meta">So far; the run goes on.</p>')
    return so_far + verdict_box(v, None, "No step finished.")


_STEP_CHARTS: dict[str, str] = {}       # drawn once per set of judged steps, not per second


def step_charts(state: dict[str, Any]) -> str:
    """The report's step charts over the steps judged so far (a ramp: latency and throughput
    against load; a probe: the router's overhead)."""
    meta = state.get("meta") or {}
    steps = state.get("steps") or []
    if not steps:
        return ""
    import json
    key = json.dumps([meta.get("kind"), meta.get("unit"), meta.get("thresholds"), steps],
                     sort_keys=True, default=str)
    got = _STEP_CHARTS.get(key)
    if got is None:
        _STEP_CHARTS.clear()
        got = _STEP_CHARTS[key] = _step_charts(state)
    return got


def _step_charts(state: dict[str, Any]) -> str:
    """The report's step charts, from the judged steps, typed."""
    meta = state.get("meta") or {}
    if meta.get("kind") == "probe":
        probe = typed_probe_steps(state)
        return _chart(charts.probe_overhead_chart(probe), "router overhead") if probe else ""
    unit = meta.get("unit") or "users"
    ths = chart_thresholds(meta.get("thresholds") or [])
    typed = typed_steps(state)
    return (_chart(charts.ramp_latency_chart(typed, ths, unit), "latency vs load")
            + _chart(charts.ramp_throughput_chart(typed, unit), "throughput vs load"))


def live_chart(state: dict[str, Any]) -> str:
    rows = state.get("rows") or []
    meta = state.get("meta") or {}
    return _chart(charts.live_chart(rows, meta.get("unit") or "users",
                              chart_thresholds(meta.get("thresholds") or [])), "live timeline")


def steps_html(state: dict[str, Any]) -> str:
    steps = state.get("steps") or []
    meta = state.get("meta") or {}
    if not steps:
        return '<p class="meta">No step judged yet.</p>'
    if meta.get("kind") == "probe":
        rows = [[s.users, fmt_ms(s.router.value("ttft", "median")),
                 fmt_ms(s.direct.value("ttft", "median")),
                 _ov(s.ttft_p50), _ov(s.ttft_p95)] for s in typed_probe_steps(state)]
        return _table(["users", "router TTFT p50", "direct TTFT p50",
                       "TTFT p50 overhead", "TTFT p95 overhead"], rows, "steps")
    return steps_table(typed_steps(state), meta.get("unit") or "users")


def _ov(o: Overhead) -> str:
    if o.overhead_ms is None:
        return "–"
    return f"{o.overhead_ms:+.1f} ms" + (" *" if o.significant else "")


def fragments(state: dict[str, Any]) -> dict[str, str]:
    """Every part of the page that is HTML, by its ``data-h`` name."""
    meta = state.get("meta") or {}
    return {"title": e(title(meta)), "verdict": verdict_html(state),
            "thresholds": thresholds_table(state), "steps": steps_html(state),
            "errors": errors_table(state), "server": server_table(state),
            "sessions": sessions_html(state),
            "live": live_chart(state), "step_charts": step_charts(state),
            "sweep": sweep_table(state), "notes": notes(state)}


def notes(state: dict[str, Any]) -> str:
    g = ((state.get("tick") or {}).get("gauges") or {})
    out = []
    from llmbench.load.monitor import CPU_LIMIT_PCT, LAG_P99_LIMIT_MS
    lag, cpu = _num(g.get("lag_p99_ms")), _num(g.get("cpu_pct"))
    if (lag is not None and lag > LAG_P99_LIMIT_MS) or (cpu is not None and cpu > CPU_LIMIT_PCT):
        from llmbench.analysis.verdict import busy_banner
        out.append(f'<div class="verdict bad">{e(busy_banner(lag, cpu))}</div>')
    if state.get("status") == "failed":
        out.append('<div class="verdict bad">The run failed before measuring: '
                   f'{e(state.get("error"))}</div>')
    if state.get("broken"):
        out.append(f'<div class="verdict bad">{e(state["broken"])}</div>')
    return "".join(out)


def title(meta: dict[str, Any]) -> str:
    kind = meta.get("kind") or "run"
    model, url = meta.get("model") or "", meta.get("url") or ""
    where = f": {model} at {url}" if model or url else ""
    rep = meta.get("repeat") or {}
    again = f" (repeat {rep.get('index')} of {rep.get('of')})" if rep.get("of") else ""
    return f"llmbench {kind}{where}{again}"


def update(state: dict[str, Any]) -> dict[str, Any]:
    """One event's payload: every number and fragment (the whole page, a few tens of kB)."""
    rows = state.get("rows") or []
    return {"version": state.get("version", 0),
            "final": state.get("status") in ("final", "failed"),
            "text": texts(state), "html": fragments(state),
            # the per-second rows' totals (every request counts in one second)
            "series": {"seconds": len(rows), "finished": sum(r.get("requests") or 0 for r in rows),
                       "failed": sum(r.get("failed") or 0 for r in rows),
                       # each second's token events, as they arrived (the last LIVE_POINTS)
                       "tok_s": [r.get("tok_s") or 0 for r in rows[-charts.LIVE_POINTS:]]}}


CSS_EXTRA = """
.cards{display:flex;flex-wrap:wrap;gap:8px;margin:10px 0}
.card{border:1px solid #ddd;border-radius:6px;padding:6px 10px;min-width:92px;background:#fcfcfc}
.card .v{font-size:1.25em;font-weight:600;font-variant-numeric:tabular-nums}
.card .l{color:#666;font-size:.78em}
.verdict.pending{background:#f7f7f7;border-left-color:#999}
tr.live td{background:#fffbe8}
.cols{display:flex;flex-wrap:wrap;gap:24px} .cols>div{flex:1 1 320px}
"""


def shell(state: dict[str, Any]) -> str:
    """The live page: its parts filled in from the state now, and the script that keeps them
    current from /events."""
    u = update(state)
    t, h = u["text"], u["html"]

    def card(k: str, label: str) -> str:
        return (f'<div class="card"><div class="v"><span data-k="{k}">{e(t.get(k, "–"))}</span>'
                f'</div><div class="l">{e(label)}</div></div>')
    return "\n".join([
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        f"<title>{h['title']}</title>", FAVICON,
        f"<style>{REPORT_CSS}{CSS_EXTRA}</style>",
        '<script src="/static/dashboard.js" defer></script></head>',
        f'<body data-version="{e(u["version"])}" data-final="0">',
        f'<h1 data-h="title">{h["title"]}</h1>',
        '<div class=meta>llmbench dashboard: live, updated every second; the run\'s report '
        "when it ends.</div>",
        f'<div data-h="sweep">{h["sweep"]}</div>',
        '<div class="cards">' + "".join(card(k, label) for k, label in CARDS) + "</div>",
        f'<div data-h="notes">{h["notes"]}</div>',
        f'<div data-h="verdict">{h["verdict"]}</div>',
        f'<div data-h="sessions">{h["sessions"]}</div>',
        "<h2>Thresholds per step</h2>", f'<div data-h="thresholds">{h["thresholds"]}</div>',
        "<h2>Over time</h2>",
        '<p class=meta>Per second: the requests that finished in it; latencies over those that '
        'finished in the last 10 s.</p>',
        f'<div data-h="live">{h["live"]}</div>',
        "<h2>Steps</h2>", f'<div data-h="steps">{h["steps"]}</div>',
        f'<div data-h="step_charts">{h["step_charts"]}</div>',
        '<div class="cols"><div><h2>Errors by kind</h2>'
        f'<div data-h="errors">{h["errors"]}</div></div>',
        '<div><h2>Load generator</h2><div class="cards">'
        + "".join(card(k, label) for k, label in GENERATOR) + "</div></div>",
        '<div><h2>Server</h2>'
        f'<div data-h="server">{h["server"]}</div></div></div>',
        "</body></html>"])


def final_page(report_html: str) -> str:
    """report.html as the dashboard serves it at the end: the same page, with a line saying
    where it came from (and no favicon request)."""
    banner = ('<div class="meta" data-dashboard="final">llmbench dashboard: the run has ended; '
              "this is its report.html.</div>")
    out = report_html.replace("<head>", "<head>" + FAVICON, 1)
    i = out.find("<body>")
    if i >= 0:
        out = out[:i + len("<body>")] + banner + out[i + len("<body>"):]
    return out

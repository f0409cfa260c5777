"""contrib/grafana/llmbench.json: the Grafana dashboard for a run watched with --metrics-port.

The JSON loads and is importable (schema version, a Prometheus datasource variable, the ``run``
variable, a datasource and a target on every panel, no two panels on the same spot); every
llmbench_* metric the exporter renders has a panel (read from a render, so a new metric without
a panel fails here); and a real Prometheus (tests/helpers/prometheus.py) accepts every PromQL
expression of the dashboard (and of docs/watching.md's examples), and answers every
llmbench_* one with data once it has scraped an exporter that saw records."""

from __future__ import annotations

import json
import math
import re
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from llmbench.records.record import Record
from llmbench.load.observe import LiveNow
from llmbench.report.prometheus import MetricsExporter
from tests.helpers import ROOT, free_port

DASHBOARD = ROOT / "contrib" / "grafana" / "llmbench.json"
WATCHING = ROOT / "docs" / "watching.md"
RUN = "grafana-test"
# what Grafana puts in place of the dashboard's variables (the exporter's run name; "All" for
# the server job; Prometheus scrapes every second here)
VARIABLES = {"run": RUN, "server_job": ".*", "__rate_interval": "4s", "__interval": "2s",
             "__range": "1m"}
VAR = re.compile(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)|\[\[(\w+)\]\]")
METRIC = re.compile(r"\bllmbench_[a-z0-9_]+")


def load() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def all_panels(dash: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel, those inside collapsed rows too."""
    out = []
    for p in dash["panels"]:
        out.append(p)
        out.extend(p.get("panels") or [])
    return out


def data_panels(dash: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in all_panels(dash) if p["type"] != "row"]


def substitute(expr: str) -> str:
    def one(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2) or m.group(3)
        assert name in VARIABLES, f"unknown dashboard variable ${name} in {expr}"
        return VARIABLES[name]
    return VAR.sub(one, expr)


def expressions(dash: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL with the variables substituted) for every target."""
    return [(p["title"], substitute(t["expr"])) for p in data_panels(dash) for t in p["targets"]]


def doc_examples() -> list[tuple[str, str]]:
    """The PromQL examples of docs/watching.md (its ```promql block), one a line."""
    blocks = re.findall(r"```promql\n(.*?)```", WATCHING.read_text(encoding="utf-8"), re.S)
    assert blocks, "docs/watching.md has no promql block"
    return [("docs/watching.md", line.strip()) for b in blocks for line in b.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def rendered_metric_names(text: str) -> set[str]:
    """The names in the exposition's ``# TYPE`` lines (a histogram's base name)."""
    return {line.split()[2] for line in text.splitlines() if line.startswith("# TYPE ")}


def record(i: int, ok: bool = True, ttft: float = 0.05, gap: float = 0.02, tokens: int = 5,
           retries: int = 0) -> Record:
    # on this process's clock, just finished: the exporter's send-delay window is the last 10 s
    start = time.perf_counter() - 2.0 + i * 1e-3
    times = [start + ttft + k * gap for k in range(tokens)] if ok else []
    return Record(f"r{i}", scheduled=start, start=start, sent=start + 0.0003 + i * 1e-6,
                  first_token=times[0] if times else None, end=times[-1] if times else None,
                  done=(times[-1] if times else start + 1.0), ok=ok, status=200 if ok else 500,
                  error_kind=None if ok else "http_status", prompt_tokens=16,
                  output_tokens=tokens if ok else None, token_times=times, retries=retries)


# -- the file ---------------------------------------------------------------------------------

def test_the_dashboard_loads_and_every_panel_has_a_datasource_and_a_target():
    dash = load()
    assert dash["schemaVersion"] >= 36
    assert dash["uid"] and dash["title"]
    variables = {v["name"]: v for v in dash["templating"]["list"]}
    ds = variables["datasource"]
    assert ds["type"] == "datasource" and ds["query"] == "prometheus"
    run = variables["run"]
    assert run["type"] == "query"
    assert run["query"]["query"] == run["definition"] == "label_values(llmbench_requests_total, run)"
    assert "${datasource}" in json.dumps(run["datasource"])
    panels = data_panels(dash)
    assert len(panels) >= 10
    ids = [p["id"] for p in all_panels(dash)]
    assert len(ids) == len(set(ids)), "two panels share an id"
    for p in panels:
        assert p.get("datasource", {}).get("uid") == "${datasource}", p["title"]
        assert p.get("targets"), f"{p['title']}: no target"
        ref_ids = [t["refId"] for t in p["targets"]]
        assert len(ref_ids) == len(set(ref_ids)), p["title"]
        for t in p["targets"]:
            assert t["expr"].strip(), p["title"]
            assert t.get("datasource", {}).get("uid") == "${datasource}", p["title"]
    # a grid without two panels on the same cell
    taken: dict[tuple[int, int], str] = {}
    for p in all_panels(dash):
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        for x in range(g["x"], g["x"] + g["w"]):
            for y in range(g["y"], g["y"] + g["h"]):
                assert (x, y) not in taken, f"{p['title']} overlaps {taken[(x, y)]}"
                taken[(x, y)] = p["title"]


def test_the_server_side_panels_use_the_names_vllm_and_llama_cpp_expose():
    """The names are those of tests/fixtures (what the servers answer at /metrics), plus
    vLLM's TTFT histogram and the older name of its KV-cache gauge."""
    text = " ".join(e for _, e in expressions(load()))
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting",
                 "vllm:time_to_first_token_seconds_bucket", "vllm:kv_cache_usage_perc",
                 "vllm:gpu_cache_usage_perc", "llamacpp:requests_processing",
                 "llamacpp:requests_deferred", "llamacpp:predicted_tokens_seconds"):
        assert name in text, name
    fixtures = (ROOT / "tests" / "fixtures" / "vllm_metrics.txt").read_text() \
        + (ROOT / "tests" / "fixtures" / "llamacpp_metrics.txt").read_text()
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting",
                 "vllm:kv_cache_usage_perc", "llamacpp:requests_processing",
                 "llamacpp:requests_deferred"):
        assert f"# TYPE {name} " in fixtures, name


def test_every_llmbench_metric_the_exporter_renders_has_a_panel():
    ex = MetricsExporter(run=RUN)
    ex.gauges = lambda: LiveNow(in_flight=3, load=8.0, step=2, lag_p99_ms=1.0, cpu_pct=25.0)
    ex.observe(record(0))
    ex.observe(record(1, ok=False, retries=1))
    names = rendered_metric_names(ex.render().decode())
    # the exporter's list as the docs give it: a render without one of them is a render bug
    assert {"llmbench_ttft_seconds", "llmbench_itl_seconds", "llmbench_tpot_seconds",
            "llmbench_e2el_seconds", "llmbench_requests_total", "llmbench_output_tokens_total",
            "llmbench_input_tokens_total", "llmbench_resends_total",
            "llmbench_in_flight_requests", "llmbench_users", "llmbench_step",
            "llmbench_loop_lag_p99_seconds", "llmbench_cpu_share",
            "llmbench_send_delay_p99_seconds"} <= names
    used = set()
    for _, expr in expressions(load()):
        used |= set(METRIC.findall(expr))
    missing = sorted(n for n in names
                     if n not in used and not any(f"{n}{s}" in used for s in ("_bucket", "_sum", "_count")))
    assert not missing, f"llmbench metrics without a panel in {DASHBOARD.name}: {missing}"
    unknown = sorted(u for u in used if u not in names
                     and not any(u == f"{n}{s}" for n in names for s in ("_bucket", "_sum", "_count")))
    assert not unknown, f"panels query llmbench metrics the exporter does not render: {unknown}"


# -- a real Prometheus --------------------------------------------------------------------------

def api(port: int, expr: str) -> dict[str, Any]:
    """/api/v1/query's answer, a rejected expression's too (Prometheus says 400 then)."""
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return json.loads(e.read())


def finite(result: list[dict[str, Any]]) -> bool:
    return any(math.isfinite(float(s["value"][1])) for s in result)


def test_prometheus_accepts_every_expression_and_the_llmbench_ones_have_data(tmp_path: Path):
    from tests.helpers.prometheus import Prometheus
    dash = load()
    exprs = expressions(dash)
    port = free_port()
    exporter = MetricsExporter(port=port, run=RUN)
    tick = [0]

    def gauges() -> LiveNow:
        tick[0] += 1
        return LiveNow(in_flight=2 + tick[0] % 3, load=8.0, step=1 + tick[0] % 2,
                       lag_p99_ms=1.0 * (1 + tick[0] % 4), cpu_pct=20.0)
    exporter.gauges = gauges
    with Prometheus(tmp_path / "prom", [f"127.0.0.1:{port}"]) as prom:
        # the syntax first (no data needed): an error is status "error", not an empty answer
        bad = api(prom.port, "histogram_quantile(0.5, rate(llmbench_ttft_seconds_bucket[30s]")
        assert bad["status"] == "error"
        for title, expr in exprs + doc_examples():
            doc = api(prom.port, expr)
            assert doc["status"] == "success", (title, expr, doc.get("error"))
        exporter.start()
        try:
            deadline = time.monotonic() + 30
            while exporter.scrapes == 0 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert exporter.scrapes, "Prometheus never scraped the exporter"
            # three scrapes, each after more records: every counter and bucket moves between
            # two of them, so each rate() has two different values in its window
            n = 0
            for batch in range(3):
                for _ in range(6):
                    n += 1
                    exporter.observe(record(n, ttft=0.03 + 0.01 * (n % 5), gap=0.01 + 0.005 * (n % 3),
                                            retries=n % 2))
                exporter.observe(record(1000 + batch, ok=False))
                seen = exporter.scrapes
                deadline = time.monotonic() + 15
                while exporter.scrapes == seen and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert exporter.scrapes > seen, "Prometheus stopped scraping"
            ours = [(t, e) for t, e in exprs if "llmbench_" in e]
            assert len(ours) >= 14
            empty = set(ours)
            deadline = time.monotonic() + 20
            while empty and time.monotonic() < deadline:
                for title, expr in sorted(empty):
                    doc = api(prom.port, expr)
                    assert doc["status"] == "success", (title, expr, doc.get("error"))
                    if finite(doc["data"]["result"]):
                        empty.discard((title, expr))
                if empty:
                    time.sleep(0.5)
            assert not empty, f"no data from Prometheus for: {sorted(empty)}"
            # the run variable's values: what Grafana lists under "run"
            url = (f"http://127.0.0.1:{prom.port}/api/v1/label/run/values?"
                   + urllib.parse.urlencode({"match[]": "llmbench_requests_total"}))
            with urllib.request.urlopen(url, timeout=10) as r:
                assert json.loads(r.read())["data"] == [RUN]
        finally:
            exporter.close(linger_s=0)

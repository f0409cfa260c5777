"""Exports on the results contract: a run's requests as a table (results.table) and as CSV or
Parquet (report.export), per request or per run/step.

The per-request TTFT is the summary's: its median over the measured requests equals run.json's
median_ttft_ms for a run made here against the mock (warm-up rows kept, flagged unmeasured).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pytest

from llmbench.records.record import Record
from llmbench.report import export
from llmbench.results.schema import Run
from llmbench.results.table import COLUMN_NAMES, request_frame, request_rows
from llmbench.mock_server import MockConfig, MockServer
from llmbench import run as api_run
from tests.helpers import ROOT, only_run

EXAMPLE_RAMP = sorted((ROOT / "results" / "examples" / "num_parallel").glob("*ramp*"))[0]


def open_run(path: Path) -> Run:
    return Run.load(path)


@pytest.fixture(scope="module")
def mock_run(tmp_path_factory) -> Path:
    """40 measured requests and 3 warm-up ones against the mock, about one in ten failing."""
    out = tmp_path_factory.mktemp("export")
    with MockServer(MockConfig(ttft_ms=15, itl_ms=2, fault_500=0.1, models=["m"], seed=3)) as m:
        api_run(url=m.url + "/v1", model="m", concurrency=4, requests=40, warmup=3,
                prompt_tokens=10, output_tokens=8, out=out)         # in this process
    d = only_run(out)
    assert (d / "run.json").is_file()
    return d


def hostile_run(d: Path) -> Path:
    """A run folder whose server sent formula-like text: the export must not run it."""
    d.mkdir()
    recs = []
    for i, (err, served) in enumerate([("=HYPERLINK(\"http://x\",\"hi\")", "@replica"),
                                       ("+cmd|' /C calc'!A0", "-1"), (None, "replica-0"),
                                       ("\t=1+1", "=2")]):
        ok = err is None
        r = Record(f"r{i}", scheduled=100.0 + i, start=100.0 + i, done=101.0 + i, ok=ok,
                   status=200 if ok else 500, error_kind=None if ok else "http_status", error=err,
                   served_by=served, output_tokens=3 if ok else None,
                   first_token=100.1 + i if ok else None, end=100.3 + i if ok else None,
                   token_times=[100.1 + i, 100.2 + i, 100.3 + i] if ok else [])
        recs.append(r)
    with open(d / "requests.jsonl", "w") as fh:
        for r in recs:
            fh.write(json.dumps(r.to_json()) + "\n")
    from llmbench.analysis.metrics import summarize
    run = {"schema_version": 1, "kind": "run", "status": "complete", "t0_perf": 100.0,
           "config": {"load": {"concurrency": 2, "rate": None}}, "summary": summarize(recs).to_dict()}
    (d / "run.json").write_text(json.dumps(run, default=str))
    return d


def test_request_table_is_the_summarys_definition(mock_run):
    run = open_run(mock_run)
    df = run.requests()
    lines = [ln for ln in (mock_run / "requests.jsonl").read_text().splitlines() if ln.strip()]
    assert len(df) == len(lines) == 43                              # every request is a row
    assert list(df.columns) == list(COLUMN_NAMES)
    assert (~df.measured).sum() == 3 and df[~df.measured].warmup.all()
    m = df[df.measured]
    assert len(m) == run.summary.requests
    assert int((~m.ok).sum()) == run.summary.failed
    assert m.ttft_ms.median() == pytest.approx(run.summary.ttft.median, rel=1e-9)
    assert m.e2el_ms.median() == pytest.approx(run.summary.e2el.median, rel=1e-9)
    assert np.percentile(m.ttft_ms.dropna(), 95) == pytest.approx(run.summary.ttft.p95, rel=1e-9)
    assert m.tpot_ms.mean() == pytest.approx(run.summary.tpot.mean, rel=1e-9)
    # a failed request has no TTFT (NaN), never 0
    assert (~df.ok).sum() >= 1, "the mock's fault_500 made no failure: pick another seed"
    assert df[~df.ok].ttft_ms.isna().all() and df[df.ok].ttft_ms.notna().all()
    assert set(df[~df.ok].error_kind) == {"http_status"} and (df[~df.ok].status == 500).all()


def test_request_table_columns_are_typed(mock_run):
    df = request_frame(open_run(mock_run))
    assert str(df.ok.dtype) == "bool" and str(df.measured.dtype) == "bool"
    for col in ("status", "output_tokens", "token_events", "user", "turn"):
        assert str(df[col].dtype) == "Int64", col
    for col in ("ttft_ms", "e2el_ms", "itl_mean_ms", "start_s"):
        assert str(df[col].dtype) == "float64", col
    assert str(df.served_by.dtype) == "string"
    assert (df.start_s >= 0).all() and df.start_s.max() < 60       # seconds since the start
    ok = df[df.ok]
    # tokens read in one chunk share their arrival time (a busy machine's late read of the
    # in-process mock's 2 ms gaps): a gap of 0 is a real figure, a negative or missing one not
    assert (ok.token_events >= 1).all() and (ok.itl_mean_ms >= 0).all()
    assert (ok.itl_mean_ms > 0).any()
    assert (ok.e2el_ms >= ok.ttft_ms).all()


def test_csv_round_trip_per_request(mock_run, tmp_path):
    out = tmp_path / "r.csv"
    export.export(mock_run, out, "csv", per_request=True)
    with open(out, newline="") as fh:
        rows = list(csv.DictReader(fh))
    direct = list(request_rows(open_run(mock_run)))
    assert len(rows) == len(direct) == 43
    assert list(rows[0]) == list(COLUMN_NAMES)
    for got, want in zip(rows, direct):
        assert got["request_id"] == want["request_id"]
        # floats to a thousandth (no float noise), missing values are empty cells, booleans
        # true/false
        assert got["ttft_ms"] == ("" if want["ttft_ms"] is None
                                  else repr(round(want["ttft_ms"], 3)))
        assert got["ok"] == ("true" if want["ok"] else "false")
    import pandas as pd
    back = pd.read_csv(out)
    assert back.ttft_ms.dtype == "float64" and back.ok.dtype == bool


def test_parquet_round_trip_keeps_types(mock_run, tmp_path):
    pytest.importorskip("pyarrow")
    import pandas as pd
    out = tmp_path / "r.parquet"
    export.export(mock_run, out, "parquet", per_request=True)
    back = pd.read_parquet(out)
    pd.testing.assert_frame_equal(back, request_frame(open_run(mock_run)))
    out2 = tmp_path / "s.parquet"
    export.write_parquet(mock_run, out2)
    s = pd.read_parquet(out2)
    assert len(s) == 1 and s.users.iloc[0] == 4 and str(s.requests.dtype) == "Int64"


def csv_text(run, per_request=False):
    buf = io.StringIO()
    export.write_csv(run, buf, per_request=per_request)
    return buf.getvalue()


def test_csv_cells_from_a_server_are_not_formulas(tmp_path):
    d = hostile_run(tmp_path / "run")
    text = csv_text(d, per_request=True)
    rows = list(csv.DictReader(io.StringIO(text)))
    cells = [r[c] for r in rows for c in ("error", "served_by") if r[c]]
    assert cells and all(not c.startswith(export.FORMULA_START) for c in cells), cells
    assert rows[0]["error"] == "'=HYPERLINK(\"http://x\",\"hi\")" and rows[0]["served_by"] == "'@replica"
    assert rows[1]["served_by"] == "'-1" and rows[3]["error"] == "'\t=1+1"
    assert rows[2]["served_by"] == "replica-0"                      # plain text untouched
    assert export.csv_safe(-1.5) == -1.5                            # numbers are not text
    # Parquet is typed, not a spreadsheet's formula: the text stays as the server sent it
    pytest.importorskip("pyarrow")
    import pandas as pd
    export.write_parquet(d, tmp_path / "h.parquet", per_request=True)
    assert pd.read_parquet(tmp_path / "h.parquet").error.iloc[0].startswith("=HYPERLINK")


def test_a_ramp_exports_one_row_per_step():
    run = open_run(EXAMPLE_RAMP)
    rows = export.summary_rows(run)
    assert [r["step"] for r in rows] == [s.index for s in run.steps]
    assert [r["users"] for r in rows] == [s.load for s in run.steps]
    assert [r["held"] for r in rows] == [s.held for s in run.steps]
    for r, s in zip(rows, run.steps):
        assert r["ttft_p95_ms"] == s.summary.ttft.p95 and r["ttft_p50_ms"] == s.summary.ttft.median
        assert r["itl_p95_ms"] == s.summary.itl.p95
        assert r["output_throughput"] == s.summary.output_throughput
    text = csv_text(EXAMPLE_RAMP)
    table = list(csv.DictReader(io.StringIO(text)))
    assert len(table) == len(run.steps)
    assert [float(t["users"]) for t in table] == [s.load for s in run.steps]
    assert table[0]["held"] == "true" and table[-1]["held"] == str(run.steps[-1].held).lower()
    assert float(table[0]["ttft_p95_ms"]) == round(run.steps[0].summary.ttft.p95, 3)
    # issue 45: no float noise (1192.5070000000915), no Python booleans
    assert not any(len(c.split(".")[1]) > 3 for c in text.replace("\n", ",").split(",")
                   if "." in c and c.replace(".", "", 1).isdigit())
    assert "True" not in text and "False" not in text


def test_a_ramps_requests_carry_their_step():
    df = open_run(EXAMPLE_RAMP).requests()
    steps = sorted(int(s) for s in df.step.dropna().unique())
    assert steps and set(steps) <= {s.index for s in open_run(EXAMPLE_RAMP).steps}


def test_export_says_what_it_cannot_do(tmp_path, mock_run):
    with pytest.raises(export.ExportError, match="csv or parquet"):
        export.export(mock_run, tmp_path / "x", "xlsx")
    with pytest.raises(export.ExportError, match="--output"):
        export.export(mock_run, io.StringIO(), "parquet")
    sweep = ROOT / "results" / "examples" / "sweep"
    with pytest.raises(export.ExportError, match="sweep"):
        export.export(sweep, tmp_path / "x.csv", "csv")

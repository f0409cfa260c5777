"""A run as a file for a spreadsheet or a notebook: CSV or Parquet, per request or per run/step.

- per request (``per_request=True``): one row per line of requests.jsonl, the columns of
  llmbench.results.table (``ttft_ms``, ``e2el_ms``, ``measured``, ``start_s`` ...);
- otherwise one row per run, or per step of a ramp: the summary's figures flattened
  (``step``, ``users``, ``ttft_p95_ms`` ...), read through the results contract (results.schema).

CSV is written with the standard library alone; a text cell a spreadsheet would run as a
formula (a server's error text, a dataset's conversation id) is made text (``csv_safe``: CSV
injection). Parquet keeps the columns' types (pyarrow, which comes with ``datasets``).
"""

from __future__ import annotations

import csv
from pathlib import Path
from typing import IO, Any, Iterable, Sequence

from llmbench.results.schema import Run
from llmbench.results.table import COLUMN_NAMES, request_frame, request_rows, typed_frame

FORMATS = ("csv", "parquet")
LATENCY_COLUMNS = ("ttft", "tpot", "itl", "e2el")
STATS = ("mean", "p50", "p90", "p95", "p99", "max")
SUMMARY_SCALARS = (("requests", "int"), ("completed", "int"), ("failed", "int"),
                   ("error_rate", "float"), ("duration_s", "float"),
                   ("total_input_tokens", "int"), ("total_output_tokens", "int"),
                   ("output_throughput", "float"), ("request_throughput", "float"),
                   ("total_token_throughput", "float"), ("request_goodput", "float"))
SUMMARY_COLUMNS: tuple[tuple[str, str], ...] = (
    (("step", "int"), ("users", "float"), ("rate_rps", "float"), ("held", "bool?"))
    + SUMMARY_SCALARS
    + tuple((f"{m}_{s}_ms", "float") for m in LATENCY_COLUMNS for s in STATS))
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def as_run(run: Run | str | Path) -> Run:
    if isinstance(run, (str, Path)):
        return Run.load(run)
    return run


class ExportError(Exception):
    """The export cannot be written as asked (not a run folder, no pyarrow): one line for the user."""


def csv_safe(value: Any) -> Any:
    """A text cell a spreadsheet will show as text, never run: ``=HYPERLINK(...)`` is written
    ``'=HYPERLINK(...)``. Numbers, booleans and empty cells are left as they are."""
    if isinstance(value, str) and value.startswith(FORMULA_START):
        return "'" + value
    return value


CSV_DECIMALS = 3          # a millisecond's thousandth: no float noise (1192.5070000000915)


def csv_cell(value: Any) -> Any:
    """One CSV cell, the same in every CSV llmbench writes: empty for no value, booleans as
    true/false (not Python's True), floats to ``CSV_DECIMALS`` places (inf as inf), text that
    a spreadsheet would run made text (``csv_safe``)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if value != value:
            return ""
        if value in (float("inf"), float("-inf")):
            return "inf" if value > 0 else "-inf"
        return repr(round(value, CSV_DECIMALS))
    return csv_safe(value)


def _stat(metric: Any, stat: str) -> float | None:
    if stat == "p50":
        return metric.p50
    if stat in ("mean", "max"):
        return getattr(metric, stat)
    return metric.at(float(stat[1:]))


def _summary_row(summary: Any, step: int | None, users: Any, rate: Any,
                 held: bool | None) -> dict[str, Any]:
    row: dict[str, Any] = {"step": step, "users": users, "rate_rps": rate, "held": held}
    for name, _ in SUMMARY_SCALARS:
        row[name] = getattr(summary, name, None)
    for m in LATENCY_COLUMNS:
        metric = summary.metric(m)
        for s in STATS:
            row[f"{m}_{s}_ms"] = _stat(metric, s)
    return row


def summary_rows(run: "Run | str | Path") -> list[dict[str, Any]]:
    """One row per step of a ramp (or probe), else one for the run: the summary flattened."""
    run = as_run(run)
    if run.steps:
        by = run.section("ramp").get("by", "users")
        return [_summary_row(st.summary, st.index, st.load if by == "users" else None,
                             st.load if by != "users" else None, st.held) for st in run.steps]
    if run.summary is None:
        raise ExportError(f"{run.path}: run.json has no summary and no steps to export")
    load = run.load_config
    return [_summary_row(run.summary, None, load.get("concurrency"), load.get("rate"), None)]


def write_csv(run: "Run | str | Path", out: str | Path | IO[str], *, per_request: bool = False) -> None:
    """The run as CSV to a path or an open text stream (``sys.stdout``), a header row first,
    each cell as ``csv_cell`` writes it."""
    run = as_run(run)
    rows, columns = ((request_rows(run), list(COLUMN_NAMES)) if per_request else
                     (summary_rows(run), [name for name, _ in SUMMARY_COLUMNS]))
    if isinstance(out, (str, Path)):
        with open(out, "w", encoding="utf-8", newline="") as fh:
            _csv(fh, rows, columns)
    else:
        _csv(out, rows, columns)


def _csv(fh: IO[str], rows: Iterable[dict[str, Any]], columns: Sequence[str]) -> None:
    w = csv.writer(fh, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow([csv_cell(row.get(c)) for c in columns])


def summary_frame(run: "Run | str | Path") -> Any:
    """summary_rows as a typed pandas DataFrame."""
    return typed_frame(summary_rows(run), SUMMARY_COLUMNS)


def write_parquet(run: "Run | str | Path", out: str | Path, *, per_request: bool = False) -> None:
    """The run as a Parquet file, its columns typed (nullable integers and booleans stay so)."""
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        raise ExportError("--format parquet needs pyarrow (it comes with datasets): "
                          "pip install pyarrow") from None
    run = as_run(run)
    df = request_frame(run) if per_request else summary_frame(run)
    df.to_parquet(out, index=False)


def export(run_dir: str | Path, out: str | Path | IO[str], fmt: str = "csv", *,
           per_request: bool = False) -> None:
    """``llmbench report RUN_DIR --format csv|parquet [--per-request] --output OUT``."""
    if fmt not in FORMATS:
        raise ExportError(f"--format {fmt!r}: choose {' or '.join(FORMATS)}")
    run_dir = Path(run_dir)
    if (run_dir / "sweep.json").is_file() and not (run_dir / "run.json").is_file():
        raise ExportError(f"{run_dir} is a sweep: export each ramp folder in it")
    if fmt == "parquet":
        if not isinstance(out, (str, Path)):
            raise ExportError("--format parquet writes a file: give --output FILE")
        write_parquet(run_dir, out, per_request=per_request)
    else:
        write_csv(run_dir, out, per_request=per_request)


__all__ = ["ExportError", "FORMATS", "SUMMARY_COLUMNS", "csv_safe", "export",
           "summary_frame", "summary_rows", "write_csv", "write_parquet"]

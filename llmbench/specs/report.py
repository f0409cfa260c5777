"""The specs of the commands that read run folders or look around: ``llmbench report``,
``compare``, ``runs``, ``dashboard``, ``datasets inspect`` (what they do:
llmbench/commands/report.py) and ``servers`` (llmbench/commands/local.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Iterator, List, Sequence

from llmbench.specs.groups import InspectWorkloadOpts, OutputOpts, command_defaults
from llmbench.specs.options import (FLAG, INT, PATH, REQUIRED, TEXTS, Kind, Spec, count, option,
                                    problem)

PATHS = Kind(List[Path], lambda v, flag: [PATH.parse(x, flag) for x in
                                           (v if isinstance(v, (list, tuple)) else [v])],
             lambda v: [str(x) for x in v], doc="list[Path]")


@dataclasses.dataclass
class ReportSpec(Spec):
    """``llmbench report RUN_DIR``: a run's report: one self-contained HTML file
    (RUN_DIR/report.html), markdown for a PR, CSV or Parquet (``per_request``: one row per
    request)."""

    command = "report"

    run_dir: Path | str = option("A run or sweep folder (results/<date>-<kind>...).", kind=PATH, argument=True, default=REQUIRED)
    format: str = option("html | md | csv | parquet", None, "--format", default="html")
    output: Path | str | None = option("Where to write (html default: RUN_DIR/report.html; md/csv: stdout; parquet: needed).", None, "--output", "-o", kind=PATH)
    per_request: bool = option("csv/parquet: one row per request (requests.jsonl, with ttft_ms, e2el_ms, itl_mean_ms...) instead of one per run or ramp step.", None, "--per-request", kind=FLAG, default=False)

    def _check(self) -> Iterator[str]:
        if self.format not in ("html", "md", "csv", "parquet"):
            yield f"--format {self.format!r}: choose html, md, csv or parquet"
        if self.per_request and self.format not in ("csv", "parquet"):
            yield "--per-request goes with --format csv or parquet"


@dataclasses.dataclass
class CompareSpec(Spec):
    """``llmbench compare RUN_DIR...``: runs side by side (e.g. OLLAMA_NUM_PARALLEL=1 vs 4), the
    first the baseline, with a regression gate for CI (``max_regression``)."""

    command = "compare"

    run_dirs: Sequence[Path | str] = option("Two or more run folders; the first is the baseline.", kind=PATHS, argument=True, default=REQUIRED)
    max_regression: str | None = option("Exit 1 when a metric got worse by more than this, e.g. 10%.")
    metric: list[str] | None = option("held, ttft.p50, ttft.p95, ttft.p99, itl.p50, itl.p95, e2el.p50, e2el.p95, output_throughput (repeatable).", None, "--metric", kind=TEXTS, metavar="NAME")
    html_out: Path | str | None = option("Where to write the HTML comparison (default: compare-A-vs-B.html beside the last run's folder).", None, "--html", kind=PATH)
    png: Path | str | None = option("Also write the overlay chart as a PNG.", kind=PATH)


@dataclasses.dataclass
class RunsSpec(Spec):
    """``llmbench runs``: the run folders under ``out``: date, command, labels, headline."""

    command = "runs"

    out: Path | str = dataclasses.field(default=Path("results"),        # OutputOpts' --out
                                        metadata=OutputOpts.__dataclass_fields__["out"].metadata)


@dataclasses.dataclass(kw_only=True)
@command_defaults(opts={"dataset": {"argument": True, "metavar": "SPEC",
                                    "help": "synthetic | random | words | FILE | hf:NAME"}},
                  dataset=REQUIRED)
class InspectSpec(InspectWorkloadOpts):
    """``llmbench datasets inspect SPEC``: counts, length distributions and the fingerprint of
    a workload, before it is sent."""

    command = "datasets inspect"

    count: int = option("Conversations to sample (synthetic/random/ShareGPT).", kind=INT, default=1000)


@dataclasses.dataclass
class DashboardSpec(Spec):
    """``llmbench dashboard FOLDER``: a finished run or sweep on a page, to look at later or to
    share on a LAN (``host="0.0.0.0"`` only when asked)."""

    command = "dashboard"

    folder: Path | str = option("A run or sweep folder (results/<date>-<kind>...).", kind=PATH, argument=True, default=REQUIRED)
    host: str = option("The address to listen on (0.0.0.0: every interface, to share the page on a LAN).", default="127.0.0.1", metavar="ADDR")
    port: int = option("The port (0: any free one, printed).", kind=INT, default=0)

    def _check(self) -> Iterator[str]:
        yield from problem(count, self.port, "--port", lo=0, hi=65535)


@dataclasses.dataclass(kw_only=True)
class ServersSpec(Spec):
    """``llmbench servers``: every server found (engine, version, models, slots, context),
    the one a command with no --url would measure first."""

    command = "servers"

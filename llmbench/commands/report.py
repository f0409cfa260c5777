"""``llmbench report``, ``compare`` and ``runs``: their specs and what they do, for the command
line and the Python API alike (``llmbench.report()``, ``llmbench.compare()``)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import Iterator, TYPE_CHECKING, Any, List, Sequence

from llmbench.commands.options import (FLAG, INT, PATH, REQUIRED, TEXTS, Kind, Spec, UsageError,
                                       option)
from llmbench.specs.groups import InspectWorkloadOpts, OutputOpts, command_defaults

if TYPE_CHECKING:
    from llmbench.analysis.compare import Comparison as CompareResult

PATHS = Kind(List[Path], lambda v, flag: [PATH.parse(x, flag) for x in
                                           (v if isinstance(v, (list, tuple)) else [v])],
             lambda v: [str(x) for x in v], doc="list[Path]")


@dataclasses.dataclass
class Report:
    """What ``report`` made: the file it wrote, or (md and csv with no ``output``) the text;
    ``notes``: what it said about the run (rebuilt, partial)."""

    path: Path | None
    text: str | None = None
    notes: list[str] = dataclasses.field(default_factory=list)


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

    def perform(self) -> Report:
        from llmbench.analysis.recover import REBUILT_NOTE, load_checked
        run_dir, output = Path(self.run_dir), self.output
        sweep = (run_dir / "sweep.json").is_file()
        if self.format == "parquet" or self.per_request:
            from llmbench.report.export import ExportError, export
            if not sweep:
                load_checked(run_dir)       # one line for a folder that is not a run
            sink = io.StringIO()
            try:
                export(run_dir, output if output is not None else sink, self.format,
                       per_request=self.per_request)
            except ExportError as exc:
                raise UsageError(str(exc))
            return Report(Path(output)) if output is not None else Report(None, sink.getvalue())
        if sweep:
            if self.format != "html":
                raise UsageError(f"{run_dir} is a sweep: its report is html; each ramp folder "
                                 "in it has md and csv")
            from llmbench.report.sweep_html import write as write_sweep
            return Report(Path(write_sweep(run_dir, output)))
        run = load_checked(run_dir)   # says so if the folder or its schema is wrong; rebuilds a killed run
        notes = []
        if run.live_writer:
            notes.append(f"note: {run_dir} is in progress ({run.live_writer}): reporting "
                         "what has finished so far; run.json is left to it")
        elif run.state.note == REBUILT_NOTE:
            notes.append(f"note: {run_dir}: summary {REBUILT_NOTE}")
        elif run.status == "partial":
            notes.append(f"note: {run_dir} is a partial run (interrupted); reporting what finished")
        if self.format == "html":
            from llmbench.report.html import write
            return Report(Path(write(run_dir, output)), notes=notes)
        from llmbench.report.text import to_csv, to_markdown
        text = to_markdown(run_dir) if self.format == "md" else to_csv(run_dir)
        if output is None:
            return Report(None, text, notes)
        Path(output).write_text(text, encoding="utf-8")
        return Report(Path(output), notes=notes)


@dataclasses.dataclass
class Comparison:
    """What ``compare`` found: ``data`` (the typed comparison: runs, table, regressions), its text
    as the command line prints it, and the HTML (and PNG) it wrote."""

    data: CompareResult
    text: str
    html: Path
    png: Path | None = None

    @property
    def regressions(self) -> list[Any]:
        return list(self.data.regressions)

    @property
    def passed(self) -> bool:
        """No metric got worse by more than ``max_regression`` (the command line exits 1)."""
        return not self.regressions


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

    def perform(self) -> Comparison:
        from llmbench.analysis.compare import DEFAULT_METRICS, CompareError, compare, load_runs, parse_max_regression
        from llmbench.analysis.recover import load_checked
        from llmbench.report import compare_html
        try:
            limit = None if self.max_regression is None else parse_max_regression(self.max_regression)
        except CompareError as exc:
            raise UsageError(str(exc))
        dirs = [Path(d) for d in self.run_dirs]
        for d in dirs:
            load_checked(d, "compare")    # a failed or killed run: one line, or a rebuilt summary
        try:
            runs = load_runs(dirs)
            result = compare(runs, tuple(self.metric or DEFAULT_METRICS), limit)
        except CompareError as exc:
            raise UsageError(str(exc))
        # beside the candidate's folder (not inside it: a run folder holds what its run wrote;
        # not into whatever folder the shell is in), named for what it compares
        path = compare_html.write(result, runs, self.html_out or default_html(dirs))
        png = None
        if self.png is not None:
            from llmbench.report.charts import compare_png
            from llmbench.report.svgplot import MissingExtra
            try:
                compare_png([(r.name, r.steps) for r in runs], "users", str(self.png))
            except MissingExtra as exc:
                raise UsageError(str(exc))
            png = Path(self.png)
        return Comparison(result, compare_html.console_text(result), Path(path), png)


def default_html(dirs: Sequence[Path]) -> Path:
    """compare's page when --html does not say: ``compare-A-vs-B.html`` (the folders' names)
    in the folder that holds the last run (results/), so no run folder is written into."""
    names = "-vs-".join(d.resolve().name for d in dirs[:2]) + ("-etc" if len(dirs) > 2 else "")
    return dirs[-1].resolve().parent / f"compare-{names}.html"


@dataclasses.dataclass
class RunsSpec(Spec):
    """``llmbench runs``: the run folders under ``out``: date, command, labels, headline."""

    command = "runs"

    out: Path | str = dataclasses.field(default=Path("results"),        # OutputOpts' --out
                                        metadata=OutputOpts.__dataclass_fields__["out"].metadata)

    def perform(self) -> list[dict[str, Any]]:
        from llmbench.results.folder import list_runs
        return list_runs(Path(self.out))


@dataclasses.dataclass(kw_only=True)
@command_defaults(opts={"dataset": {"argument": True, "metavar": "SPEC",
                                    "help": "synthetic | random | words | FILE | hf:NAME"}},
                  dataset=REQUIRED)
class InspectSpec(InspectWorkloadOpts):
    """``llmbench datasets inspect SPEC``: counts, length distributions and the fingerprint of
    a workload, before it is sent."""

    command = "datasets inspect"

    count: int = option("Conversations to sample (synthetic/random/ShareGPT).", kind=INT, default=1000)

    def perform(self) -> tuple[Any, Any] | list[str]:
        """(Workload, tokenizer) of ``count`` conversations; for a file of sessions (a
        recording, an agent trace: workload/trace_summary.py) the lines that summarise it."""
        import os
        if isinstance(self.dataset, str) and os.path.isfile(self.dataset):
            from llmbench.workload.files import DatasetError
            from llmbench.workload.tokenizer import load_tokenizer
            from llmbench.workload.trace_summary import summarise_file
            try:
                lines = summarise_file(self.dataset, load_tokenizer(
                    None if self.tokenizer in (None, "server") else self.tokenizer))
            except DatasetError as exc:
                raise UsageError(str(exc)) from None
            if lines is not None:
                return lines
        return self.build(self.count)

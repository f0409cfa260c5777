"""``llmbench report``, ``compare``, ``runs``, ``dashboard`` and ``datasets inspect``: what they
do with their specs (llmbench/specs/report.py), for the command line and the Python API alike
(``llmbench.report()``, ``llmbench.compare()``)."""

from __future__ import annotations

import dataclasses
import io
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence

from llmbench.errors import UsageError
from llmbench.specs.report import CompareSpec, DashboardSpec, InspectSpec, ReportSpec, RunsSpec

if TYPE_CHECKING:
    from llmbench.analysis import compare


@dataclasses.dataclass
class Report:
    """What ``report`` made: the file it wrote, or (md and csv with no ``output``) the text;
    ``notes``: what it said about the run (rebuilt, partial)."""

    path: Path | None
    text: str | None = None
    notes: list[str] = dataclasses.field(default_factory=list)


def perform_report(spec: ReportSpec) -> Report:
    """``llmbench report``: the file written, or the text (md and csv with no --output)."""
    from llmbench.analysis.recover import load_noted
    run_dir, output = Path(spec.run_dir), spec.output
    sweep = (run_dir / "sweep.json").is_file()
    if spec.format == "parquet" or spec.per_request:
        from llmbench.report.export import ExportError, export
        if not sweep:
            load_noted(run_dir)         # one line for a folder that is not a run
        sink = io.StringIO()
        try:
            export(run_dir, output if output is not None else sink, spec.format,
                   per_request=spec.per_request)
        except ExportError as exc:
            raise UsageError(str(exc))
        return Report(Path(output)) if output is not None else Report(None, sink.getvalue())
    if sweep:
        if spec.format != "html":
            raise UsageError(f"{run_dir} is a sweep: its report is html; each ramp folder "
                             "in it has md and csv")
        from llmbench.report.sweep_html import write as write_sweep
        return Report(Path(write_sweep(run_dir, output)))
    # says so if the folder or its schema is wrong; rebuilds a killed run
    _, notes = load_noted(run_dir)
    if spec.format == "html":
        from llmbench.report.html import write
        return Report(Path(write(run_dir, output)), notes=notes)
    from llmbench.report.text import to_csv, to_markdown
    text = to_markdown(run_dir) if spec.format == "md" else to_csv(run_dir)
    if output is None:
        return Report(None, text, notes)
    Path(output).write_text(text, encoding="utf-8")
    return Report(Path(output), notes=notes)


@dataclasses.dataclass
class Comparison:
    """What ``compare`` found: ``data`` (the typed comparison: runs, table, regressions), its text
    as the command line prints it, and the HTML (and PNG) it wrote."""

    data: compare.Comparison
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


def perform_compare(spec: CompareSpec) -> Comparison:
    """``llmbench compare``: the comparison, its text, and the HTML (and PNG) written."""
    from llmbench.analysis import compare
    from llmbench.report import compare_html
    dirs = [Path(d) for d in spec.run_dirs]
    # a bad folder or --max-regression is a CompareError: one line (specs.errors.translate)
    result, runs = compare.compare_folders(dirs, spec.metric, spec.max_regression)
    path = compare_html.write(result, runs, spec.html_out or default_html(dirs))
    png = None
    if spec.png is not None:
        from llmbench.report.charts import compare_png
        from llmbench.report.svgplot import MissingExtra
        try:
            compare_png([(r.name, r.steps) for r in runs], "users", str(spec.png))
        except MissingExtra as exc:
            raise UsageError(str(exc))
        png = Path(spec.png)
    return Comparison(result, compare_html.console_text(result), Path(path), png)


def default_html(dirs: Sequence[Path]) -> Path:
    """compare's page when --html does not say: ``compare-A-vs-B.html`` (the folders' names)
    beside the last run's folder (results/): not inside it (a run folder holds what its run
    wrote), nor wherever the shell is."""
    names = "-vs-".join(d.resolve().name for d in dirs[:2]) + ("-etc" if len(dirs) > 2 else "")
    return dirs[-1].resolve().parent / f"compare-{names}.html"


def perform_runs(spec: RunsSpec) -> list[Any]:
    """``llmbench runs``: the run folders under --out, newest first."""
    from llmbench.results.folder import list_runs
    return list_runs(Path(spec.out))


def perform_inspect(spec: InspectSpec) -> tuple[Any, Any] | list[str]:
    """(Workload, tokenizer) of ``count`` conversations; for a file of sessions (a
    recording, an agent trace: workload/trace_summary.py) the lines that summarise it."""
    import os
    if isinstance(spec.dataset, str) and os.path.isfile(spec.dataset):
        from llmbench.workload.files import DatasetError
        from llmbench.workload.tokenizer import load_tokenizer
        from llmbench.workload.trace_summary import summarise_file
        try:
            lines = summarise_file(spec.dataset, load_tokenizer(
                None if spec.tokenizer in (None, "server") else spec.tokenizer))
        except DatasetError as exc:
            raise UsageError(str(exc)) from None
        if lines is not None:
            return lines
    return spec.build(spec.count)


def perform_dashboard(spec: DashboardSpec, listening: Callable[[int], Any]) -> None:
    """``llmbench dashboard``: serve the folder (report/dashboard/server.py) until Ctrl-C;
    ``listening(port)`` once the page answers."""
    from llmbench.report.dashboard.server import folder_html, serve_folder
    folder = Path(spec.folder)
    if not folder.is_dir():
        raise UsageError(f"{folder}: no such folder; give a run or sweep folder "
                         "(llmbench runs lists them)")
    text = folder_html(folder)
    try:
        serve_folder(folder, text, spec.host, spec.port, listening)
    except OSError as exc:
        raise UsageError(f"--host {spec.host} --port {spec.port}: cannot listen there "
                         f"({exc.strerror or exc}); choose a free port, or 0 for any")

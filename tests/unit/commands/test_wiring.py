"""A command is wiring (issue 44 §2): spec -> plan -> harness -> analysis.finish -> save ->
render. Only analysis.finish builds a Run; the commands reach into analysis and results through
few names (scripts/count_command_imports.py counts them)."""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
COMMANDS = ROOT / "llmbench" / "commands"

# scripts/count_command_imports.py on this branch: 115 on main before the one assembler, 22
# after it, 12 once the sweep's judgement and folder, the record's closing lines and the
# ramp's repeats went below (run, ramp, probe, sweep: the assembler and their folder)
MOST_NAMES = 12


def _script():
    spec = importlib.util.spec_from_file_location(
        "count_command_imports", ROOT / "scripts" / "count_command_imports.py")
    mod = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(mod)
    return mod


def _constructs_run(path: Path) -> list[int]:
    """The lines where ``Run(...)`` is called in one module."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name) and n.func.id == "Run"]


def test_no_command_module_constructs_a_run():
    found = {p.name: lines for p in sorted(COMMANDS.rglob("*.py"))
             if (lines := _constructs_run(p))}
    assert not found, f"Run(...) is built in analysis/finish.py only, not in {found}"


def test_the_check_sees_a_run_constructed(tmp_path):
    # the check itself: a module that builds a Run is caught (and one that only names it is not)
    bad = tmp_path / "bad.py"
    bad.write_text("from llmbench.results.schema import Run\n\n\ndef f():\n"
                   "    return Run(kind='run', status='running')\n")
    ok = tmp_path / "ok.py"
    ok.write_text("from llmbench.results.schema import Run\n\n\ndef f(r: Run):\n"
                  "    return Run.load(r.path)\n")
    assert _constructs_run(bad) == [5] and _constructs_run(ok) == []


def test_commands_import_few_names_from_analysis_and_results():
    found = _script().count()
    total = sum(len(v) for v in found.values())
    assert total <= MOST_NAMES, (
        f"{total} names imported from llmbench.analysis/results by commands/ (at most "
        f"{MOST_NAMES}): {sorted(n for v in found.values() for n in v)}")
    # the run command itself: the assembler and its run folder (the threshold grammar is the
    # specs', llmbench/specs/thresholds.py)
    assert found["llmbench/commands/run.py"] == {
        "llmbench.analysis.finish", "llmbench.results.writer.RunFolder"}


def test_the_count_counts_lazy_imports_too(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text("from llmbench.analysis import slo, stats\nimport llmbench.results.lock\n\n\n"
                   "def f():\n    from llmbench.results.schema import Run, Step\n"
                   "    from llmbench.report import console\n")
    assert _script().names_of(mod) == {
        "llmbench.analysis.slo", "llmbench.analysis.stats", "llmbench.results.lock",
        "llmbench.results.schema.Run", "llmbench.results.schema.Step"}

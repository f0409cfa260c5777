"""llmbench in a test suite: "the server holds 8 users" as one assertion (a pytest plugin,
registered through the ``pytest11`` entry point, so installing llmbench is enough). The README's
"In a test suite: pytest" has an example and what a failure says.

- ``assert_holds(url=..., model=..., users=8, threshold=[...], **ramp_options)``: a ramp that
  must hold at its last step; ``assert_run(url=..., model=..., threshold=[...], **run_options)``:
  one load level whose thresholds must pass. Both return the ``Run``. Every keyword is the
  command line's option in snake_case; run folders go under pytest's temporary folder unless
  ``out=`` says where. A bad option is an error (``UsageError``), not a failure.
- the ``llmbench_mock`` fixture (``MockServers``): the built-in mock, for the test.
- the ``load`` marker: such tests are deselected unless the ``-m`` expression names ``load``
  (``pytest -m load``, ``-m "load or not load"``): load tests take seconds to minutes and want
  a quiet machine.

The module is imported by pytest at every start in any project where llmbench is installed: it
imports nothing of llmbench until a test uses it, and changes nothing for tests that do not.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmbench.results.schema import Run

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

__all__ = ["assert_holds", "assert_run", "LoadAssertionError", "MockHandle"]

MARKER = "load"
_CONFIG: list[Any] = []          # the pytest config of this session (its temporary folders)


class LoadAssertionError(AssertionError):
    """A load assertion that did not hold; ``run`` is what was measured (a ``Run``)."""

    def __init__(self, message: str, run: "Run | None" = None) -> None:
        super().__init__(message)
        self.run = run


# -- the plugin's hooks ---------------------------------------------------------------------------
def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}: a load test (llmbench); deselected unless -m names '{MARKER}', "
                   f"e.g. pytest -m {MARKER}")
    _CONFIG[:] = [config]


def pytest_unconfigure(config: Any) -> None:
    _CONFIG[:] = []


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    expr = config.getoption("markexpr", "") or ""
    if MARKER in expr.replace("(", " ").replace(")", " ").split():
        return                              # asked for by name: -m decides
    keep, drop = [], []
    for item in items:
        (drop if item.get_closest_marker(MARKER) is not None else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


# -- the mock fixture -----------------------------------------------------------------------------
@dataclass
class MockHandle:
    """A running mock: ``url`` is its OpenAI-style base URL, ``model`` the model it serves."""

    url: str
    model: str
    options: dict[str, Any] = field(default_factory=dict)


class MockServers:
    """The ``llmbench_mock`` fixture: ``llmbench_mock.url`` starts (once) a mock with the default
    settings; ``llmbench_mock(**options)`` starts one more with ``llmbench mock``'s options.
    All stop when the test ends."""

    def __init__(self) -> None:
        self._stack: list[Any] = []
        self._default: MockHandle | None = None

    def __call__(self, **options: Any) -> MockHandle:
        import llmbench
        models = options.get("models")
        cm = llmbench.mock(**options)
        url = cm.__enter__()
        self._stack.append(cm)
        model = models[0] if isinstance(models, (list, tuple)) and models else \
            (models.split(",")[0] if isinstance(models, str) and models else "mock")
        return MockHandle(url, model, dict(options))

    @property
    def default(self) -> MockHandle:
        if self._default is None:
            self._default = self()
        return self._default

    @property
    def url(self) -> str:
        return self.default.url

    @property
    def model(self) -> str:
        return self.default.model

    def close(self) -> None:
        while self._stack:
            self._stack.pop().__exit__(None, None, None)


@pytest.fixture
def llmbench_mock() -> Iterator[MockServers]:
    """The built-in mock in a child process on a free loopback port, for this test."""
    servers = MockServers()
    try:
        yield servers
    finally:
        servers.close()


# -- the assertions -------------------------------------------------------------------------------
def _measure(command: Any, what: str, url: Any, **options: Any) -> Any:
    """``command`` (llmbench.run or llmbench.ramp), its run folder under pytest's temporary
    folder (kept for the last runs, as tmp_path's) unless ``out=`` says where; what could not be
    measured fails the test, a bad option stays an error."""
    __tracebackhide__ = True
    from llmbench.errors import LlmbenchError, UsageError
    if options.get("out") is None:
        factory = getattr(_CONFIG[0], "_tmp_path_factory", None) if _CONFIG else None
        options["out"] = factory.mktemp("llmbench") if factory is not None else \
            Path(tempfile.mkdtemp(prefix="llmbench-"))
    try:
        return command(url=url, **options)
    except UsageError:
        raise
    except LlmbenchError as exc:
        raise _unmeasured(exc, what, url) from None


def _unmeasured(exc: Exception, what: str, url: Any) -> LoadAssertionError:
    """Nothing (or not all) was measured: the command line's line, and what there is."""
    run = getattr(exc, "run", None)
    text = f"llmbench: {what} against {url} could not be measured: {exc}"
    if run is not None and run.steps:
        text += "\n" + _steps_text(run)
    if run is not None and run.path is not None:
        text += f"\nRun folder: {run.path}"
    return LoadAssertionError(text, run)


def _steps_text(run: "Run") -> str:
    from llmbench import wire
    from llmbench.report import console
    steps = run.steps
    unit = "Users" if run.load_unit == "users" else "Req/s"
    api = str(run.target.get("api") or "openai-chat")
    try:
        output = wire.get(api).output
    except Exception:  # noqa: BLE001 - an API this llmbench does not know: tokens
        output = "tokens"
    return "\n".join([console.ramp_header(unit, output)] + [console.ramp_row(s) for s in steps])


def _checks_text(checks: list[Any], where: str) -> str:
    """Thresholds (results.schema.Check), each ok or FAIL with its figure."""
    if not checks:
        return f"Thresholds{where}: none"
    lines = [f"Thresholds{where}:"]
    for c in checks:
        lines.append(f"  {'ok  ' if c.ok else 'FAIL'}  {c.text or c.threshold}")
    return "\n".join(lines)


def assert_holds(*, url: str, model: str | None = None, users: int | list[int] = 8,
                 threshold: str | list[str] | None = None, **options: Any) -> Any:
    """Fail the test unless the server holds ``users`` (a ramp's last step) under the
    thresholds. Returns the ``Run`` (``run.held``, ``run.steps``, ``run.verdict``)."""
    __tracebackhide__ = True                # a failure shows the test's line and the message
    import llmbench
    from llmbench.errors import UsageError
    from llmbench.report import console
    steps = [users] if isinstance(users, int) else list(users)
    if not steps or any(isinstance(u, bool) or not isinstance(u, int) or u < 1 for u in steps):
        raise UsageError(f"assert_holds(users={users!r}): users are whole numbers >= 1, e.g. "
                         "users=8 or users=[1, 2, 4, 8]")
    target = max(steps)
    run = _measure(llmbench.ramp, f"the ramp to {target} users", url, model=model, users=steps,
                   threshold=threshold, **options)
    held = run.held or 0
    if held >= target:
        return run
    v = run.verdict
    broke = next((s for s in run.steps if not s.held), run.steps[-1] if run.steps else None)
    lines = [f"llmbench: the server did not hold {target:g} users (held {held:g}) at {url}"
             + (f" (model {model})" if model else ""),
             console.verdict_text(v) if v is not None and v.text else "No step finished.",
             _steps_text(run),
             _checks_text(broke.checks if broke is not None else [],
                          f" at {broke.load if broke is not None else target:g} users")]
    if run.path is not None:
        lines.append(f"Run folder: {run.path} (report.html: the charts and the timeline)")
    raise LoadAssertionError("\n".join(lines), run)


def assert_run(*, url: str, model: str | None = None, threshold: str | list[str] | None = None,
               **options: Any) -> Any:
    """Fail the test unless one load level (``llmbench.run``'s options: ``concurrency``,
    ``rate``, ``requests``, ``duration``...) passes every threshold, and some request
    succeeded. Returns the ``Run`` (``run.summary.ttft.p95`` ...)."""
    __tracebackhide__ = True
    import llmbench
    run = _measure(llmbench.run, "the run", url, model=model, threshold=threshold, **options)
    checks = run.findings.thresholds
    failed = [c for c in checks if not c.ok]
    s = run.summary
    if not failed and s is not None and s.completed > 0:
        return run
    lines = [f"llmbench: the run at {url}" + (f" (model {model})" if model else "") + " "
             + (f"failed {len(failed)} of {len(checks)} thresholds" if failed
                else "had no successful request"),
             _summary_line(run), _checks_text(checks, "")]
    if run.path is not None:
        lines.append(f"Run folder: {run.path} (report.html: the charts and the timeline)")
    raise LoadAssertionError("\n".join(lines), run)


def _summary_line(run: "Run") -> str:
    from llmbench.report.console import fmt_ms
    s = run.summary
    if s is None:
        return "Summary: none (nothing finished)"
    load = run.load_config
    level = (f"{load.get('concurrency')} concurrent" if load.get("concurrency")
             else f"{load.get('rate')} req/s" if load.get("rate") else "")
    return (f"Summary{' at ' + level if level else ''}: {s.requests} requests, {s.completed} "
            f"succeeded, {s.failed} failed"
            + (f" ({', '.join(f'{k} {n}' for k, n in s.errors.items())})" if s.errors else "")
            + f"; TTFT p50 {fmt_ms(s.ttft.median)}, p95 {fmt_ms(s.ttft.p95)}, p99 "
            f"{fmt_ms(s.ttft.p99)}; ITL p50 {fmt_ms(s.itl.median)}, p95 {fmt_ms(s.itl.p95)}; "
            f"E2EL p95 {fmt_ms(s.e2el.p95)}; {s.output_throughput or 0:.1f} output tok/s")

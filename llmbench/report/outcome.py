"""What ``run``, ``ramp`` and ``probe`` print of their result once it is made (and their live
lines while it is made): the render step of a command, so that the command itself is wiring
(spec -> plan -> harness -> analysis.finish -> save -> render)."""

from __future__ import annotations

from typing import Any

from llmbench.analysis import network, prefix_hit
from llmbench.analysis.finish import BEHIND_P99_MS
from llmbench.report import console, screen
from llmbench.results.schema import Run


# -- llmbench run ---------------------------------------------------------------------------------

def trace_lines(trace: dict[str, Any], lag: dict[str, Any], speed: float) -> list[str]:
    """``run --trace``: the trace replayed, and how late its dispatch was."""
    lines = [f"Trace replay: {trace['format']} {trace['path']}, {trace['requests']} requests "
             f"over {trace['span_s'] / speed:.1f} s (speed {speed:g}x)"]
    if lag["requests"]:
        lines.append(f"Dispatch lag vs trace: p50 {lag['p50_ms']:.2f} ms, "
                     f"p99 {lag['p99_ms']:.2f} ms, max {lag['max_ms']:.2f} ms")
    if lag["behind"]:
        lines.append(f"warning: the replay could not keep up with the trace (dispatch lag p99 "
                     f"{lag['p99_ms']:.1f} ms > {BEHIND_P99_MS:g} ms): the server saw a gentler "
                     "load than the trace's; lower --trace-speed or use a faster machine")
    return lines


def show_run(run: Run, percentile_metrics: tuple[str, ...],
             metric_percentiles: tuple[float, ...], max_concurrency: Any,
             request_rate: Any) -> None:
    """``llmbench run``'s numbers: vLLM's summary, llmbench's extras, then each optional part
    the run has (sessions, prefix cache, trace, abandonment, network, thresholds)."""
    s = run.summary
    assert s is not None
    print(console.vllm_summary(s, percentile_metrics, metric_percentiles,
                               max_concurrency=max_concurrency, request_rate=request_rate))
    screen.say(console.extras(s, run.monitor))
    for line in console.session_lines(run.sessions):
        print(line)
    if run.prefix_cache:
        print("\n".join(prefix_hit.lines(run.prefix_cache)))
    if run.trace is not None:
        for line in trace_lines(run.trace, run.trace["dispatch_lag"], run.trace["speed"]):
            print(line)
    if run.abandonment is not None:
        screen.say(console.abandonment_lines(run.abandonment))
    found = network.of_summary(s, run.network)
    if found is not None:
        screen.say(f"Network: {found.sentence}")
    if run.thresholds:
        screen.say(console.threshold_lines(run.thresholds))


def show_classes_run(run: Run, percentile_metrics: tuple[str, ...],
                     metric_percentiles: tuple[float, ...], load: dict[str, Any], shape: Any,
                     api: str) -> None:
    """``run --scenario``'s numbers: the whole crowd's, then each class's row and every
    class's thresholds."""
    from llmbench import wire
    from llmbench.results.schema import Step
    s = run.summary
    assert s is not None
    print(console.vllm_summary(s, percentile_metrics, metric_percentiles,
                               max_concurrency=load["concurrency"], request_rate=load["rate"]))
    screen.say(console.extras(s, run.monitor))
    if run.classes:
        print()
        print(console.ramp_header("Users" if shape.by == "users" else "Req/s",
                                  wire.get(api).output))
        step = Step(load=shape.steps[0], summary=s, classes=run.classes)
        for row in console.class_rows(step):
            print(row)
    if run.abandonment is not None:
        screen.say(console.abandonment_lines(run.abandonment))
    if run.thresholds:
        screen.say(console.threshold_lines(run.thresholds))

"""Charts that do not mislead: the rules checked on each chart's description (svgplot.Chart,
what both the SVG and a PNG are drawn from), and on the SVG itself (what a reader gets).

Axes scale to the data (a far-off threshold is an annotation, not a stretched axis), load ticks
sit exactly on the steps, every plotted trace is in a legend, and the timeline marks its steps.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from llmbench.report import charts, svgplot
from llmbench.results.schema import ProbeStep, Step


def step(load, held=True, ttft=(60.0, 66.0, 70.0), itl=(7.8, 8.8, 11.0), tok_s=100.0, req_s=2.5,
         index=0, t0=0.0):
    s = {"output_throughput": tok_s, "request_throughput": req_s}
    for metric, vals in (("ttft", ttft), ("itl", itl)):
        for stat, v in zip(("median", "p95", "p99"), vals):
            s[f"{stat}_{metric}_ms"] = v
    return Step.from_dict({"index": index, "load": float(load), "held": held, "summary": s,
                           "ramp_start": t0, "hold_start": t0 + 0.5, "hold_end": t0 + 4.5})


def ramp(loads, broke_at=None):
    out = []
    for i, u in enumerate(loads):
        held = broke_at is None or u < broke_at
        out.append(step(u, held, ttft=(60 + 40 * i, 66 + 50 * i, 70 + 60 * i),
                        tok_s=110.0 * min(u, 4), req_s=2.75 * min(u, 4), index=i, t0=5.0 * i))
    return out


def plotted_labels(ax):
    """Labels of the traces drawn on a panel (lines, areas, bars, boxes), markup excluded."""
    return [lab for lab in ax.labels() if lab and not lab.startswith("_")]


def legend_texts(ax, chart):
    """What a reader can look up for this panel: its own legend and the chart's shared one."""
    own = [e.label for e in ax.legend_entries()] if ax.legend_at else []
    return own + [e.label for e in chart.legend]


def xticks(ax):
    return [t for t, _ in ax.shown_xticks()]


def xticklabels(ax):
    return [label for _, label in ax.shown_xticks()]


def texts(ax):
    return [t.text for t in ax.texts]


def lines(ax):
    return [t for t in ax.traces if isinstance(t, svgplot.Line)]


def finite_max(steps, metric):
    return max(s.summary.flat()[f"{st}_{metric}_ms"] for s in steps
               for st in ("median", "p95", "p99"))


def test_itl_axis_scales_to_the_data_and_a_far_threshold_is_an_annotation():
    steps = ramp([1, 2, 4, 6, 8], broke_at=8)
    fig = charts.ramp_latency_chart(steps, {"itl": 200.0, "ttft": 400.0}, "users")
    ttft_ax, itl_ax = fig.panels[:2]
    top = itl_ax.ylim[1]
    assert top <= 1.5 * finite_max(steps, "itl"), top          # not stretched to 200 ms
    assert itl_ax.ylim[0] == 0
    notes = texts(itl_ax)
    assert any("threshold" in n and "200 ms" in n and "↑" in n for n in notes), notes
    # a threshold near the data is a line on the axis, and the axis reaches it
    assert ttft_ax.ylim[1] >= 400
    rules = [m for m in ttft_ax.marks if getattr(m, "cls", "") == "threshold"]
    assert [m.at for m in rules] == [400] and rules[0].axis == "y"
    assert "threshold" in legend_texts(ttft_ax, fig)
    assert any("400 ms" in t for t in texts(ttft_ax))
    assert not [m for m in itl_ax.marks if getattr(m, "cls", "") == "threshold"]
    # and the SVG draws what the description says
    _, panels = svg_panels(charts.ramp_latency_chart(steps, {"itl": 200.0, "ttft": 400.0}, "users"))
    assert panels[0]["thresholds"] == [400.0] and not panels[1]["thresholds"]
    assert panels[1]["ylim"] == pytest.approx(itl_ax.ylim)
    assert any("↑" in t for t in panels[1]["texts"] if t)


def test_load_ticks_are_the_steps():
    steps = ramp([1, 2, 4, 6, 8])
    for fig in (charts.ramp_latency_chart(steps, {}, "users"),
                charts.ramp_throughput_chart(steps, "users")):
        for ax in fig.panels:
            assert xticks(ax) == [1, 2, 4, 6, 8]
            labels = xticklabels(ax)
            assert labels == ["1", "2", "4", "6", "8"], labels
        # the SVG writes exactly these ticks
        _, panels = svg_panels(svgplot.render(fig))
        for p in panels:
            assert p["xticks"] == [1, 2, 4, 6, 8] and p["xticklabels"] == ["1", "2", "4", "6", "8"]


def test_one_step_is_one_integer_tick_and_axes_from_zero():
    fig = charts.ramp_throughput_chart(ramp([3]), "users")
    for ax in fig.panels:
        assert xticks(ax) == [3]
        assert ax.ylim[0] == 0                                   # not a 305..335 zoom


def test_many_steps_keep_every_tick_but_do_not_overprint_labels():
    loads = list(range(1, 41))
    fig = charts.ramp_latency_chart(ramp(loads), {}, "users")
    ax = fig.panels[0]
    assert xticks(ax) == loads
    shown = [t for t in xticklabels(ax) if t]
    assert shown[0] == "1" and shown[-1] == "40" and len(shown) < len(loads)


def test_compare_ticks_are_the_union_of_the_runs_steps():
    fig = charts.compare_overlay_chart([("a", ramp([1, 2])), ("b", ramp([1, 2, 4, 6, 8], 8))],
                                       "users")
    for ax in fig.panels:
        assert xticks(ax) == [1, 2, 4, 6, 8]
        assert ax.ylim[0] == 0
        # every run and the meaning of the x marker are in the legend
    names = [t for ax in fig.panels for t in legend_texts(ax, fig)]
    assert "a" in names and "b" in names and any("did not hold" in t for t in names)
    root, _ = svg_panels(svgplot.render(fig))
    shared = [t.text for t in root.iter(f"{SVG_NS}text") if t.get("class") == "legend-entry"]
    assert "a" in shared and "b" in shared and any("did not hold" in t for t in shared)


def test_compare_of_identical_runs_keeps_both_visible():
    """Two identical runs must not draw one line exactly over the other in the same style."""
    fig = charts.compare_overlay_chart([("a", ramp([1, 2])), ("b", ramp([1, 2]))], "users")
    a, b = [ln for ln in lines(fig.panels[0]) if ln.label in ("a", "b")]
    assert (a.marker, a.style) != (b.marker, b.style)


def test_throughput_lines_do_not_share_one_panel():
    fig = charts.ramp_throughput_chart(ramp([1, 2, 4]), "users")
    per_axis = [plotted_labels(ax) for ax in fig.panels]
    assert all(len(p) <= 1 for p in per_axis), per_axis          # no twin axes, no hiding
    units = " ".join(ax.ylabel for ax in fig.panels)
    assert "tok/s" in units and "req/s" in units


def timeline_rows(n=20, server=True):
    rows = []
    for i in range(n):
        users = 1 + i // 5
        r = {"t": float(i + 1), "users": users, "in_flight": users, "waiting_first_token": 0,
             "streaming": users, "thinking": 0, "tok_s": 100.0 * users,
             "ttft_p95_recent_ms": 60.0 + i}
        if server:
            r.update(server_running=min(users, 2), server_waiting=max(users - 2, 0))
        rows.append(r)
    return rows


SVG_NS = "{http://www.w3.org/2000/svg}"


def svg_panels(svg):
    """The panels of a hand-written SVG chart (svgplot): what each draws and lists."""
    import xml.etree.ElementTree as ET
    if isinstance(svg, svgplot.Chart):
        svg = svgplot.render(svg)
    root = ET.fromstring(svg)
    out = []
    for g in root.iter(f"{SVG_NS}g"):
        if g.get("class") != "panel":
            continue
        out.append({
            "traces": [t.get("data-label") for t in g.iter(f"{SVG_NS}g")
                       if t.get("class") == "trace" and len(t)],
            "legend": [t.text for t in g.iter(f"{SVG_NS}text") if t.get("class") == "legend-entry"],
            "ylim": tuple(float(v) for v in g.get("data-ylim").split()),
            "xlim": tuple(float(v) for v in g.get("data-xlim").split()),
            "ylabel": g.get("data-ylabel"),
            "marks": [float(ln.get("data-x")) for ln in g.iter(f"{SVG_NS}line")
                      if ln.get("class") == "step-boundary"],
            "thresholds": [float(ln.get("data-y")) for ln in g.iter(f"{SVG_NS}line")
                           if ln.get("class") == "threshold"],
            "xticks": [float(t.get("data-x")) for t in g.iter(f"{SVG_NS}text")
                       if t.get("class") == "xtick"],
            "xticklabels": [t.text or "" for t in g.iter(f"{SVG_NS}text")
                            if t.get("class") == "xtick"],
            "step_labels": [t.text for t in g.iter(f"{SVG_NS}text")
                            if t.get("class") == "step-label"],
            "texts": ["".join(t.itertext()) for t in g.iter(f"{SVG_NS}text")],
        })
    return root, out


def test_timeline_legend_lists_every_trace_and_marks_steps():
    steps = ramp([1, 2, 3, 4])                      # ramp_start 0, 5, 10, 15 s after t0
    _, panels = svg_panels(charts.timeline_chart(timeline_rows(), steps, t0_perf=0.0))
    assert len(panels) == 4                         # requests, TTFT, tok/s, server
    for p in panels:
        assert p["traces"] and set(p["traces"]) <= set(p["legend"]), p
    all_legend = [t for p in panels for t in p["legend"]]
    assert any("tok/s" in t for t in all_legend), all_legend
    assert sorted(panels[0]["marks"]) == [0.0, 5.0, 10.0, 15.0]
    assert all(sorted(p["marks"]) == [0.0, 5.0, 10.0, 15.0] for p in panels)
    labels = panels[0]["step_labels"]
    assert labels == ["1", "2", "3", "4"] or labels[0].startswith("1"), labels
    assert [p["ylabel"] for p in panels] == ["requests / users", "ms", "tok/s", "requests"]


def test_timeline_of_a_run_without_steps_or_server():
    _, panels = svg_panels(charts.timeline_chart(timeline_rows(8, server=False)))
    assert len(panels) == 3
    assert not [m for p in panels for m in p["marks"]]
    for p in panels:
        assert set(p["traces"]) <= set(p["legend"])
        assert p["ylim"][0] == 0
        assert p["ylim"][1] > 0


def test_timeline_axes_span_the_data():
    """Each panel from zero to just above its own data (users reach 4, tok/s 400)."""
    _, panels = svg_panels(charts.timeline_chart(timeline_rows(20, server=False)))
    assert 4 < panels[0]["ylim"][1] <= 4 * 1.2
    assert 400 < panels[2]["ylim"][1] <= 400 * 1.2
    assert panels[0]["xlim"][0] < 1 and panels[0]["xlim"][1] > 20


def test_timeline_of_one_second_still_shows_its_values():
    """A run shorter than a second has one timeline row: a line through one point draws
    nothing, so the point is a dot."""
    root, panels = svg_panels(charts.timeline_chart(timeline_rows(1, server=False)))
    dots = [c for c in root.iter(f"{SVG_NS}circle")]
    assert len(dots) >= 3                           # in flight, users, TTFT, tok/s


def test_cdf_from_zero_with_every_series_in_the_legend():
    import numpy as np
    _, (p,) = svg_panels(charts.cdfs_chart([("TTFT", np.array([10.0, 12.0, 20.0])),
                                      ("E2EL", np.array([40.0, 50.0, np.nan]))], "TTFT and E2EL"))
    assert p["traces"] == ["TTFT", "E2EL"] and p["legend"] == ["TTFT", "E2EL"]
    assert p["xlim"][0] == 0 and 50 <= p["xlim"][1] <= 50 * 1.1
    assert p["ylim"] == (0, 1.02)
    assert "TTFT and E2EL" in p["texts"]


def test_cdf_of_no_successful_request_says_so():
    import numpy as np
    root, (p,) = svg_panels(charts.cdfs_chart([("ITL", np.array([]))], "Inter-token latency"))
    assert not p["traces"]
    assert any(t.text == "no successful request" for t in root.iter(f"{SVG_NS}text"))


def test_chart_text_is_escaped():
    import numpy as np
    svg = svgplot.render(charts.cdfs_chart([("<script>x</script>", np.array([1.0]))], "a<b"))
    assert "<script" not in svg
    svg_panels(svg)                                 # still well-formed XML


def test_probe_ticks_are_the_users():
    pt = {"overhead_ms": 10.0, "ci_ms": [8.0, 12.0], "significant": True}
    steps = [ProbeStep.from_dict({"users": u, **{m: dict(pt) for m in ("ttft_p50", "ttft_p95",
                                                                       "e2el_p50", "itl_p50")}})
             for u in (1, 2, 4, 8)]
    fig = charts.probe_overhead_chart(steps)
    assert xticks(fig.panels[0]) == [1, 2, 4, 8]
    ax = fig.panels[0]
    assert set(plotted_labels(ax)) <= set(legend_texts(ax, fig)) and len(plotted_labels(ax)) == 4


def test_a_step_without_data_draws_no_box_at_zero():
    import numpy as np
    fig = charts.distributions_chart([("1", np.array([5.0, 6.0, 7.0])), ("2", np.array([]))],
                                     "TTFT per step", "ms")
    ax = fig.panels[0]
    assert any("no data" in t for t in texts(ax))
    # nothing drawn at the empty step's position (x = 2): no box, no median, no whisker
    drawn_x = [x for t in ax.traces for x in t.positions]
    assert drawn_x and not any(1.5 < x < 2.5 for x in drawn_x), drawn_x
    assert ax.ylim[0] == 0


@pytest.mark.parametrize("builder", ["ramp_latency", "ramp_throughput", "timeline",
                                     "compare_overlay", "probe_overhead", "cdfs"])
def test_each_builder_draws_an_svg(builder):
    pt = {"overhead_ms": 1.0, "ci_ms": [0.5, 1.5], "significant": True}
    args = {"ramp_latency": (ramp([1, 2]), {"itl": 200.0}, "users"),
            "ramp_throughput": (ramp([1, 2]), "users"),
            "timeline": (timeline_rows(),),
            "cdfs": ([("TTFT", __import__("numpy").array([1.0, 2.0]))], "TTFT"),
            "compare_overlay": ([("a", ramp([1, 2])), ("b", ramp([1, 2]))], "users"),
            "probe_overhead": ([ProbeStep.from_dict({"users": 1, **{m: dict(pt) for m in (
                "ttft_p50", "ttft_p95", "e2el_p50", "itl_p50")}})],)}
    svg = svgplot.render(getattr(charts, builder + "_chart")(*args[builder]))
    assert svg.startswith("<svg") and "<script" not in svg


def test_compare_of_one_run_twice_lists_both():
    fig = charts.compare_overlay_chart([("a", ramp([1, 2])), ("a", ramp([1, 2]))], "users")
    names = legend_texts(fig.panels[0], fig)
    assert "a [0]" in names and "a [1]" in names, names


@pytest.mark.parametrize("end_s, last", [(3.25, None), (3.6, 100.0)])
def test_timeline_last_partial_second_is_no_false_drop(end_s, last):
    """Tokens at a steady 100/s until the run ends mid-second: the last row is that rate (or
    none when the piece is too short to be a rate), not a drop to a fraction of it."""
    from llmbench.records.record import Record
    from llmbench.analysis.timeline import build
    times = [i / 100 for i in range(1, int(end_s * 100))]
    r = Record("r", 0.0, start=0.0, first_token=times[0], end=times[-1], done=end_s,
               token_times=times, ok=True, output_tokens=len(times))
    rows = build([r], 0.0, end_s)
    assert [row["tok_s"] for row in rows[:3]] == pytest.approx([99, 100, 100], abs=1.5)
    assert rows[-1]["tok_s"] == (pytest.approx(last, abs=4) if last else None)


def sweep_bars():
    return [charts.HeldBar(label="1", held=4.0, low=3.0, high=5.0, status="ok", best=True,
                           text="4 [3, 5]"),
            charts.HeldBar(label="2", held=None, status="server_failed")]


AT_LOAD = [(900.0, 8.0, 120.0), None]


def test_sweep_charts_from_zero_with_no_bar_for_what_was_not_measured():
    held = charts.sweep_held_chart(sweep_bars(), "users", "N", repeats=True)
    (p,) = held.panels
    assert p.ylim[0] == 0 and p.ylim[1] >= 5                    # the interval's top is inside
    (bars,) = p.traces
    assert bars.xs == [0.0] and bars.ys == [4.0]                # nothing at the failed slot
    assert "server failed" in texts(p) and xticks(p) == [0, 1]
    assert all(float(t).is_integer() for t in p.yticks())        # users are counted
    assert "min-max over repeats" in p.title and bars.yerr == ([1.0], [1.0])
    at = charts.sweep_at_load_chart(["1", "2"], AT_LOAD, 6.0, "users", "N")
    for p in at.panels:
        assert p.ylim[0] == 0 and "no data" in texts(p) and [t.xs for t in p.traces] == [[0.0]]
    assert [p.ylabel for p in at.panels] == ["ms", "ms", "tokens/s"]
    for c in (held, at):
        svg_panels(svgplot.render(c))


def all_charts():
    import numpy as np
    pt = {"overhead_ms": 1.0, "ci_ms": [0.5, 1.5], "significant": True}
    return {
        "ramp_latency": charts.ramp_latency_chart(ramp([1, 2, 4], broke_at=4),
                                                  {"itl": 200.0, "ttft": 150.0}, "users"),
        "ramp_throughput": charts.ramp_throughput_chart(ramp([1, 2, 4], broke_at=4), "users"),
        "distributions": charts.distributions_chart([("1", np.array([1.0, 2.0, 3.0]))], "TTFT"),
        "cdfs": charts.cdfs_chart([("TTFT", np.array([1.0, 2.0]))], "TTFT"),
        "timeline": charts.timeline_chart(timeline_rows(), ramp([1, 2, 3, 4]), 0.0),
        "compare_overlay": charts.compare_overlay_chart([("a", ramp([1, 2])),
                                                         ("b", ramp([1, 2, 4], 4))], "users"),
        "probe_overhead": charts.probe_overhead_chart(
            [ProbeStep.from_dict({"users": u, **{m: dict(pt) for m in (
                "ttft_p50", "ttft_p95", "e2el_p50", "itl_p50")}}) for u in (1, 2)]),
        "sweep_held": charts.sweep_held_chart(sweep_bars(), "users", "N"),
        "sweep_at_load": charts.sweep_at_load_chart(["1", "2"], AT_LOAD, 6.0, "users", "N"),
    }


@pytest.mark.parametrize("name", list(all_charts()))
def test_the_svg_draws_the_description(name):
    """One description, one drawing: every panel's axis ranges, ticks and traces reach the SVG,
    and every trace a reader sees is in a legend (the panel's own or the chart's shared one)."""
    chart = all_charts()[name]
    root, panels = svg_panels(svgplot.render(chart))
    assert len(panels) == len(chart.panels)
    shared = [e.label for e in chart.legend]
    for p, svg in zip(chart.panels, panels):
        assert svg["ylim"] == pytest.approx(p.ylim) and svg["xlim"] == pytest.approx(p.xlim)
        assert svg["traces"] == p.labels()
        assert svg["xticklabels"] == xticklabels(p) or not p.x_ticklabels
        assert p.ylim[0] <= 0 or name == "probe_overhead"       # sizes from zero
        legend = svg["legend"] + shared
        if name not in ("distributions", "sweep_held", "sweep_at_load", "ramp_throughput"):
            # one-trace panels name their trace in the title (throughput, bars, boxes)
            assert set(svg["traces"]) <= set(legend), (svg["traces"], legend)
    drawn = [t.text for t in root.iter(f"{SVG_NS}text") if t.get("class") == "legend-entry"]
    assert drawn.count("did not hold") <= 1


def test_every_trace_is_named_somewhere():
    """The one-trace panels name it in their title or y label instead of a legend."""
    for name in ("ramp_throughput", "sweep_at_load"):
        for p in all_charts()[name].panels:
            for label in p.labels():
                assert label.split()[0].lower() in (p.title + " " + p.ylabel).lower(), (name, label)


def test_no_report_chart_imports_matplotlib():
    code = ("import sys; from tests.unit.report.test_charts import all_charts; "
            "from llmbench.report import svgplot; [svgplot.render(c) for c in all_charts().values()]; "
            "assert 'matplotlib' not in sys.modules, 'matplotlib imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       cwd=str(__import__("tests.helpers", fromlist=["ROOT"]).ROOT))
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("name", ["compare_overlay", "ramp_latency", "timeline", "distributions",
                                  "sweep_held", "probe_overhead"])
def test_png_from_the_same_description(tmp_path, name):
    pytest.importorskip("matplotlib")
    chart = all_charts()[name]
    out = tmp_path / f"{name}.png"
    svgplot.save_png(chart, out, dpi=50)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    # the PNG's axes are the description's panels, with its ranges and ticks
    fig = svgplot.to_matplotlib(chart)
    axes = fig.axes
    assert len(axes) == len(chart.panels)
    for ax, p in zip(axes, chart.panels):
        assert ax.get_ylim() == pytest.approx(p.ylim)
        if p.xticks is not None:
            assert list(ax.get_xticks()) == p.xticks


def test_compare_png_is_the_overlay(tmp_path):
    pytest.importorskip("matplotlib")
    out = tmp_path / "c.png"
    charts.compare_png([("a", ramp([1, 2])), ("b", ramp([1, 2]))], "users", str(out))
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_png_without_matplotlib_names_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)         # import matplotlib fails
    with pytest.raises(svgplot.MissingExtra, match=r"llmbench\[png\]"):
        svgplot.save_png(all_charts()["cdfs"], tmp_path / "x.png")


def test_search_chart_marks_each_step_in_the_order_tried_held_broke_and_confirmed():
    from llmbench.results.search import Search, Trial
    trials = [Trial(index=0, load=1, why="grow", state="held", held=True),
              Trial(index=1, load=2, why="grow", state="held", held=True),
              Trial(index=2, load=4, why="grow", state="over", held=False),
              Trial(index=3, load=3, why="aim", state="held", held=True, counted=False),
              Trial(index=4, load=3, why="repeat", state="held", held=True),
              Trial(index=5, load=3, why="confirm", state="held", held=True)]
    s = Search(trials=trials, limit=3.0, broke_at=4.0, confirmed=True, sustain_s=2.0)
    c = charts.search_chart(s, "users")
    (p,) = c.panels
    by_label = {t.label: t for t in p.traces if getattr(t, "label", None)}
    # x is the order tried (1..6), y the load; each mark only where its kind of step is
    assert by_label["order tried"].xs == [1, 2, 3, 4, 5, 6]
    assert by_label["order tried"].ys == [1, 2, 4, 3, 3, 3]
    assert by_label["held"].ys == [1, 2, None, None, 3, None]
    assert by_label["broke"].ys == [None, None, 4, None, None, None]
    assert by_label["confirmed (sustain)"].ys == [None] * 5 + [3]
    assert by_label["not counted (run again / too few requests)"].ys == [None] * 3 + [3, None, None]
    assert p.xticks == [1, 2, 3, 4, 5, 6] and p.ylim[0] == 0 and p.ylim[1] >= 4
    svg = svgplot.render(charts.search_chart(s, "users"))
    assert "limit found" in svg and "step, in the order tried" in svg

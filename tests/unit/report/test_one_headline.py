"""One headline per result (issue 45 §1): the console, the HTML report, the markdown report,
the dashboard and a notebook print the verdict's one sentence (``Verdict.headline``) and no
second "Holds N users" beside it, over the example folders and the real runs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from llmbench.report import html, text
from llmbench.report.console import verdict_text
from llmbench.results.schema import Run

ROOT = Path(__file__).resolve().parents[3]
FOLDERS = sorted(p.parent for base in (ROOT / "results" / "examples",
                                       ROOT.parent / "shared" / "real-runs")
                 for p in base.glob("**/run.json"))
HELD = re.compile(r"\bHold(?:s|ing)? (?:about )?[\d.]+|\bHeld [\d.]+")


def _said(s: str) -> list[str]:
    return HELD.findall(s)


@pytest.mark.parametrize("folder", FOLDERS, ids=lambda p: p.name)
def test_every_renderer_states_one_number_of_users(folder):
    run = Run.load(folder)
    if run.kind != "ramp" or run.verdict is None:
        pytest.skip("not a ramp")       # the sweep's own folder: its answer is sweep.json's
    v = run.verdict
    said = _said(v.headline)
    assert len(said) == 1, v.headline
    assert not re.search(r"Held \d+\.\d", v.headline), v.headline
    # the console's verdict, the report's and the dashboard's box (verdict_box), markdown
    for shown in (verdict_text(v), html.verdict_box(v), text.to_markdown(folder)):
        assert _said(shown) == said, (folder.name, _said(shown), said)


def test_the_knee_is_no_second_headline():
    # "Held 2 users" then "Holds 3 users at ttft.p95_all<=2s": the knee is a clause of the one
    # sentence (analysis.verdict.headline), never a line of its own
    from llmbench.results.schema import Knee, Verdict
    v = Verdict(text="Held 2 users. At 8 users, TTFT p95 was 2.97 s, over 2.00 s; by "
                     "interpolation the limit lies at 4 to 6 users (95 % interval).",
                kind="queuing", knee=Knee(text="Holds about 5 users [4, 6] at ttft.p95_all<=2s "
                                               "(interpolated between 2 and 8 users).",
                                          estimate=5.4, users=5, users_ci=[4, 6]))
    for shown in (verdict_text(v), html.verdict_box(v), html.verdict_box(v.to_dict())):
        assert _said(shown) == ["Held 2"], shown
        assert "ttft.p95_all" not in shown

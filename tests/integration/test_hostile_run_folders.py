"""Hostile run folders (issue 49 section 2): every key two levels deep of a real run.json (a
run made here against the mock, and a ramp of results/examples) set to None, "x", [], {},
1e308, -1, true, lists nested deep and a 5,000-digit text, about 2,600 folders; and every field
of a real requests.jsonl set so in every line. Each folder loads, or is refused as a UsageError
naming the file and the key; one that loads shows itself (``_repr_html_``) and its summary
without a raw exception. In this process for speed; the command line on a sample of them is
in tests/e2e/test_hostile_inputs.py's table."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

import llmbench
from llmbench.errors import LlmbenchError, UsageError
from tests.helpers import ROOT
from tests.helpers.run_variants import VALUES, variants, write

RAMP = next(p for p in sorted((ROOT / "results" / "examples" / "num_parallel").iterdir())
            if (p / "run.json").is_file())


@pytest.fixture(scope="module")
def real_run(tmp_path_factory) -> Path:
    """A run measured against the built-in mock: every part of a run's run.json is there."""
    out = tmp_path_factory.mktemp("real")
    r = llmbench.run(requests=12, concurrency=2, out=out)
    return Path(r.path)


def shows(run) -> None:
    """What a notebook and a script touch first: the drawing, the summary's statistics."""
    assert isinstance(run._repr_html_(), str)
    s = run.summary
    if s is not None:
        for m in (s.ttft, s.tpot, s.e2el):
            (m.p50, m.p99, m.mean, m.n)
        (s.output_throughput, s.completed, s.error_rate, s.flat())


def try_all(folders: list[tuple[str, Path]]) -> tuple[int, int, list[str]]:
    """(loaded, refused, raw exceptions as "variant: Error: text")."""
    loaded = refused = 0
    raw: list[str] = []
    for name, f in folders:
        try:
            run = llmbench.load_run(f)
        except UsageError as exc:
            refused += 1
            msg = str(exc)
            # one line naming the folder (its run.json and the key, when a key is wrong)
            assert "\n" not in msg and str(f) in msg, (name, msg)
            continue
        except Exception as exc:          # noqa: BLE001 - what the test counts
            raw.append(f"{name}: load_run {type(exc).__name__}: {exc}"[:200])
            continue
        loaded += 1
        try:
            shows(run)
        except Exception as exc:          # noqa: BLE001
            raw.append(f"{name}: {type(exc).__name__}: {exc}"[:200])
    return loaded, refused, raw


@pytest.mark.parametrize("source", ["run", "ramp"])
def test_every_key_two_levels_deep_of_the_wrong_kind(source, real_run, tmp_path):
    src = real_run if source == "run" else RAMP
    doc = json.loads((src / "run.json").read_text())
    all_ = list(variants(doc))
    folders = [(name, write(tmp_path / f"v{i}", d)) for i, (name, d) in enumerate(all_)]
    loaded, refused, raw = try_all(folders)
    assert raw == [], raw[:10]
    assert loaded + refused == len(folders) >= (1800 if source == "run" else 400)
    assert refused and loaded          # some values are of the right kind, others not
    if source == "run":
        # the named cases of the issue: each refused naming its key
        by = dict(folders)
        for name, key in (("summary=[]", "summary"), ("config=x", "config"),
                          ("summary.completed=x", "summary.completed"),
                          ("config.target=x", "config.target"), ("started_at=x", "started_at")):
            with pytest.raises(UsageError, match=rf"run\.json: {key}: "):
                llmbench.load_run(by[name])


def test_load_run_of_what_is_no_path_is_a_usage_error():
    for what in (None, 123, 1.5, ["a"]):
        with pytest.raises(UsageError, match=r"give a run folder's path"):
            llmbench.load_run(what)  # type: ignore[arg-type]


def test_requests_of_the_wrong_kind_are_skipped_and_the_rest_reported(real_run, tmp_path):
    """Every field of every line of requests.jsonl set to each value, in a folder whose
    run.json is complete (report and compare read the latencies) and in one left `running`
    (the summary is rebuilt from the records): load_run, report and compare end, or say
    one line; no raw exception."""
    recs = [json.loads(x) for x in (real_run / "requests.jsonl").read_text().splitlines()]
    doc = json.loads((real_run / "run.json").read_text())
    keys = list(dict.fromkeys(k for r in recs for k in r))
    cases = [(status, k, name, v) for status in ("complete", "running") for k in keys
             for name, v in VALUES]
    # the command-line paths (report, compare) on a seeded sample: each is a whole report
    sample = set(random.Random(49).sample(range(len(cases)), 40))
    raw = []
    for i, (status, k, name, v) in enumerate(cases):
        d = tmp_path / f"r{i}"
        d.mkdir()
        run_doc = {**doc, "status": status}
        if status == "running":
            run_doc.pop("summary")
        (d / "run.json").write_text(json.dumps(run_doc))
        (d / "requests.jsonl").write_text("".join(json.dumps({**r, k: v}) + "\n" for r in recs))
        calls = [("load_run", lambda: llmbench.load_run(d))]
        if i in sample:
            calls += [("report", lambda: llmbench.report(str(d), format="md")),
                      ("compare", lambda: llmbench.compare([str(d), str(real_run)],
                                                           html=str(d / "c.html")))]
        for what, call in calls:
            try:
                call()
            except LlmbenchError:
                pass
            except Exception as exc:      # noqa: BLE001 - what the test counts
                raw.append(f"{status} {k}={name}: {what} {type(exc).__name__}: {exc}"[:200])
        shutil.rmtree(d)
    assert raw == [], raw[:10]
    # a line of wrong kinds is skipped, the others still count: a text for one line's TTFT
    # leaves the rest of the run's requests
    d = tmp_path / "one-bad-line"
    d.mkdir()
    (d / "run.json").write_text(json.dumps({k: v for k, v in doc.items() if k != "summary"}
                                           | {"status": "running"}))
    bad = [dict(r) for r in recs]
    bad[0]["start"] = "soon"
    (d / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in bad))
    run = llmbench.load_run(d)
    assert run.summary is not None and run.summary.completed == len(recs) - 1


def test_the_command_line_on_a_sample_says_one_line_or_reports(real_run, tmp_path):
    """``llmbench report`` and ``compare`` (through main, as a user runs them) on a seeded
    sample of the run.json variants: each writes its report (exit 0) or says one line (exit
    2), never a traceback."""
    import subprocess
    import sys

    from tests.helpers import ENV
    doc = json.loads((real_run / "run.json").read_text())
    all_ = list(variants(doc))
    picked = random.Random(49).sample(range(len(all_)), 30)
    cases = []
    for i in picked:
        f = write(tmp_path / f"v{i}", all_[i][1], real_run / "requests.jsonl")
        cases.append(["report", str(f), "--format", "md", "-o", str(f / "r.md")])
        cases.append(["compare", str(f), str(real_run), "--html", str(f / "c.html")])
    job = {"cases": cases, "timeout_s": 60, "main": True}
    r = subprocess.run([sys.executable, str(ROOT / "tests" / "helpers" / "hostile_runner.py")],
                       input=json.dumps(job), capture_output=True, text=True, env=ENV,
                       cwd=tmp_path, timeout=60 * len(cases) + 60)
    assert r.returncode == 0, r.stderr[-3000:]
    for argv, res in zip(cases, json.loads(r.stdout)):
        assert res["exception"] is None, (argv, res["exception"])
        assert "Traceback" not in res["stdout"] + res["stderr"], argv
        assert res["code"] in (0, 2), (argv, res["code"], res["stderr"])
        if res["code"] == 2:
            lines = [x for x in res["stderr"].splitlines() if x.strip()]
            assert len(lines) == 1 and lines[0].startswith("error: "), (argv, res["stderr"])

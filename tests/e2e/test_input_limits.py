"""Issue 23, items 4-7: inputs that crashed late, ran forever or read without end.

Each test names what it guards; the table of one-line errors over every command lives in
tests/e2e/test_hostile_inputs.py, these are the functions behind it and the cases a table cannot
show (a file read only as far as needed, where compare.html goes, a warning on stdout).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import ROOT
from llmbench.specs import options as opt
from llmbench.analysis.compare import CompareError, compare, load_runs, parse_max_regression
from llmbench.specs.options import UsageError
from llmbench.workload import DatasetError, WorkloadSpec, build_workload
from llmbench.workload import files
from llmbench.workload.files import iter_json_array, sharegpt_single_turn
from llmbench.workload.tokenizer import approx_tokenizer
from llmbench.workload.traces import check_replay, load_trace

TOK = approx_tokenizer()
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "LLMBENCH_TOKENIZER": "approx"}
DEAD = "http://127.0.0.1:9/v1"


def llmbench(*args: str, cwd: Path = ROOT, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llmbench.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=ENV, cwd=cwd)


def one_line(r: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    return lines[0]


# -- item 4: NaN timestamps and deep nesting ------------------------------------------------------

@pytest.mark.parametrize("ts", ["NaN", "Infinity", "-Infinity"])
def test_a_trace_timestamp_that_is_not_a_finite_number_is_a_bad_line(tmp_path, ts):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 5, "output_length": 2}\n'
                     f'{{"timestamp": {ts}, "input_length": 5, "output_length": 2}}\n')
    with pytest.raises(DatasetError, match=rf"t.jsonl:2: .*timestamp"):
        load_trace(str(trace), TOK)


def test_a_nan_timestamp_ends_the_cli_before_any_request(tmp_path):
    trace = tmp_path / "nan.jsonl"
    trace.write_text('{"timestamp": NaN, "input_length": 5, "output_length": 2}\n')
    r = llmbench("run", "--url", DEAD, "--model", "m", "--trace", str(trace),
                 "--out", str(tmp_path / "res"))
    assert r.returncode == 2 and "nan.jsonl:1" in one_line(r)


@pytest.mark.parametrize("name,multi", [("deep.jsonl", False), ("deep.json", False),
                                         ("deep.json", True)])
def test_deeply_nested_json_is_a_bad_line_not_a_recursion_error(tmp_path, name, multi):
    f = tmp_path / name
    f.write_text("[" * 100_000 if name.endswith(".json") else '{"prompt": "x"}\n' + "[" * 100_000)
    with pytest.raises(DatasetError, match=rf"{name}:\d+: .*nested"):
        build_workload(WorkloadSpec(dataset=str(f), multi_turn=multi, count=5), TOK)


def test_a_deeply_nested_trace_line_is_a_bad_line(tmp_path):
    f = tmp_path / "deep.jsonl"
    f.write_text('{"timestamp": 0, "input_length": 5}\n' + '{"a": ' * 50_000 + "\n")
    with pytest.raises(DatasetError, match=r"deep.jsonl:2: .*nested"):
        load_trace(str(f), TOK)
    f.write_text("[" * 100_000 + "\n")          # the first line: read to guess the format
    with pytest.raises(DatasetError, match=r"deep.jsonl:1: .*nested"):
        load_trace(str(f), TOK)


# -- item 5: nothing that cannot end in a lifetime ------------------------------------------------

def test_durations_above_30_days_are_refused_with_the_limit_named():
    assert opt.duration("720h", "--duration") == 30 * 86400.0
    for text in ("1e308", "721h", "1e9", "99999999m"):
        with pytest.raises(UsageError, match=r"--duration .*at most 30 days"):
            opt.duration(text, "--duration")
    with pytest.raises(UsageError, match=r"--timeout-total .*30 days"):
        opt.seconds(1e308, "--timeout-total")
    assert opt.seconds(3600.0, "--timeout-total") == 3600.0
    with pytest.raises(UsageError, match=r"--think .*at most 30 days"):
        opt.parse_think("1s-9999999h")


def test_counts_and_numbers_have_a_ceiling():
    assert opt.count(opt.MAX_COUNT, "--requests") == opt.MAX_COUNT
    with pytest.raises(UsageError, match=r"--requests 100000001: must be between 1 and 100000000"):
        opt.count(opt.MAX_COUNT + 1, "--requests")
    with pytest.raises(UsageError, match=r"--ttft-ms 1e\+308"):
        opt.number(1e308, "--ttft-ms", lo=0)
    assert opt.number(2.5e9, "--x", lo=0, hi=1e10) == 2.5e9     # an explicit bound wins
    assert opt.count(70000, "--port", lo=0, hi=10**6) == 70000


def _trace(tmp_path: Path, gaps_ms: list[float]) -> str:
    t, rows = 0.0, []
    for g in [0.0, *gaps_ms]:
        t += g
        rows.append(json.dumps({"timestamp": t, "input_length": 5, "output_length": 2}))
    p = tmp_path / "gaps.jsonl"
    p.write_text("\n".join(rows) + "\n")
    return str(p)


def test_a_trace_that_would_take_years_is_refused_naming_its_longest_gap(tmp_path):
    path = _trace(tmp_path, [10, 1e15, 10])
    tr = load_trace(path, TOK)
    with pytest.raises(DatasetError, match=r"at most 30 days.*gaps.jsonl:3") as e:
        check_replay(tr, 1.0)
    assert "--trace-speed" in str(e.value) and "--trace-window" in str(e.value)
    check_replay(tr, 1e12)                       # fast enough: 1e15 ms become 1 ms... about
    short = load_trace(_trace(tmp_path, [3_600_000]), TOK)      # an hour apart
    check_replay(short, 1.0)
    with pytest.raises(DatasetError, match="--trace-speed 1e-05"):
        check_replay(short, 1e-5)                # an hour, slowed 100,000 times: 11 years


def test_the_cli_refuses_a_rate_that_cannot_send_its_requests_in_30_days(tmp_path):
    r = llmbench("run", "--url", DEAD, "--model", "m", "--rate", "1e-9", "--requests", "10",
                 "--out", str(tmp_path))
    assert r.returncode == 2 and "--rate" in one_line(r) and "30 days" in one_line(r)


# -- item 6: compare's gate and shapes ------------------------------------------------------------

@pytest.mark.parametrize("text,value", [("10%", 0.10), ("10", 0.10), ("0.1", 0.1),
                                        ("2.5%", 0.025), ("1000%", 10.0), (" 5 % ", 0.05)])
def test_max_regression_values_that_make_a_gate(text, value):
    assert parse_max_regression(text) == pytest.approx(value)


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e308%", "1e308", "0", "0%", "-5%",
                                  "1001%", "abc", "", "%", "nan%"])
def test_max_regression_values_that_can_never_fail_are_refused(text):
    with pytest.raises(CompareError, match=r"^--max-regression .*e\.g\. 10%"):
        parse_max_regression(text)


@pytest.fixture(scope="module")
def closed_and_open(tmp_path_factory):
    """One real closed-loop run, and the same records as an open-loop run (its run.json's load
    says --rate 10): what compare sees of the two shapes is run.json."""
    from llmbench.mock_server import MockConfig, MockServer
    base = tmp_path_factory.mktemp("shapes")
    from llmbench import run as api_run
    from tests.helpers.api import run_exit_code
    with MockServer(MockConfig(ttft_ms=2, itl_ms=1, models=["m"])) as m:   # in this process
        r = api_run(url=m.url + "/v1", model="m", concurrency=1, requests=8, prompt_tokens=5,
                    output_tokens=3, out=base / "closed")
    assert run_exit_code(r) == 0
    closed = next((base / "closed").iterdir())
    opened = base / "open"
    shutil.copytree(closed, opened)
    run = json.loads((opened / "run.json").read_text())
    run["config"]["load"].update(concurrency=None, rate=10.0)
    (opened / "run.json").write_text(json.dumps(run))
    return closed, opened


def test_comparing_a_closed_loop_with_an_open_loop_says_the_shapes_differ(closed_and_open):
    closed, opened = closed_and_open
    result = compare(load_runs([closed, opened]))
    (w,) = [w for w in result.warnings if "load shape" in w]
    assert "closed loop" in w and "open loop" in w and "different scales" in w
    same = compare(load_runs([closed, closed]))
    assert not [w for w in same.warnings if "load shape" in w]


def test_compare_html_goes_next_to_the_candidate_not_the_current_folder(closed_and_open,
                                                                        tmp_path):
    closed, opened = closed_and_open
    r = llmbench("compare", str(closed), str(opened), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "compare.html").exists()
    # beside the candidate's folder, named for both runs: no run folder is written into
    page = opened.resolve().parent / f"compare-{closed.name}-vs-{opened.name}.html"
    assert page.is_file() and not (opened / "compare.html").exists()
    assert f"HTML: {page}" in r.stdout
    assert "warning: the runs differ in load shape" in r.stdout


# -- item 7: read what is needed, and only regular files ------------------------------------------

def test_jsonl_stops_reading_once_enough_conversations_are_drawn(tmp_path):
    f = tmp_path / "big.jsonl"
    f.write_text("".join(json.dumps({"prompt": f"p{i}"}) + "\n" for i in range(5))
                 + "this line is never read\n")
    wl = build_workload(WorkloadSpec(dataset=str(f), count=5), TOK)
    assert [c.turns[0].user for c in wl.conversations] == [f"p{i}" for i in range(5)]
    assert any("first 5 entries" in w for w in wl.warnings)
    with pytest.raises(DatasetError, match="big.jsonl:6"):
        build_workload(WorkloadSpec(dataset=str(f), count=6), TOK)


def test_jsonl_memory_follows_the_conversations_drawn(tmp_path):
    import tracemalloc
    f = tmp_path / "big.jsonl"
    line = (json.dumps({"prompt": "w " * 2000}) + "\n").encode()
    with open(f, "wb") as fh:
        fh.write(line * 5000)                    # 20 MB
    tracemalloc.start()
    try:
        build_workload(WorkloadSpec(dataset=str(f), count=5), TOK)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 2_000_000, peak


def test_a_line_longer_than_the_limit_is_refused_not_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_LINE_BYTES", 1000)
    f = tmp_path / "long.jsonl"
    f.write_text('{"prompt": "ok"}\n{"prompt": "' + "x" * 5000 + '"}\n')
    with pytest.raises(DatasetError, match=r"long.jsonl:2: .*longer than"):
        build_workload(WorkloadSpec(dataset=str(f), count=5), TOK)


@pytest.mark.parametrize("what", ["/dev/zero", "fifo", "folder"])
def test_only_regular_files_are_read(tmp_path, what):
    path = what
    if what == "fifo":
        path = str(tmp_path / "p.jsonl")
        os.mkfifo(path)                          # opening it would wait for a writer forever
    elif what == "folder":
        path = str(tmp_path)
    for fmt in ("jsonl", "sharegpt", "hf"):
        with pytest.raises(DatasetError, match="not a regular file|is a folder"):
            build_workload(WorkloadSpec(dataset=path, dataset_format=fmt, count=5), TOK)
    with pytest.raises(DatasetError, match="--trace .*not a regular file|--trace .*is a folder"):
        load_trace(path, TOK)


def test_sharegpt_sampling_reads_at_most_its_stated_bound(tmp_path, monkeypatch):
    entries = [{"id": i, "conversations": [{"from": "human", "value": f"question {i} " * 3},
                                           {"from": "gpt", "value": "an answer of words"}]}
               for i in range(400)]
    f = tmp_path / "sg.json"
    f.write_text(json.dumps(entries))
    monkeypatch.setattr(files, "SAMPLE_SCAN_BYTES", 4000)
    convs, warnings = sharegpt_single_turn(str(f), TOK, 5, seed=0)
    ids = {int(c.id.split("-")[1]) for c in convs}
    assert len(convs) == 5 and max(ids) < 60      # drawn from the first ~4 kB only
    (w,) = warnings
    assert "first" in w and "sg.json" in w and "of" in w
    wl = build_workload(WorkloadSpec(dataset=str(f), multi_turn=True, count=5), TOK)
    assert len(wl.conversations) == 5
    assert any("first" in x for x in wl.warnings)


def test_a_json_array_entry_too_large_is_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "MAX_ENTRY_BYTES", 10_000)
    f = tmp_path / "sg.json"
    f.write_text(json.dumps([{"conversations": []}, {"conversations": ["x" * 50_000]}]))
    with pytest.raises(DatasetError, match=r"sg.json:1: .*larger than"):
        list(iter_json_array(str(f), chunk_size=256))


# -- issue 40 section 4: the functions behind the new table cases --------------------------------

def test_a_negative_seed_ends_the_openings_and_is_refused():
    from types import SimpleNamespace
    from llmbench.specs.groups import RunWorkloadOpts
    from llmbench.workload.synthetic import _opening
    # with a tokenizer of one-token words (tiktoken's, a server's), a negative id's digits
    # looped for ever, 45 MB/s; it ends now, and the option refuses it before that
    words = SimpleNamespace(unit_words=("a", "b", "c"))
    assert _opening(words, -1, 5) == _opening(words, -1, 5) and len(_opening(words, -7, -3)) < 20
    with pytest.raises(UsageError, match=r"^--seed -1: must be between 0 and"):
        RunWorkloadOpts(seed=-1)          # its check() runs as it is built
    RunWorkloadOpts(seed=2**63 - 1)


@pytest.mark.parametrize("schema, named", [
    ({"type": "object", "required": 5}, '"required": must be a list of property names'),
    ({"type": "array", "minItems": "2"}, '"minItems": must be a whole number >= 0'),
    ({"type": "objekt"}, '"type": must be one of object'),
    ({"properties": {"a": {"items": 5}}}, '"items" at properties.a'),
    ({"anyOf": []}, '"anyOf": must be a non-empty list'),
    ({"properties": {"n": {"minimum": 5, "maximum": 1}}}, "no value can satisfy it"),
    ({"$defs": {"x": {"enum": "a"}}}, '"enum" at $defs.x'),
])
def test_a_schema_keyword_of_the_wrong_type_is_named(schema, named):
    from llmbench.wire.agents import schema_problem
    assert named in (schema_problem(schema) or "")


def test_a_good_schema_has_no_problem_and_validates():
    from llmbench.wire.agents import check_reply, schema_problem
    schema = {"type": "object", "required": ["a"], "additionalProperties": False,
              "properties": {"a": {"type": ["integer", "null"], "minimum": 0},
                             "b": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                             "c": True},
              "$defs": {"d": {"anyOf": [{"type": "string"}, {"const": 1}]}}}
    assert schema_problem(schema) is None
    assert check_reply('{"a": 1, "b": ["x"]}', schema) and not check_reply('{"b": []}', schema)
    assert not check_reply("[" * 100_000, schema)          # too deep to read: not valid


def test_the_mock_answers_a_bad_schema_400_not_500():
    import httpx
    from llmbench.mock_server import MockConfig, MockServer
    with MockServer(MockConfig(ttft_ms=1, itl_ms=1, models=["m"])) as m:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                "response_format": {"type": "json_schema", "json_schema": {
                    "name": "r", "schema": {"type": "object", "required": 5}}}}
        r = httpx.post(m.url + "/v1/chat/completions", json=body, timeout=10)
        assert r.status_code == 400, r.text
        assert '"required"' in r.json()["error"]["message"]
        body["response_format"]["json_schema"]["schema"] = {"type": "object", "required": ["a"]}
        assert httpx.post(m.url + "/v1/chat/completions", json=body, timeout=10).status_code == 200


@pytest.mark.parametrize("schema, where", [
    ({"type": "array", "minItems": 10**9}, "(minItems);"),
    ({"type": "object", "properties": {"a": {"type": "array", "minItems": 100, "items": {
        "type": "array", "minItems": 100, "items": {"type": "array", "minItems": 100}}}}},
     "(minItems at properties.a.items.items);"),
])
def test_the_mock_refuses_a_schema_whose_reply_it_cannot_build(schema, where):
    """minItems 10**9 hung the mock (its generator built the array); a reply that needs more
    than MAX_VALUES values is one 400 line, at once, and a large maxItems is only a bound."""
    import httpx
    from llmbench.mock_server import MockConfig, MockServer
    with MockServer(MockConfig(ttft_ms=1, itl_ms=1, models=["m"])) as m:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                "response_format": {"type": "json_schema", "json_schema": {
                    "name": "r", "schema": schema}}}
        r = httpx.post(m.url + "/v1/chat/completions", json=body, timeout=30)
        assert r.status_code == 400, r.text
        msg = r.json()["error"]["message"]
        assert "invalid JSON schema: a reply to it holds at least" in msg and where in msg, msg
        assert "the mock generates at most 10,000: lower minItems" in msg and "\n" not in msg
        body["max_tokens"] = 2000
        body["response_format"]["json_schema"]["schema"] = {"type": "array", "minItems": 2,
                                                            "maxItems": 10**9}
        r = httpx.post(m.url + "/v1/chat/completions", json=body, timeout=30)
        assert r.status_code == 200, r.text
        assert 2 <= len(json.loads(r.json()["choices"][0]["message"]["content"])) <= 12


def test_images_are_made_as_needed_and_capped(monkeypatch, capsys):
    from llmbench.workload import images
    from llmbench.workload.images import ImagePool, ImageSpec
    spec = ImageSpec(count=1, min_size=(16, 16), max_size=(16, 16), pool=32)
    assert len(ImagePool(spec, needed=3).uris) == 3           # a 3-request run: 3, not 32
    assert len(ImagePool(spec).uris) == 32
    per = images.uri_bytes(16, 16, "png")
    monkeypatch.setattr(images, "MAX_POOL_BYTES", per * 5)
    capped = ImagePool(spec, needed=100)
    assert len(capped.uris) == 5 and "made 5" in capped.note and "repeats every 5 turns" in capped.note
    with pytest.raises(DatasetError, match=r"^--images 6 --image-size 16x16: one turn's images"):
        ImagePool(ImageSpec(count=6, min_size=(16, 16), max_size=(16, 16)), needed=6)
    # the estimate is the size made (the cap is kept), and a large pool is said before it starts
    assert 0.5 < sum(len(u) for u in capped.uris) / (5 * per) < 1.5
    monkeypatch.setattr(images, "SAY_FROM_PIXELS", 1000)
    ImagePool(spec, needed=4)
    assert "making 4 synthetic 16x16 images before the load" in capsys.readouterr().err


def test_every_conversation_gets_its_own_images_until_the_pool_comes_round():
    from llmbench.workload.images import ImageSpec
    wl = build_workload(WorkloadSpec(count=6, turns=2, prompt_tokens=(5, 5), images=ImageSpec(
        count=1, min_size=(8, 8), max_size=(8, 8), pool=32)), TOK)
    firsts = [c.turns[0].images[0] for c in wl.conversations]
    every = [t.images[0] for c in wl.conversations for t in c.turns]
    assert len(set(firsts)) == 6 and len(set(every)) == 12      # once: one image for all firsts
    assert wl.params["images"]["distinct"] == 12


def test_a_bad_byte_in_requests_jsonl_is_skipped_and_said_by_report_and_compare(closed_and_open,
                                                                                 tmp_path):
    closed, _ = closed_and_open
    bad = tmp_path / "bad"
    shutil.copytree(closed, bad)
    log = bad / "requests.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    lines[1] = lines[1].replace(b'"ok"', b'"o\xffk"', 1)        # one invalid UTF-8 byte
    log.write_bytes(b"".join(lines) + b'{"torn": ')              # and a torn last line
    for args in (["report", str(bad)], ["compare", str(closed), str(bad)]):
        r = llmbench(*args)
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert (f"{log}: skipped 2 lines that were not whole JSON (the first, line 2: not "
                "UTF-8)") in r.stderr, r.stderr
    from llmbench.records.record import SKIPPED, load_records
    assert len(load_records(log)) == len(lines) - 1 and SKIPPED[str(log)].lines == 2


def test_an_open_loop_lets_its_finished_requests_go(monkeypatch):
    """Every arrival's Task was kept to the end of the run (about 650 bytes each: 70 MB for an
    hour at 30 req/s); the finished ones are let go as the schedule runs."""
    import asyncio
    from types import SimpleNamespace
    from llmbench.load.shapes import user
    from llmbench.load.shapes.user import PRUNE_EVERY, dispatch, prune
    from llmbench.workload import Conversation, Turn

    # how many tasks had finished at each prune depends on the machine: a loop woken late
    # starts a burst of due arrivals before any of them runs (CI at load 6-17: 273 left of
    # 768), so what is checked is that each prune lets go of every task finished by then
    pruned = []

    def watched(tasks):
        finished = sum(1 for t in tasks if t.done() and not t.cancelled()
                       and t.exception() is None)
        before = len(tasks)
        prune(tasks)
        pruned.append((before, finished, len(tasks)))
    monkeypatch.setattr(user, "prune", watched)

    class Session:                       # answers at once: what matters is who keeps the task
        stopping = asyncio.Event()

        async def request(self, *a, **k):
            await asyncio.sleep(0)
            return SimpleNamespace(ok=True), "reply"

    async def go() -> list:
        conv = Conversation("c", (Turn("hi", 4),))
        return await dispatch(Session(), [i * 2e-4 for i in range(3 * PRUNE_EVERY)],
                              lambda i: conv, stop=asyncio.Event(), think=(0.0, 0.0), seed=0)
    left = asyncio.run(go())
    assert len(pruned) == 3 and len(left) == pruned[-1][2], pruned
    assert all(after == before - finished for before, finished, after in pruned), pruned

    async def kinds() -> list:
        async def boom():
            raise RuntimeError("a bug")
        done, raised = asyncio.ensure_future(asyncio.sleep(0)), asyncio.ensure_future(boom())
        cancelled, pending = asyncio.ensure_future(asyncio.sleep(5)), asyncio.ensure_future(
            asyncio.sleep(5))
        await asyncio.sleep(0.01)
        cancelled.cancel()
        await asyncio.sleep(0)
        tasks = [done, raised, cancelled, pending]
        prune(tasks)
        pending.cancel()
        return [t is raised or t is pending for t in tasks]
    assert asyncio.run(kinds()) == [True, True]     # a failure stays, for gather to raise

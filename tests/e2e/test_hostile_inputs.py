"""Bad input, as a new user or a broken file gives it: one line on stderr, the documented exit
code, never a traceback, and an end within a few seconds. CASES run the CLI in a child process
each (as a user would, through ``main``); INPROC_CASES, over every command and option family
(numbers 0, -1, NaN, inf, 1e308; URLs; headers; files missing, empty, huge, binary, nested, not
regular), run through the same typer app in one child process (tests/helpers/hostile_runner.py: one
import for a hundred cases, a SIGALRM each). None reaches a server, so the table stays fast.
Cases that need a server follow the table.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.helpers import ROOT, RawServer, as_from_a_terminal, chat_token, free_port, http_head
from tests.helpers.once import once

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "LLMBENCH_TOKENIZER": "approx"}
DEAD = f"http://127.0.0.1:{free_port()}/v1"       # nothing listens: no case may get that far


def llmbench(*args: str, timeout: float = 60, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "llmbench.cli", *args], capture_output=True,
                          text=True, timeout=timeout, env=ENV, cwd=cwd)


def one_error_line(r: subprocess.CompletedProcess) -> str:
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("error: "), lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hostile")
    (d / "latin1.jsonl").write_bytes(b'{"prompt": "ok"}\n{"prompt": "caf\xe9"}\n')
    (d / "bom-ff.jsonl").write_bytes(b'\xff\xfe{"prompt": "x"}\n')
    (d / "strconv.json").write_text('[{"conversations": "hello there"}]')
    (d / "intconv.json").write_text('[{"conversations": [1, 2]}]')
    (d / "list").mkdir()
    (d / "list" / "run.json").write_text("[1, 2]")
    (d / "ramp-nosummary").mkdir()
    (d / "ramp-nosummary" / "run.json").write_text(json.dumps(
        {"schema_version": 1, "kind": "ramp", "status": "complete",
         "steps": [{"index": 0, "load": 2, "held": True}], "verdict": {"result": "x"}}))
    (d / "refused").mkdir()     # what a run that failed its preflight leaves
    (d / "refused" / "run.json").write_text(json.dumps(
        {"schema_version": 1, "kind": "run", "status": "failed",
         "error": "POST http://h/v1/chat/completions answered 404", "config": {}}))
    (d / "nosummary").mkdir()   # killed before any request finished
    (d / "nosummary" / "run.json").write_text(json.dumps(
        {"schema_version": 1, "kind": "run", "status": "running"}))
    (d / "nosummary" / "requests.jsonl").write_text("")
    (d / "empty").mkdir()
    (d / "afile").write_text("x")
    # files as they come: empty, binary, nested, huge (sparse: no disk used), not regular
    (d / "empty.jsonl").write_text("")
    (d / "empty.json").write_text("")
    (d / "blank.jsonl").write_text("\n\n  \n")
    (d / "binary.jsonl").write_bytes(bytes(range(255, -1, -1)) * 64)
    (d / "binary.json").write_bytes(b"[" + bytes(range(128, 256)) * 64)
    (d / "binary.csv").write_bytes(b"TIMESTAMP,ContextTokens,GeneratedTokens\n" + bytes(range(128, 256)))
    (d / "deep.json").write_text("[" * 100_000)
    (d / "deep.jsonl").write_text("[" * 100_000 + "\n")
    (d / "deep-trace.jsonl").write_text('{"timestamp": 0, "input_length": 5}\n' + "[" * 100_000 + "\n")
    with open(d / "huge.jsonl", "wb") as fh:       # 3 GB of zero bytes, one endless line
        fh.truncate(3 << 30)
    with open(d / "huge.json", "wb") as fh:
        fh.write(b"[")
        fh.truncate(3 << 30)
    os.mkfifo(d / "fifo.jsonl")                    # opened, it waits for a writer forever
    (d / "nan-trace.jsonl").write_text('{"timestamp": NaN, "input_length": 5, "output_length": 2}\n')
    (d / "inf-trace.jsonl").write_text('{"timestamp": Infinity, "input_length": 5}\n')
    (d / "gap-trace.jsonl").write_text('{"timestamp": 0, "input_length": 5}\n'
                                       '{"timestamp": 1e15, "input_length": 5}\n')
    (d / "hour-trace.jsonl").write_text('{"timestamp": 0, "input_length": 5}\n'
                                        '{"timestamp": 3600000, "input_length": 5}\n')
    (d / "nanlen-trace.jsonl").write_text('{"timestamp": 0, "input_length": NaN}\n')
    (d / "nan.jsonl").write_text('{"prompt": "x", "max_tokens": NaN}\n')
    (d / "notobj.jsonl").write_text("[1, 2]\n")
    (d / "notarray.json").write_text('{"conversations": []}')
    (d / "broken.json").write_text('[{"conversations": [}]')
    (d / "binary-run").mkdir()
    (d / "binary-run" / "run.json").write_bytes(bytes(range(256)))
    (d / "profile.json").write_text("[1]")
    # issue 40 section 4: the file flags (--tools, --response-format, --config, --profile)
    (d / "required5.json").write_text('{"type": "object", "required": 5}')
    (d / "badtool.json").write_text(json.dumps([{"type": "function", "function": {
        "name": "f", "parameters": {"type": "object", "properties": {"a": {"minItems": "x"}}}}}]))
    (d / "laughs.yaml").write_text("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
                                   + "".join(f"{c}: &{c} [{', '.join(['*' + p] * 9)}]\n"
                                             for p, c in zip("abcdefgh", "bcdefghi"))
                                   + "header: [*i, *i, *i, *i, *i, *i, *i, *i, *i]\n")
    (d / "zero.toml").symlink_to("/dev/zero")
    (d / "zero.json").symlink_to("/dev/zero")
    with open(d / "big.toml", "wb") as fh:        # 2 MB of zero bytes (sparse)
        fh.truncate(2 << 20)
    (d / "zero-run").mkdir()
    (d / "zero-run" / "run.json").write_text('{"schema_version": 1, "kind": "run"}')
    (d / "zero-run" / "requests.jsonl").symlink_to("/dev/zero")
    (d / "big-run").mkdir()                        # a 3 GB run.json (sparse): read whole once
    with open(d / "big-run" / "run.json", "wb") as fh:
        fh.write(b"{")
        fh.truncate(3 << 30)
    (d / "deep-sweep").mkdir()
    (d / "deep-sweep" / "sweep.json").write_text("[" * 100_000)
    os.mkfifo(d / "fifo.toml")
    (d / "scenario-key.toml").write_text("[classes.chat]\nshare = 1\ncolour = 'red'\n")
    (d / "scenario-sum.toml").write_text("[classes.chat]\nshare = 0.5\n[classes.rag]\nshare = 0.3\n")
    (d / "scenario-threshold.toml").write_text("[classes.chat]\nshare = 1\nthresholds = ['ttft.p95<=soon']\n")
    (d / "scenario-value.toml").write_text("[classes.chat]\nshare = 1\nprompt_tokens = 'many'\n")
    (d / "scenario-ok.toml").write_text("[classes.chat]\nshare = 1\n")
    (d / "scenario-floors.toml").write_text("[classes.chat]\nshare = 0.5\nmin_users = 2\n"
                                            "[classes.rag]\nshare = 0.5\nmin_users = 1\n")
    (d / "scenario-min.toml").write_text("[classes.chat]\nusers = 2\nmin_users = 1\n")
    agent_traces(d)
    hostile_runs(d)
    return d


def hostile_runs(d: Path) -> None:
    """Issue 49: run.json values of the wrong kind (tests/integration/test_hostile_run_folders.py
    tries every key; these are the command line's rows)."""
    base = {"schema_version": 1, "kind": "run", "status": "complete", "started_at": 1.7e9,
            "config": {}, "summary": {"completed": 3, "failed": 0}}
    for name, change in (("h-summary-list", {"summary": [1, 2]}), ("h-config-str", {"config": "x"}),
                         ("h-yesterday", {"started_at": "yesterday"}),
                         ("h-strnums", {"summary": {"completed": "3", "failed": "0"}}),
                         ("h-target", {"config": {"target": [1]}})):
        (d / name).mkdir()
        (d / name / "run.json").write_text(json.dumps({**base, **change}))
    # scenario files whose messages misled (issue 49)
    (d / "sc-dup.yaml").write_text("classes:\n  chat:\n    share: 0.5\n  rag:\n    share: 0.3\n"
                                   "  chat:\n    share: 0.2\n")
    (d / "sc-dup.json").write_text('{"classes": {"chat": {"share": 0.5}, "rag": {"share": 0.3},'
                                   '\n "chat": {"share": 0.2}}}\n')
    (d / "sc-zero.toml").write_text('[classes.chat]\nshare = 1\ndataset = "/dev/zero"\n')
    (d / "sc-folder").mkdir()


def agent_traces(d: Path) -> None:
    """Issue 49: agent traces (llmbench's format, WEKA, OTel) whose numbers or shapes once hung
    a run, crashed it after it started, or gave a traceback."""
    def call(step: int, **k) -> str:
        return json.dumps({"session": "s", "step": str(step), "output_tokens": 4,
                           "new_tokens": 10, **({"parent": str(step - 1)} if step > 1 else {}),
                           **k})
    one = '{"session":"s","step":"1","output_tokens":%s}\n'
    (d / "a-gap.jsonl").write_text(call(1) + "\n" + call(2, tool_gap_s=1e15) + "\n")
    (d / "a-out1e300.jsonl").write_text(call(1, output_tokens=1e300) + "\n")
    (d / "a-outnan.jsonl").write_text(one % "NaN")
    (d / "a-outinf.jsonl").write_text(one % "Infinity")
    (d / "a-new.jsonl").write_text(call(1, new_tokens=10 ** 12) + "\n")
    (d / "a-system.jsonl").write_text(call(1, system_tokens=10 ** 9) + "\n")
    (d / "a-deep.jsonl").write_text("[" * 100_000 + "\n")
    # a sub-agent chain 3,000 deep: each call a new agent started by the call before it
    (d / "a-chain.jsonl").write_text("\n".join(call(i, agent=f"a{i}") for i in range(1, 3001)))
    weka = '{"id":"t","requests":[{"type":"n","in":10,"out":4},{"type":"n","in":20,"out":4,' \
           '"think_time":%s}]}\n'
    (d / "w-think.jsonl").write_text(weka % "1e15")
    (d / "w-nan.jsonl").write_text(weka % "NaN")
    (d / "w-inf.jsonl").write_text(weka % "Infinity")
    node: list = [{"type": "n", "in": 10, "out": 4}]
    text = json.dumps(node)
    for i in range(2500):                   # 2,500 nested sub-agent markers (built as text)
        text = '[{"type":"n","in":10,"out":4},{"type":"subagent","agent_id":"a%d","requests":%s}]' \
            % (i, text)
    (d / "w-nested.json").write_text('{"id":"t","requests":%s}' % text)
    span = ('{"trace_id":"t","span_id":"s1","start_time":%s,"end_time":2.0,"attributes":'
            '{"gen_ai.operation.name":"chat","gen_ai.usage.input_tokens":10,'
            '"gen_ai.usage.output_tokens":%s}}\n')
    (d / "o-start.jsonl").write_text(span % ("NaN", "4"))
    (d / "o-abc.jsonl").write_text(span % ("1", '"abc"'))
    (d / "o-inf.jsonl").write_text(span % ("1", "Infinity"))
    (d / "o-x.json").write_text('{"resourceSpans": "x"}')
    (d / "o-int.json").write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": "t", "spanId": "s1", "startTimeUnixNano": "1000000000000000000",
        "endTimeUnixNano": "1000000001000000000", "attributes": [
            {"key": "gen_ai.operation.name", "value": {"stringValue": "chat"}},
            {"key": "gen_ai.usage.input_tokens", "value": {"intValue": "10"}},
            {"key": "gen_ai.usage.output_tokens",
             "value": {"intValue": "99999999999999999999999"}}]}]}]}]}))


# (command line, exit code, text the one error line must contain); {d} is the files folder
CASES = [
    # hangs: numbers that never end, or mean nothing
    (["run", "--url", DEAD, "--model", "m", "--duration", "nan"], 2, "--duration 'nan'"),
    (["run", "--url", DEAD, "--model", "m", "--duration", "inf"], 2, "--duration 'inf'"),
    (["run", "--url", DEAD, "--model", "m", "--duration", "-5s"], 2, "must not be negative"),
    (["run", "--url", DEAD, "--model", "m", "--duration", "1m30x"], 2, "--duration '1m30x'"),
    (["run", "--url", DEAD, "--model", "m", "--timeout-first-token", "-1"], 2, "--timeout-first-token"),
    (["run", "--url", DEAD, "--model", "m", "--timeout-total", "0"], 2, "--timeout-total"),
    (["run", "--url", DEAD, "--model", "m", "--timeout-connect", "nan"], 2, "--timeout-connect"),
    (["run", "--url", DEAD, "--model", "m", "--timeout-idle", "inf"], 2, "--timeout-idle"),
    (["run", "--url", DEAD, "--model", "m", "--warmup", "-3"], 2, "--warmup -3"),
    (["run", "--url", DEAD, "--model", "m", "--rate", "5", "--max-concurrency", "0"], 2, "--max-concurrency 0"),
    (["run", "--url", DEAD, "--model", "m", "--rate", "5", "--max-concurrency", "-2"], 2, "--max-concurrency -2"),
    (["run", "--url", DEAD, "--model", "m", "--limit", "0"], 2, "--limit 0"),
    (["run", "--url", DEAD, "--model", "m", "--requests", "0"], 2, "--requests"),
    (["run", "--url", DEAD, "--model", "m", "--concurrency", "-1"], 2, "--concurrency"),
    (["run", "--url", DEAD, "--model", "m", "--rate", "nan"], 2, "--rate"),
    (["run", "--url", DEAD, "--model", "m", "--rate", "5", "--burstiness", "nan"], 2, "--burstiness"),
    (["run", "--url", DEAD, "--model", "m", "--temperature", "nan"], 2, "--temperature"),
    (["run", "--url", DEAD, "--model", "m", "--goodput", "ttft:nan"], 2, "--goodput"),
    (["run", "--url", DEAD, "--model", "m", "--turns", "0"], 2, "--turns"),
    (["run", "--url", DEAD, "--model", "m", "--think", "5s-1s"], 2, "--think"),
    (["run", "--url", DEAD, "--model", "m", "--wait-ready", "nan"], 2, "--wait-ready"),
    (["ramp", "--url", DEAD, "--model", "m", "--ramp-in", "-1s"], 2, "--ramp-in '-1s'"),
    (["ramp", "--url", DEAD, "--model", "m", "--users", "nan"], 2, "--users 'nan'"),
    (["ramp", "--url", DEAD, "--model", "m", "--users", "inf"], 2, "--users 'inf'"),
    (["ramp", "--url", DEAD, "--model", "m", "--users", "1.5"], 2, "whole numbers"),
    (["ramp", "--url", DEAD, "--model", "m", "--users", "4,2"], 2, "increasing"),
    (["ramp", "--url", DEAD, "--model", "m", "--hold", "nan"], 2, "--hold"),
    (["ramp", "--url", DEAD, "--model", "m", "--think", "nan"], 2, "--think"),
    (["ramp", "--url", DEAD, "--model", "m", "--start", "nan"], 2, "--start"),
    (["ramp", "--url", DEAD, "--model", "m", "--expect-users", "nan"], 2, "--expect-users"),
    (["ramp", "--url", DEAD, "--model", "m", "--generator-lag-limit", "-1ms"], 2, "--generator-lag-limit"),
    (["ramp", "--url", DEAD, "--model", "m", "--timeout-first-token", "0"], 2, "--timeout-first-token"),
    (["mock", "--port", "99999"], 2, "--port 99999"),
    (["mock", "--ttft-ms", "nan"], 2, "--ttft-ms"),
    (["mock", "--fault-500", "1.5"], 2, "--fault-500"),
    (["mock", "--parallel", "-1"], 2, "--parallel"),
    (["mock", "--cache-report", "some"], 2, "--cache-report 'some': choose one of usage, none"),
    # target: usage errors, not "cannot reach"
    (["run", "--url", "http://127.0.0.1:99999/v1", "--model", "m"], 2, "port"),
    (["run", "--url", "http://[::1/v1", "--model", "m"], 2, "not a valid URL"),
    (["run", "--url", "http://:8000/v1", "--model", "m"], 2, "no host name"),
    (["run", "--url", DEAD, "--model", "m", "--header", "X-A: b\r\nX-Evil: 1"], 2, "line break"),
    (["run", "--url", DEAD, "--model", "m", "--header", "X-A: b\nc"], 2, "line break"),
    (["run", "--url", DEAD, "--model", "m", "--header", "NoSeparatorHere"], 2, "KEY=VALUE"),
    (["run", "--url", DEAD, "--model", "m", "--header", "Bad Name: v"], 2, "not a valid header name"),
    # result paths, checked before the run
    (["run", "--url", DEAD, "--model", "m", "--save-result", "--result-dir", "{d}/afile/sub"], 2, "--result-dir"),
    (["run", "--url", DEAD, "--model", "m", "--trace", "datasets/trace_mooncake_sample.jsonl", "--prefix-hit-ratio", "0.5"], 2, "--prefix-hit-ratio"),
    (["run", "--url", DEAD, "--model", "m", "--save-result", "--result-filename", "{d}"], 2, "is a folder"),
    (["run", "--url", DEAD, "--model", "m", "--save-result", "--result-filename", "{d}/afile/r.json"], 2, "--result-filename"),
    # files
    (["run", "--url", DEAD, "--model", "m", "--dataset", "{d}/latin1.jsonl"], 2, "latin1.jsonl:2: not UTF-8"),
    (["datasets", "inspect", "{d}/latin1.jsonl"], 2, "latin1.jsonl:2: not UTF-8"),
    (["datasets", "inspect", "{d}/bom-ff.jsonl"], 2, "bom-ff.jsonl:1: not UTF-8"),
    (["run", "--url", DEAD, "--model", "m", "--dataset", "{d}/strconv.json"], 2, "'conversations' is a str"),
    (["datasets", "inspect", "{d}/strconv.json"], 2, "'conversations' is a str"),
    (["datasets", "inspect", "{d}/strconv.json", "--multi-turn"], 2, "strconv.json:1"),
    (["datasets", "inspect", "{d}/intconv.json", "--multi-turn"], 2, "no conversation has a human"),
    # run folders
    (["report", "{d}/list"], 2, "holds a JSON list"),
    (["compare", "{d}/list", "{d}/list"], 2, "holds a JSON list"),
    (["report", "{d}/ramp-nosummary"], 2, "step 1 in run.json has no summary"),
    (["compare", "{d}/refused", "{d}/ramp-nosummary"], 2, "failed before measuring anything"),
    (["report", "{d}/refused"], 2, "failed before measuring anything"),
    (["compare", "{d}/nosummary", "{d}/refused"], 2, "before any request finished"),
    (["report", "{d}/empty"], 2, "no run.json"),
]


# one child process per option family more, through main() as a user runs it (issue 23)
CASES += [
    (["run", "--url", DEAD, "--model", "m", "--duration", "1e308"], 2, "at most 30 days"),
    (["run", "--url", DEAD, "--model", "m", "--timeout-total", "1e308"], 2, "at most 30 days"),
    (["run", "--url", DEAD, "--model", "m", "--requests", "1000000000000"], 2, "--requests"),
    (["run", "--url", DEAD, "--model", "m", "--trace", "{d}/nan-trace.jsonl"], 2, "nan-trace.jsonl:1"),
    (["run", "--url", DEAD, "--model", "m", "--trace", "{d}/gap-trace.jsonl"], 2, "gap-trace.jsonl:2"),
    (["run", "--url", DEAD, "--model", "m", "--dataset", "{d}/deep.json"], 2, "nested too deeply"),
    (["run", "--url", DEAD, "--model", "m", "--dataset", "/dev/zero"], 2, "not a regular file"),
    (["datasets", "inspect", "{d}/deep.jsonl"], 2, "deep.jsonl:1: JSON nested too deeply"),
    (["ramp", "--url", DEAD, "--model", "m", "--hold", "1e308"], 2, "--hold '1e308': at most 30 days"),
    (["mock", "--ttft-ms", "1e308"], 2, "--ttft-ms"),
    (["sweep", "--mock", "--setting", "parallel=1,2", "--ready-timeout", "1e308"], 2, "--ready-timeout"),
    (["probe", "--router", DEAD, "--direct", DEAD, "--model", "m", "--slice", "1e308"], 2, "--slice"),
    (["compare", "{d}/list", "{d}/list", "--max-regression", "nan"], 2, "--max-regression 'nan'"),
    (["compare", "{d}/list", "{d}/list", "--max-regression", "1e308%"], 2, "--max-regression '1e308%'"),
    (["report", "{d}/missing-folder"], 2, "missing-folder"),
]

R = ["run", "--url", DEAD, "--model", "m"]
A = R + ["--workload", "agent"]
RAMP = ["ramp", "--url", DEAD, "--model", "m"]
PROBE = ["probe", "--router", DEAD, "--direct", DEAD, "--model", "m"]
SWEEP = ["sweep", "--mock", "--setting", "parallel=1,2"]
INSPECT = ["datasets", "inspect"]

# (command line, exit code, text the one error line must contain): run in-process, one child
INPROC_CASES = [
    # run: load numbers
    (R + ["--duration", "0"], 2, "--duration"),
    (R + ["--duration", "721h"], 2, "at most 30 days"),
    (R + ["--duration", "99999999999m"], 2, "at most 30 days"),
    (R + ["--requests", "-1"], 2, "--requests"),
    (R + ["--requests", "100000001"], 2, "--requests 100000001"),
    (R + ["--concurrency", "0"], 2, "--concurrency"),
    (R + ["--rate", "0"], 2, "--rate"),
    (R + ["--rate", "-1"], 2, "--rate"),
    (R + ["--rate", "inf"], 2, "--rate inf"),
    (R + ["--rate", "abc"], 2, "--rate 'abc'"),
    (R + ["--rate", "1e-308", "--requests", "5"], 2, "a run lasts at most 30 days"),
    (R + ["--rate", "5", "--burstiness", "0"], 2, "--burstiness"),
    (R + ["--rate", "5", "--burstiness", "-1"], 2, "--burstiness"),
    (R + ["--rate", "5", "--burstiness", "inf"], 2, "--burstiness"),
    (R + ["--rate", "5", "--arrival", "sometimes"], 2, "--arrival"),
    (R + ["--rate", "5", "--max-concurrency", "1000000000000"], 2, "--max-concurrency"),
    (R + ["--concurrency", "2", "--rate", "5"], 2, "not both"),
    (R + ["--warmup", "1000000000000"], 2, "--warmup"),
    (R + ["--think", "inf"], 2, "--think"),
    (R + ["--think", "-1"], 2, "--think"),
    (R + ["--think", "1e308"], 2, "--think '1e308': at most 30 days"),
    (R + ["--think", "5s-800h"], 2, "at most 30 days"),
    (R + ["--wait-ready", "0"], 2, "--wait-ready"),
    (R + ["--wait-ready", "-1"], 2, "--wait-ready"),
    (R + ["--wait-ready", "inf"], 2, "--wait-ready"),
    (R + ["--wait-ready", "1e308"], 2, "--wait-ready '1e308': at most 30 days"),
    (R + ["--workers", "0"], 2, "--workers"),
    (R + ["--workers", "-1"], 2, "--workers"),
    (R + ["--workers", "1000"], 2, "--workers 1000"),
    (R + ["--workers", "nan"], 2, "--workers"),
    # run: request options and timeouts
    (R + ["--timeout-connect", "0"], 2, "--timeout-connect"),
    (R + ["--timeout-connect", "-1"], 2, "--timeout-connect"),
    (R + ["--timeout-first-token", "inf"], 2, "--timeout-first-token"),
    (R + ["--timeout-first-token", "nan"], 2, "--timeout-first-token"),
    (R + ["--timeout-idle", "1e308"], 2, "--timeout-idle 1e+308: at most 30 days"),
    (R + ["--timeout-total", "2592001"], 2, "at most 30 days"),
    (R + ["--temperature", "-1"], 2, "--temperature"),
    (R + ["--temperature", "inf"], 2, "--temperature"),
    (R + ["--temperature", "1e308"], 2, "--temperature"),
    (R + ["--extra-body", "{bad"], 2, "--extra-body"),
    (R + ["--extra-body", "[1, 2]"], 2, "--extra-body"),
    (R + ["--max-tokens-field", "bogus"], 2, "--max-tokens-field"),
    # run: output, gates, vLLM result
    (R + ["--goodput", "ttft:0"], 2, "--goodput"),
    (R + ["--goodput", "ttft:-1"], 2, "--goodput"),
    (R + ["--goodput", "ttft:inf"], 2, "--goodput"),
    (R + ["--goodput", "ttft:1e308"], 2, "--goodput"),
    (R + ["--goodput", "speed:5"], 2, "--goodput"),
    (R + ["--goodput", "ttft:abc"], 2, "--goodput"),
    (R + ["--metric-percentiles", "0"], 2, "--metric-percentiles"),
    (R + ["--metric-percentiles", "100"], 2, "--metric-percentiles"),
    (R + ["--metric-percentiles", "nan"], 2, "--metric-percentiles"),
    (R + ["--metric-percentiles", "abc"], 2, "--metric-percentiles"),
    (R + ["--percentile-metrics", "ttft,bogus"], 2, "--percentile-metrics"),
    (R + ["--label", "noequals"], 2, "--label"),
    (R + ["--metadata", "noequals"], 2, "noequals"),
    (R + ["--threshold", "garbage"], 2, "garbage"),
    # run: trace replay
    (R + ["--trace", "{d}/nope.jsonl"], 2, "no such file"),
    (R + ["--trace", "{d}/empty.jsonl"], 2, "no requests"),
    (R + ["--trace", "{d}/blank.jsonl"], 2, "no requests"),
    (R + ["--trace", "{d}/binary.jsonl"], 2, "binary.jsonl:1: not UTF-8"),
    (R + ["--trace", "{d}/binary.csv"], 2, "binary.csv:2: not UTF-8"),
    (R + ["--trace", "{d}/deep-trace.jsonl"], 2, "deep-trace.jsonl:2: JSON nested too deeply"),
    (R + ["--trace", "{d}/huge.jsonl"], 2, "huge.jsonl:1: a line longer than 64 MB"),
    (R + ["--trace", "/dev/zero"], 2, "--trace /dev/zero: not a regular file"),
    (R + ["--trace", "{d}/fifo.jsonl"], 2, "not a regular file"),
    (R + ["--trace", "{d}"], 2, "is a folder"),
    (R + ["--trace", "{d}/inf-trace.jsonl"], 2, "inf-trace.jsonl:1"),
    (R + ["--trace", "{d}/nanlen-trace.jsonl"], 2, "nanlen-trace.jsonl:1: input_length"),
    (R + ["--trace", "{d}/hour-trace.jsonl", "--trace-speed", "1e-308"], 2, "--trace-speed 1e-308"),
    (R + ["--trace", "{d}/hour-trace.jsonl", "--trace-speed", "0"], 2, "--trace-speed"),
    (R + ["--trace", "{d}/hour-trace.jsonl", "--trace-speed", "-1"], 2, "--trace-speed"),
    (R + ["--trace", "{d}/hour-trace.jsonl", "--trace-speed", "nan"], 2, "--trace-speed"),
    (R + ["--trace", "{d}/hour-trace.jsonl", "--trace-speed", "inf"], 2, "--trace-speed"),
    (R + ["--trace", "{d}/hour-trace.jsonl", "--trace-window", "5m-1m"], 2, "--trace-window"),
    (R + ["--trace", "{d}/hour-trace.jsonl", "--trace-window", "soon"], 2, "--trace-window"),
    (R + ["--trace", "{d}/hour-trace.jsonl", "--trace-window", "2h-3h"], 2, "--trace-window"),
    (R + ["--trace-speed", "2"], 2, "need --trace"),
    (R + ["--trace", "{d}/hour-trace.jsonl", "--duration", "5s"], 2, "--trace sets the load"),
    # run: workload files and numbers
    (R + ["--dataset", "{d}/nope.jsonl"], 2, "no such file"),
    (R + ["--dataset", "{d}/empty.jsonl"], 2, "no entries"),
    (R + ["--dataset", "{d}/empty.json"], 2, "expected a JSON array"),
    (R + ["--dataset", "{d}/blank.jsonl"], 2, "no entries"),
    (R + ["--dataset", "{d}/binary.jsonl"], 2, "binary.jsonl:1: not UTF-8"),
    (R + ["--dataset", "{d}/binary.json"], 2, "binary.json:1: invalid JSON"),
    (R + ["--dataset", "{d}/deep.jsonl"], 2, "deep.jsonl:1: JSON nested too deeply"),
    (R + ["--dataset", "{d}/deep.json", "--multi-turn"], 2, "deep.json:1: JSON nested too deeply"),
    (R + ["--dataset", "{d}/huge.jsonl"], 2, "huge.jsonl:1: a line longer than 64 MB"),
    (R + ["--dataset", "{d}/huge.json"], 2, "huge.json:1: an entry larger than 64 MB"),
    (R + ["--dataset", "{d}/fifo.jsonl"], 2, "not a regular file"),
    (R + ["--dataset", "{d}"], 2, "is a folder"),
    (R + ["--dataset", "{d}/nan.jsonl"], 2, "nan.jsonl:1: max_tokens"),
    (R + ["--dataset", "{d}/notobj.jsonl"], 2, "notobj.jsonl:1: expected a JSON object"),
    (R + ["--dataset", "{d}/notarray.json"], 2, "expected a JSON array"),
    (R + ["--dataset", "{d}/broken.json"], 2, "broken.json:1: invalid JSON"),
    (R + ["--dataset", "{d}/afile", "--dataset-format", "bogus"], 2, "--dataset-format"),
    (R + ["--dataset", "/dev/zero", "--dataset-format", "sharegpt"], 2, "not a regular file"),
    # issue 49: agent traces and knobs, every number bounded before any load, every file checked
    (A + ["--dataset", "{d}/a-gap.jsonl"], 2, "a-gap.jsonl:2: tool_gap_s 1e+15: over 30 days"),
    (A + ["--dataset", "{d}/a-out1e300.jsonl"], 2, "a-out1e300.jsonl:1: output_tokens 1e+300"),
    (A + ["--dataset", "{d}/a-outnan.jsonl"], 2, "a-outnan.jsonl:1: output_tokens nan"),
    (A + ["--dataset", "{d}/a-outinf.jsonl"], 2, "a-outinf.jsonl:1: output_tokens inf"),
    (A + ["--dataset", "{d}/a-new.jsonl"], 2, "a-new.jsonl:1: new_tokens 1000000000000: over"),
    (A + ["--dataset", "{d}/a-system.jsonl"], 2, "a-system.jsonl:1: system_tokens 1000000000"),
    (A + ["--dataset", "{d}/a-deep.jsonl"], 2, "a-deep.jsonl:1: JSON nested too deeply"),
    (A + ["--dataset", "{d}/a-chain.jsonl"], 2, "sub-agents nested over 64 levels deep"),
    (A + ["--dataset", "/dev/zero"], 2, "not a regular file"),
    (A + ["--dataset", "{d}/fifo.jsonl"], 2, "not a regular file"),
    (A + ["--dataset", "{d}/w-think.jsonl"], 2, "w-think.jsonl:1 (trace t, main call 2): think"),
    (A + ["--dataset", "{d}/w-nan.jsonl"], 2, "think_time nan: expected a number of seconds"),
    (A + ["--dataset", "{d}/w-inf.jsonl"], 2, "think_time inf: expected a number of seconds"),
    (A + ["--dataset", "{d}/w-nested.json"], 2, "w-nested.json:1: JSON nested too deeply"),
    (A + ["--dataset", "{d}/o-start.jsonl"], 2, "o-start.jsonl:1: span s1: start_time nan"),
    (A + ["--dataset", "{d}/o-abc.jsonl"], 2, "output_tokens 'abc': expected a whole number"),
    (A + ["--dataset", "{d}/o-inf.jsonl"], 2, "output_tokens inf: expected a whole number"),
    (A + ["--dataset", "{d}/o-x.json"], 2, "o-x.json:1: resourceSpans is a str"),
    (A + ["--dataset", "{d}/o-int.json"], 2, "output_tokens 99999999999999999999999: over"),
    (A + ["--agent-result-tokens", "100000000"], 2, "at most 2,000,000 tokens"),
    (A + ["--agent-system-tokens", "1000000000"], 2, "--agent-system-tokens '1000000000'"),
    (A + ["--agent-steps", "1000000000"], 2, "--agent-steps '1000000000': at most 10,000"),
    (A + ["--agent-fanout-width", "5000"], 2, "at most 1,000 sub-agents"),
    (["report", "{d}/h-summary-list"], 2, "run.json: summary: a list where an object belongs"),
    (["report", "{d}/h-config-str"], 2, "run.json: config: the text 'x' where an object"),
    (["report", "{d}/h-yesterday"], 2, "run.json: started_at: the text 'yesterday' where a"),
    (["report", "{d}/h-strnums"], 2, "summary.completed: the text '3' where a whole number"),
    (["compare", "{d}/h-target", "{d}/h-strnums"], 2, "config.target: a list where an object"),
    (RAMP + ["--scenario", "{d}/sc-dup.yaml"], 2, "sc-dup.yaml:6: the key 'chat' appears twice"),
    (RAMP + ["--scenario", "{d}/sc-dup.json"], 2, "sc-dup.json:2: the key 'chat' appears twice"),
    (RAMP + ["--scenario", "{d}/sc-zero.toml"], 2, "sc-zero.toml:3: class 'chat': --dataset "
                                                   "/dev/zero: not a regular file"),
    (RAMP + ["--scenario", "{d}/sc-folder"], 2, "sc-folder: is a folder; give a .toml, .yaml"),
    (R + ["--host-metrics", "not a url"], 2, "--host-metrics 'not a url': not a URL"),
    (R + ["--limit", "-1"], 2, "--limit"),
    (R + ["--limit", "1000000000000"], 2, "--limit"),
    (R + ["--turns", "-1"], 2, "--turns"),
    (R + ["--words", "0"], 2, "--words"),
    (R + ["--random-input-len", "0"], 2, "--random-input-len"),
    (R + ["--random-output-len", "-1"], 2, "--random-output-len"),
    (R + ["--random-prefix-len", "-1"], 2, "--random-prefix-len"),
    (R + ["--random-range-ratio", "1"], 2, "--random-range-ratio"),
    (R + ["--random-range-ratio", "nan"], 2, "--random-range-ratio"),
    (R + ["--random-range-ratio", "-1"], 2, "--random-range-ratio"),
    (R + ["--prompt-tokens", "0"], 2, "--prompt-tokens"),
    (R + ["--prompt-tokens", "9-2"], 2, "--prompt-tokens"),
    (R + ["--prompt-tokens", "nan"], 2, "--prompt-tokens"),
    (R + ["--output-tokens", "-1"], 2, "--output-tokens"),
    (R + ["--shared-prefix-tokens", "-1"], 2, "--shared-prefix-tokens"),
    (R + ["--prefixes", "0"], 2, "--prefixes"),
    (R + ["--prefix-hit-ratio", "1"], 2, "--prefix-hit-ratio"),
    (R + ["--prefix-hit-ratio", "nan"], 2, "--prefix-hit-ratio"),
    (R + ["--prefix-hit-ratio", "-0.5"], 2, "--prefix-hit-ratio"),
    (R + ["--cache-block-tokens", "0"], 2, "--cache-block-tokens"),
    (R + ["--sharegpt-output-len", "0"], 2, "--sharegpt-output-len"),
    (R + ["--hf-column", "text"], 2, "--hf-column"),
    # URLs, headers, network
    (["run", "--url", "ftp://127.0.0.1/v1", "--model", "m"], 2, "ftp"),
    (["run", "--url", "http://127.0.0.1:0/v1", "--model", "m"], 2, "port"),
    (["run", "--url", "http://127.0.0.1:-1/v1", "--model", "m"], 2, "port"),
    (["run", "--url", "http://exa mple.com/v1", "--model", "m"], 2, "contains spaces"),
    (R + ["--header", ": value"], 2, "--header"),
    (R + ["--header", "X-A: b\x00c"], 2, "--header"),
    (R + ["--header", "X-A: a\rb"], 2, "line break"),
    (R + ["--api", "bogus"], 2, "--api"),
    (R + ["--server-probe", "bogus"], 2, "--server-probe"),
    (R + ["--proxy", "bogus://x:1"], 2, "--proxy"),
    (R + ["--ca-cert", "{d}/nope.pem"], 2, "--ca-cert"),
    (R + ["--key", "{d}/nope.pem"], 2, "--key"),
    # ramp
    (RAMP + ["--users", "0"], 2, "--users"),
    (RAMP + ["--users", "-1,2"], 2, "--users"),
    (RAMP + ["--users", "a,b"], 2, "--users"),
    (RAMP + ["--start", "0"], 2, "--start"),
    (RAMP + ["--start", "1e308"], 2, "--start"),
    (RAMP + ["--step", "-1"], 2, "--step"),
    (RAMP + ["--up-to", "inf"], 2, "--up-to"),
    (RAMP + ["--start", "1", "--step", "0.0001", "--up-to", "100"], 2, "over 10000 steps"),
    (RAMP + ["--hold", "0"], 2, "--hold"),
    (RAMP + ["--hold", "721h"], 2, "at most 30 days"),
    (RAMP + ["--ramp-in", "1e308"], 2, "--ramp-in '1e308': at most 30 days"),
    (RAMP + ["--ramp-in", "nan"], 2, "--ramp-in"),
    (RAMP + ["--think", "1e308"], 2, "at most 30 days"),
    (RAMP + ["--repeat", "0"], 2, "--repeat"),
    (RAMP + ["--repeat", "1001"], 2, "--repeat"),
    (RAMP + ["--by", "sideways"], 2, "--by"),
    (RAMP + ["--expect-users", "-1"], 2, "--expect-users"),
    (RAMP + ["--expect-users", "inf"], 2, "--expect-users"),
    (RAMP + ["--generator-lag-limit", "0"], 2, "--generator-lag-limit"),
    (RAMP + ["--generator-lag-limit", "1e308"], 2, "at most 30 days"),
    (RAMP + ["--timeout-idle", "1e308"], 2, "at most 30 days"),
    (RAMP + ["--workers", "0"], 2, "--workers"),
    (RAMP + ["--dataset", "/dev/zero"], 2, "not a regular file"),
    (RAMP + ["--prefix-hit-ratio", "0.5"], 2, "--prefix-hit-ratio"),
    # ramp --find, --join
    (RAMP + ["--find", "--users", "1,2"], 2, "--users lists fixed steps and --find picks its own"),
    (RAMP + ["--find", "--step", "2"], 2, "--step spaces fixed steps and --find picks its own"),
    (RAMP + ["--find", "--keep-going"], 2, "--keep-going runs every fixed step"),
    (RAMP + ["--find", "--start", "1.5"], 2, "--start 1.5: users come in whole numbers"),
    (RAMP + ["--find", "--start", "0"], 2, "--start 0"),
    (RAMP + ["--find", "--start", "8", "--up-to", "4"], 2, "--start 8 is above --up-to 4"),
    (RAMP + ["--find", "--up-to", "inf"], 2, "--up-to"),
    (RAMP + ["--find", "--up-to", "1e308"], 2, "--up-to"),
    (RAMP + ["--users", "1,2", "--sustain", "5m"], 2, "--sustain goes with --find"),
    (RAMP + ["--users", "1,2", "--budget", "5m"], 2, "--budget goes with --find"),
    (RAMP + ["--budget", "0"], 2, "--budget '0': must be above 0"),
    (RAMP + ["--budget", "nan"], 2, "--budget 'nan'"),
    (RAMP + ["--budget", "721h"], 2, "at most 30 days"),
    (RAMP + ["--budget", "10s"], 2, "--budget 10s is shorter than one step"),
    (RAMP + ["--sustain", "-1s"], 2, "--sustain '-1s': must not be negative"),
    (RAMP + ["--sustain", "0"], 2, "--sustain '0': must be above 0"),
    (RAMP + ["--join", "middle"], 2, "--join 'middle': choose start or spread"),
    (RAMP + ["--join", "spread", "--by", "rate", "--users", "1,2"], 2, "--join spread goes with --by users"),
    # ramp: traffic classes (--scenario) and users who give up (--abandon)
    (RAMP + ["--scenario", "{d}/nope.toml"], 2, "--scenario"),
    (RAMP + ["--scenario", "{d}/fifo.toml"], 2, "not a regular file"),
    (RAMP + ["--scenario", "{d}/deep.json"], 2, "--scenario"),
    (RAMP + ["--scenario", "{d}/scenario-key.toml"], 2, "scenario-key.toml:3: unknown key 'colour'"),
    (RAMP + ["--scenario", "{d}/scenario-sum.toml"], 2, "the shares sum to 0.8"),
    (RAMP + ["--scenario", "{d}/scenario-threshold.toml"], 2, "scenario-threshold.toml:3: class 'chat': threshold"),
    (RAMP + ["--scenario", "{d}/scenario-value.toml"], 2, "scenario-value.toml:3: class 'chat': --prompt-tokens"),
    (RAMP + ["--scenario", "{d}/scenario-sum.toml", "--grow", "video"], 2, "the shares sum"),
    (RAMP + ["--scenario", "{d}/scenario-ok.toml", "--grow", "video"], 2, "--grow 'video': no such class"),
    (RAMP + ["--grow", "chat"], 2, "--grow goes with --scenario"),
    (RAMP + ["--isolate"], 2, "--isolate goes with --scenario"),
    (RAMP + ["--scenario", "{d}/scenario-floors.toml", "--users", "2,4"], 2, "--users 2: below the classes' floors (min_users: chat 2 + rag 1 = 3)"),
    (RAMP + ["--scenario", "{d}/scenario-min.toml", "--grow", "chat"], 2, "scenario-min.toml:3: class 'chat': min_users goes with a share"),
    # run --scenario: the crowd at one load
    (R + ["--scenario", "{d}/scenario-key.toml", "--concurrency", "2"], 2, "scenario-key.toml:3: unknown key 'colour'"),
    (R + ["--scenario", "{d}/scenario-threshold.toml", "--concurrency", "2"], 2, "scenario-threshold.toml:3: class 'chat': threshold"),
    (R + ["--scenario", "{d}/scenario-ok.toml"], 2, "give --concurrency N (or --rate R"),
    (R + ["--scenario", "{d}/scenario-ok.toml", "--concurrency", "2", "--requests", "9"], 2, "--requests does not go with --scenario"),
    (R + ["--scenario", "{d}/scenario-ok.toml", "--concurrency", "2", "--workers", "2"], 2, "traffic classes run in one process; drop --workers"),
    (R + ["--scenario", "{d}/scenario-ok.toml", "--rate", "inf", "--requests", "9"], 2, "--requests does not go with --scenario"),
    (R + ["--scenario", "{d}/scenario-floors.toml", "--concurrency", "2"], 2, "--concurrency 2: below the classes' floors"),
    (R + ["--scenario", "{d}/scenario-ok.toml", "--concurrency", "2", "--metric-percentiles", "99.9"], 2, "--metric-percentiles 99.9 with --scenario"),
    (R + ["--scenario", "{d}/scenario-ok.toml", "--concurrency", "2", "--goodput", "ttft:500"], 2, "--goodput does not go with --scenario"),
    (RAMP + ["--abandon", "after=soon"], 2, "--abandon after="),
    (RAMP + ["--abandon", "after=inf"], 2, "--abandon"),
    (RAMP + ["--abandon", "share=2,after-tokens=3"], 2, "at most 1"),
    (R + ["--abandon", "share=0.5"], 2, "add after-tokens=N"),
    (R + ["--abandon", "after-tokens=-1,share=0.1"], 2, "at least 1"),
    (R + ["--abandon", "patience=3s"], 2, "unknown key 'patience'"),
    (R + ["--abandon", "after=1e308"], 2, "at most 30 days"),
    # sweep
    (["sweep", "--mock", "--setting", "parallel=1", "--resume", "{d}/nope"], 2, "/nope: no sweep.json there"),
    (["sweep", "--mock", "--setting", "parallel=1", "--resume", "{d}/ramp-nosummary"], 2, "no sweep.json there"),
    (SWEEP + ["--ready-timeout", "0"], 2, "--ready-timeout"),
    (SWEEP + ["--ready-timeout", "nan"], 2, "--ready-timeout"),
    (SWEEP + ["--stop-grace", "-1"], 2, "--stop-grace"),
    (SWEEP + ["--stop-grace", "1e308"], 2, "--stop-grace '1e308': at most 30 days"),
    (SWEEP + ["--hold", "inf"], 2, "--hold"),
    (["sweep", "--setting", "parallel=1,2"], 2, "give one of --serve, --before or --mock"),
    (["sweep", "--mock", "--setting", "nonsense=1,2"], 2, "--setting nonsense"),
    (["sweep", "--setting", "parallel=1,2", "--mock-options", "--x", "--serve", "x"], 2, "--mock-options"),
    # probe
    (PROBE + ["--rounds", "0"], 2, "--rounds"),
    (PROBE + ["--slice", "0"], 2, "--slice"),
    (PROBE + ["--slice", "nan"], 2, "--slice"),
    (PROBE + ["--slice", "800h"], 2, "at most 30 days"),
    (PROBE + ["--users", "0"], 2, "--users"),
    (PROBE + ["--think", "inf"], 2, "--think"),
    (PROBE + ["--timeout-total", "inf"], 2, "--timeout-total"),
    # mock
    (["mock", "--port", "-1"], 2, "--port"),
    (["mock", "--port", "65536"], 2, "--port"),
    (["mock", "--ttft-ms", "-1"], 2, "--ttft-ms"),
    (["mock", "--ttft-ms", "inf"], 2, "--ttft-ms"),
    (["mock", "--itl-ms", "nan"], 2, "--itl-ms"),
    (["mock", "--itl-ms", "1e308"], 2, "--itl-ms"),
    (["mock", "--stall-ms", "1e308"], 2, "--stall-ms"),
    (["mock", "--slow-first-byte-ms", "inf"], 2, "--slow-first-byte-ms"),
    (["mock", "--prefill-ms-per-token", "1e308"], 2, "--prefill-ms-per-token"),
    (["mock", "--jitter", "-1"], 2, "--jitter"),
    (["mock", "--tokens", "0"], 2, "--tokens"),
    (["mock", "--tokens", "1000000000000"], 2, "--tokens"),
    (["mock", "--tokens-per-s", "0"], 2, "--tokens-per-s"),
    (["mock", "--tokens-per-s", "inf"], 2, "--tokens-per-s"),
    (["mock", "--fault-429", "-0.1"], 2, "--fault-429"),
    (["mock", "--fault-cut", "nan"], 2, "--fault-cut"),
    (["mock", "--fault-500", "0.6", "--fault-429", "0.6"], 2, "add up to more than 1"),
    (["mock", "--max-queue", "-1"], 2, "--max-queue"),
    (["mock", "--cache-blocks", "-1"], 2, "--cache-blocks"),
    (["mock", "--replicas", "0"], 2, "--replicas"),
    (["mock", "--workers", "0"], 2, "--workers"),
    (["mock", "--save-profile", "{d}/p.json"], 2, "--save-profile"),
    (["mock", "--profile", "{d}/profile.json"], 2, "profile.json"),
    (["mock", "--like", "{d}/empty"], 2, "--like"),
    # report, compare, runs
    (["report", "{d}/afile"], 2, "afile"),
    (["report", "{d}/list", "--format", "pdf"], 2, "--format"),
    (["report", "{d}/binary-run"], 2, "run.json"),
    (["compare", "{d}/empty", "{d}/list"], 2, "no run.json"),
    (["compare", "{d}/nope", "{d}/list"], 2, "nope"),
    (["compare", "{d}/list", "{d}/list", "--max-regression", "inf"], 2, "can never fail"),
    (["compare", "{d}/list", "{d}/list", "--max-regression", "0"], 2, "--max-regression '0'"),
    (["compare", "{d}/list", "{d}/list", "--max-regression", "-5%"], 2, "--max-regression '-5%'"),
    (["compare", "{d}/list", "{d}/list", "--max-regression", "1001%"], 2, "at most 1000%"),
    (["compare", "{d}/list", "{d}/list", "--max-regression", "lots"], 2, "--max-regression 'lots'"),
    # datasets inspect
    (INSPECT + ["{d}/nope.jsonl"], 2, "no such file"),
    (INSPECT + ["{d}/empty.jsonl"], 2, "no entries"),
    (INSPECT + ["{d}/binary.jsonl"], 2, "not UTF-8"),
    (INSPECT + ["{d}/deep.json"], 2, "deep.json:1: JSON nested too deeply"),
    (INSPECT + ["{d}/huge.jsonl"], 2, "a line longer than 64 MB"),
    (INSPECT + ["{d}/huge.json"], 2, "an entry larger than 64 MB"),
    (INSPECT + ["/dev/zero"], 2, "not a regular file"),
    (INSPECT + ["{d}/fifo.jsonl"], 2, "not a regular file"),
    (INSPECT + ["{d}"], 2, "is a folder"),
    (INSPECT + ["synthetic", "--count", "0"], 2, "--count"),
    (INSPECT + ["synthetic", "--count", "1000000000000"], 2, "--count"),
    (INSPECT + ["synthetic", "--prompt-tokens", "-5"], 2, "--prompt-tokens"),
    # issue 40 section 4: a negative seed looped for ever (item 2)
    (R + ["--seed", "-1"], 2, "--seed -1: must be between 0 and"),
    (RAMP + ["--seed", "-5"], 2, "--seed -5: must be between 0 and"),
    # a schema's keyword of the wrong type crashed the run (item 3), deep JSON (item 4)
    (R + ["--response-format", "{d}/required5.json"], 2,
     'required5.json: "required": must be a list of property names, not a number (5)'),
    (R + ["--response-format", "{d}/deep.json"], 2, "deep.json: JSON nested too deeply"),
    (R + ["--tools", "{d}/badtool.json"], 2, "tool 'f''s parameters: \"minItems\" at properties.a"),
    # every file flag: not UTF-8, /dev/zero, a pipe, too large, YAML aliases (item 7)
    (R + ["--tools", "{d}/latin1.jsonl"], 2, "latin1.jsonl:2: not UTF-8"),
    (R + ["--tools", "/dev/zero"], 2, "--tools /dev/zero: not a regular file"),
    (R + ["--tools", "{d}/fifo.jsonl"], 2, "not a regular file"),
    (R + ["--tools", "{d}/huge.json"], 2, "larger than the 16 MB"),
    (R + ["--response-format", "/dev/zero"], 2, "--response-format /dev/zero: not a regular file"),
    (R + ["--response-format", "{d}/binary.json"], 2, "binary.json:1: not UTF-8"),
    (R + ["--config", "{d}/zero.toml"], 2, "zero.toml: not a regular file"),
    (R + ["--config", "{d}/big.toml"], 2, "larger than the 1 MB"),
    (R + ["--config", "{d}/laughs.yaml"], 2, "laughs.yaml:2: a YAML alias (*a)"),
    (R + ["--config", "{d}/deep.json"], 2, "nested too deeply"),
    (["mock", "--profile", "{d}/zero.json"], 2, "zero.json: not a regular file"),
    (["mock", "--like", "{d}/zero-run"], 2, "requests.jsonl: not a regular file"),
    # images: only what is needed, and never more than the cap (item 5)
    (R + ["--images", "3", "--image-size", "8192x8192"], 2, "one turn's images are about 725 MB"),
    # a URL with an empty host label (item 8); framing headers (item 14)
    (["run", "--url", "http://gpu-box..local:8000/v1", "--model", "m"], 2, "has an empty label"),
    (R + ["--proxy", "http://proxy..corp:3128"], 2, "--proxy 'http://proxy..corp:3128': the host"),
    (R + ["--header", "Transfer-Encoding: chunked"], 2, "--header Transfer-Encoding: llmbench frames"),
    (R + ["--header", "content-length=5"], 2, "cannot be set"),
    (R + ["--header", "Connection: close"], 2, "cannot be set"),
    # more JSON and files from outside: a deep --extra-body, a huge tokenizer.json or run.json,
    # a deep sweep.json
    (R + ["--extra-body", "[" * 100_000], 2, "--extra-body: JSON nested too deeply"),
    (R + ["--tokenizer", "{d}/huge.json"], 2, "larger than the 512 MB a tokenizer.json can be"),
    (["report", "{d}/big-run"], 2, "larger than any run.json llmbench writes"),
    (["report", "{d}/deep-sweep"], 2, "sweep.json is nested too deeply to be one llmbench wrote"),
    # the telemetry flags' URLs and process ids, as --url's
    (R + ["--host-metrics", "http://[zz/metrics"], 2, "--host-metrics 'http://[zz/metrics': not a valid URL"),
    (R + ["--host-metrics", "http://node..lan:9100/metrics"], 2, "the host name 'node..lan' has an empty label"),
    (R + ["--gpu-metrics", "http://gpu..x:9400/metrics"], 2, "--gpu-metrics 'http://gpu..x:9400/metrics': the host"),
    (R + ["--server-pid", "99999999999999999999"], 2, "no process id is above 2147483647"),
]


def child_cases() -> set[int]:
    """The rows run as a child process, as a user runs them: the first of each command and exit
    code (its own way out of the program: the interpreter's start, main(), the one line and the
    status a shell sees). The rest go through the same main() in one process
    (hostile_runner.py), the same assertions, a hundred interpreter starts fewer."""
    first: dict[tuple[str, int], int] = {}
    for i, (argv, code, _) in enumerate(CASES):
        first.setdefault((argv[0], code), i)
    return set(first.values())


@pytest.fixture(scope="module")
def outcomes(files, tmp_path_factory) -> dict[int, tuple[subprocess.CompletedProcess, Path]]:
    """Every case of the table: child_cases() each a child process (four at a time), the rest
    through main() in one child beside them."""
    from concurrent.futures import ThreadPoolExecutor
    children = sorted(child_cases())
    rest = [i for i in range(len(CASES)) if i not in children]

    def argv_of(i: int, out: Path) -> list[str]:
        argv = [a.replace("{d}", str(files)) for a in CASES[i][0]]
        if argv[0] in ("run", "ramp"):
            argv += ["--out", str(out / "res")]
        if argv[0] == "compare":
            argv += ["--html", str(out / "c.html")]
        return argv

    def one(i: int) -> dict:
        out = tmp_path_factory.mktemp(f"case{i}")
        r = llmbench(*argv_of(i, out))
        return {"args": r.args, "returncode": r.returncode, "stdout": r.stdout,
                "stderr": r.stderr, "out": str(out), "exception": None}

    def in_process() -> list[dict]:
        outs = [tmp_path_factory.mktemp(f"case{i}") for i in rest]
        job = {"cases": [argv_of(i, o) for i, o in zip(rest, outs)],
               "timeout_s": CASE_TIMEOUT_S, "main": True}
        # cwd as a child's (a case names datasets/... relative to the repository)
        r = subprocess.run([sys.executable, str(ROOT / "tests" / "helpers" / "hostile_runner.py")],
                           input=json.dumps(job), capture_output=True, text=True, env=ENV,
                           cwd=ROOT, timeout=CASE_TIMEOUT_S * len(rest) + 60)
        assert r.returncode == 0, r.stderr[-3000:]
        return [{"args": argv, "returncode": x["code"], "stdout": x["stdout"],
                 "stderr": x["stderr"], "out": str(o), "exception": x["exception"]}
                for argv, o, x in zip(job["cases"], outs, json.loads(r.stdout))]

    def make() -> list[dict]:
        with ThreadPoolExecutor(4) as pool:
            inproc = pool.submit(in_process)
            kids = list(pool.map(one, children))
            done = dict(zip(children, kids)) | dict(zip(rest, inproc.result()))
        return [done[i] for i in range(len(CASES))]
    # once per session, whichever worker gets here first (tests/helpers/once.py)
    done = once(tmp_path_factory, "hostile-cases", make)
    return {i: (subprocess.CompletedProcess(d["args"], d["returncode"], d["stdout"], d["stderr"]),
                Path(d["out"]), d["exception"]) for i, d in enumerate(done)}


@pytest.mark.parametrize("i", range(len(CASES)),
                         ids=[" ".join(c[0][:1] + c[0][-2:])[:60] for c in CASES])
def test_bad_input_is_one_line(i, outcomes):
    _, code, needle = CASES[i]
    r, out, exc = outcomes[i]
    assert exc is None, exc                                 # nothing escaped main(), no hang
    assert r.returncode == code, (r.returncode, r.stderr)
    line = one_error_line(r)
    assert needle in line, line
    # a usage error leaves no run folder behind
    assert not (out / "res").exists() or not any((out / "res").iterdir())


CASE_TIMEOUT_S = 20          # each case must end within it (a busy machine included)


@pytest.fixture(scope="module")
def inproc_outcomes(files, tmp_path_factory) -> list[dict]:
    """Every in-process case, in one child process (hostile_runner.py), in two halves run side
    by side; each case under its own SIGALRM."""
    from concurrent.futures import ThreadPoolExecutor
    out = tmp_path_factory.mktemp("inproc")

    def argv_of(i: int) -> list[str]:
        argv = [a.replace("{d}", str(files)) for a in INPROC_CASES[i][0]]
        if argv[0] in ("run", "ramp", "probe", "sweep"):
            argv += ["--out", str(out / f"res{i}")]
        if argv[0] == "compare":
            argv += ["--html", str(out / f"c{i}.html")]
        return argv

    def batch(idx: list[int]) -> list[dict]:
        job = {"cases": [argv_of(i) for i in idx], "timeout_s": CASE_TIMEOUT_S}
        r = subprocess.run([sys.executable, str(ROOT / "tests" / "helpers" / "hostile_runner.py")],
                           input=json.dumps(job), capture_output=True, text=True, env=ENV,
                           cwd=out, timeout=CASE_TIMEOUT_S * len(idx) + 60)
        assert r.returncode == 0, r.stderr[-3000:]
        return json.loads(r.stdout)
    def make() -> list[dict]:
        n = len(INPROC_CASES)
        halves = [list(range(0, n, 2)), list(range(1, n, 2))]
        with ThreadPoolExecutor(2) as pool:
            done = list(pool.map(batch, halves))
        results: list[dict] = [{}] * n
        for idx, res in zip(halves, done):
            for i, r in zip(idx, res):
                results[i] = {**r, "out": str(out / f"res{i}")}
        return results
    # once per session, whichever worker gets here first (tests/helpers/once.py)
    return [{**r, "out": Path(r["out"])} for r in once(tmp_path_factory, "hostile-inproc", make)]


@pytest.mark.parametrize("i", range(len(INPROC_CASES)),
                         ids=[" ".join(c[0][:1] + c[0][-2:])[:60] for c in INPROC_CASES])
def test_bad_input_in_process_is_one_line(i, inproc_outcomes):
    _, code, needle = INPROC_CASES[i]       # (no {d} in a needle: the once() run may be
    # another xdist worker's, with its own files folder)
    r = inproc_outcomes[i]
    assert r["exception"] is None, r["exception"]          # no traceback, no hang
    assert r["took_s"] < CASE_TIMEOUT_S
    assert r["code"] == code, (r["code"], r["stderr"])
    assert "Traceback" not in r["stdout"] + r["stderr"]
    lines = [x for x in r["stderr"].splitlines() if x.strip()]
    # one line per problem (a spec says every problem at once: options.Spec.check), the
    # case's own first
    assert lines and all(x.startswith("error: ") for x in lines), r["stderr"]
    assert needle in lines[0], lines[0]
    assert not r["out"].exists() or not any(r["out"].iterdir())


def test_the_table_covers_every_command():
    cases = CASES + INPROC_CASES
    assert len(cases) >= 150
    commands = {c[0][0] if c[0][0] != "datasets" else "datasets inspect" for c in cases}
    assert commands >= {"run", "ramp", "sweep", "probe", "mock", "report", "compare",
                        "datasets inspect"}
    # the numbers that once hung or crashed, in at least three commands each
    for bad in ("0", "-1", "nan", "inf", "1e308"):
        assert len({c[0][0] for c in cases if bad in c[0]}) >= 3, bad


def test_runs_lists_an_unreadable_folder_and_goes_on(files):
    r = llmbench("runs", "--out", str(files))
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr
    assert "list  (unreadable:" in r.stdout and "holds a JSON list" in r.stdout
    assert "1970" not in r.stdout            # failed runs have no start time: not the epoch


# -- cases that need a server ---------------------------------------------------------------------

def test_model_optional_when_one_model_and_listed_when_several(mock_factory, tmp_path):
    one = mock_factory(ttft_ms=1, itl_ms=1, models=["only-one"])
    r = llmbench("run", "--url", one.url + "/v1", "--requests", "2", "--prompt-tokens", "5",
                 "--output-tokens", "2", "--out", str(tmp_path / "a"))
    assert r.returncode == 0, r.stderr
    assert "only-one" in r.stderr
    run = json.loads(next((tmp_path / "a").iterdir()).joinpath("run.json").read_text())
    assert run["config"]["target"]["model"] == "only-one"
    many = mock_factory(models=["a1", "b2", "c3"])
    for url in (many.url + "/v1", many.url):            # OpenAI /v1/models and Ollama /api/tags
        r = llmbench("run", "--url", url, "--out", str(tmp_path / "b"))
        assert r.returncode == 2
        line = one_error_line(r)
        assert "a1, b2, c3" in line and "--model" in line


def test_model_discovery_against_nothing_is_cannot_reach(tmp_path):
    r = llmbench("run", "--url", DEAD, "--out", str(tmp_path))
    assert r.returncode == 3 and "cannot reach" in one_error_line(r)


def test_wait_ready_waits_for_a_server_that_starts_late(tmp_path):
    port = free_port()
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "run", "--url",
                          f"http://127.0.0.1:{port}/v1", "--requests", "2", "--prompt-tokens", "5",
                          "--output-tokens", "2", "--wait-ready", "1m", "--out", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    try:
        time.sleep(2.0)
        assert p.poll() is None          # still waiting: nothing listens yet
        mock = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "mock", "--port", str(port),
                                 "--ttft-ms", "1", "--itl-ms", "1"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL, env=ENV, cwd=ROOT)
        try:
            out, err = p.communicate(timeout=60)
        finally:
            mock.terminate()
            mock.wait(10)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err
    assert "waiting up to 60 s" in err


def test_wait_ready_gives_up_with_exit_3(tmp_path):
    r = llmbench("run", "--url", DEAD, "--model", "m", "--wait-ready", "1s", "--out", str(tmp_path))
    assert r.returncode == 3 and "Traceback" not in r.stderr
    assert "not ready after 1 s" in r.stderr.splitlines()[-1]


def stalled() -> RawServer:
    """Headers, then nothing: a server stuck before its first token."""
    return RawServer([(0, http_head(chunked=True)), (60, None)])


def test_preflight_against_a_stalled_server_says_it_waits_and_stops(tmp_path):
    with stalled() as s:
        t = time.monotonic()
        r = llmbench("run", "--url", s.url + "/v1", "--model", "m", "--requests", "50",
                     "--timeout-first-token", "7", "--out", str(tmp_path))
        took = time.monotonic() - t
        assert len(s.requests) == 1             # the load never started
    assert r.returncode == 3, r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.splitlines()
    assert lines[0].startswith("waiting for the server to answer the first request")
    assert lines[-1].startswith("error: ") and "no first token within 7 s" in lines[-1]
    assert took < 30
    run = json.loads(next(tmp_path.iterdir()).joinpath("run.json").read_text())
    assert run["status"] == "failed" and "no first token" in run["error"]


def test_sigterm_during_preflight_leaves_an_explained_folder(tmp_path):
    with stalled() as s:
        p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "run", "--url", s.url + "/v1",
                              "--model", "m", "--out", str(tmp_path)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
        deadline = time.monotonic() + 30
        while not s.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=30)
    assert p.returncode == 130 and "Traceback" not in err
    assert err.splitlines()[-1].startswith("error: interrupted during the preflight")
    run = json.loads(next(tmp_path.iterdir()).joinpath("run.json").read_text())
    assert run["status"] == "interrupted" and "preflight" in run["error"]


class EchoAuth(BaseHTTPRequestHandler):
    """Answers the first request with a good stream, and every later one with a 401 whose body
    echoes the Authorization header, as some proxies do."""

    calls = 0

    def do_GET(self) -> None:                  # /v1/models: one model
        body = b'{"data": [{"id": "echo"}]}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        type(self).calls += 1
        if type(self).calls == 1:
            body = (b'data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}\n\n'
                    b"data: [DONE]\n\n")
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
        else:
            body = json.dumps({"error": f"bad credentials: {self.headers.get('authorization')} "
                                        f"key {self.headers.get('x-api-key')}"}).encode()
            self.send_response(401)
            self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.send_header("connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a) -> None:
        pass


@pytest.mark.parametrize("how", ["basic-header", "bearer-key", "url-password", "header-equals"])
def test_secrets_never_written_or_printed(how, tmp_path):
    EchoAuth.calls = 0
    srv = ThreadingHTTPServer(("127.0.0.1", 0), EchoAuth)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    port = srv.server_address[1]
    url = f"http://127.0.0.1:{port}/v1"
    secret = "dXNlcjpTRUNSRVQxMjM0NTY3OA=="          # base64, '=' inside the value
    args = {"basic-header": ["--header", f"Authorization: Basic {secret}"],
            "bearer-key": ["--api-key", secret],
            "url-password": [],
            "header-equals": ["--header", f"X-Api-Key={secret}"]}[how]
    if how == "url-password":
        url = f"http://user:{secret}@127.0.0.1:{port}/v1"
    try:
        r = llmbench("run", "--url", url, "--model", "echo", "--requests", "4", "--prompt-tokens",
                     "5", "--output-tokens", "2", "--out", str(tmp_path / "res"), *args)
    finally:
        srv.shutdown()
    assert r.returncode == 0, r.stderr
    run_dir = next((tmp_path / "res").iterdir())
    listing = llmbench("runs", "--out", str(tmp_path / "res"))
    report = llmbench("report", str(run_dir))
    assert report.returncode == 0, report.stderr
    saved = "".join(p.read_text() for p in run_dir.iterdir() if p.is_file())
    everything = r.stdout + r.stderr + listing.stdout + report.stdout + report.stderr + saved
    assert "bad credentials" in saved and "***" in saved    # the error body is kept, redacted
    for leak in (secret, secret[:-2], "SECRET12345678", "user:"):
        assert leak not in everything, (leak, how)


def test_sigkill_leaves_no_mock_and_report_rebuilds(tmp_path):
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "run", "--requests", "300",
                          "--concurrency", "2", "--prompt-tokens", "5", "--output-tokens", "20",
                          "--out", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    line = p.stderr.readline()                          # "No server found: ... at http://..."
    port = int(line.rsplit(":", 1)[1])
    log = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:                  # until some requests are on disk
        logs = list(tmp_path.glob("*/requests.jsonl"))
        if logs and len(logs[0].read_text().splitlines()) >= 3:
            log = logs[0]
            break
        time.sleep(0.1)
    p.kill()
    p.wait(10)
    assert log is not None
    run_dir = log.parent
    assert json.loads((run_dir / "run.json").read_text())["status"] == "running"
    deadline = time.monotonic() + 10                    # the mock dies with its parent
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            break
        time.sleep(0.1)
    else:
        pytest.fail("the built-in mock outlived a SIGKILLed llmbench")
    listing = llmbench("runs", "--out", str(tmp_path))
    assert "killed?" in listing.stdout and "1970" not in listing.stdout
    r = llmbench("report", str(run_dir))
    assert r.returncode == 0, r.stderr
    assert "rebuilt from requests.jsonl" in r.stderr
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "partial" and run["summary"]["completed"] >= 3


def test_interrupted_ramp_does_not_say_every_step_held(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=2, itl_ms=1, models=["mock"])
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "ramp", "--url", m.url + "/v1",
                          "--model", "mock", "--users", "1,2,3", "--hold", "2s", "--ramp-in", "0",
                          "--think", "0", "--prompt-tokens", "5", "--output-tokens", "3",
                          # a busy machine must not end the ramp at step 1 (its own generator
                          # check) before the signal is sent: the point is the interruption
                          "--generator-lag-limit", "2000ms",
                          "--out", str(tmp_path)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV, cwd=ROOT)
    lines = []
    for line in p.stdout:                 # the header, then the first step's row
        lines.append(line)
        if line.rstrip().endswith("held") or "broke" in line:
            break
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    out = "".join(lines) + out
    assert p.returncode == 130, (err, out)
    assert "Every step held" not in out and "before the ramp was interrupted" in out
    run = json.loads(next(tmp_path.iterdir()).joinpath("run.json").read_text())
    assert run["status"] == "partial" and "interrupted" in run["verdict"]["result"]


@pytest.mark.parametrize("args, needle", [
    (["run", "--requests", "nan"], "Invalid value for '--requests'"),
    (["run", "--requests", "1e308"], "Invalid value for '--requests'"),
    (["ramp", "--repeat", "two"], "Invalid value for '--repeat'"),
    (["run", "--no-such-flag"], "No such option: --no-such-flag"),
    (["compare"], "Missing argument"),
    (["nosuch"], "No such command 'nosuch'"),
    (["mock", "--port", "-"], "Invalid value for '--port'"),
])
def test_values_typer_itself_cannot_parse_are_one_line_too(args, needle):
    # typer's own errors were click's five-line box; now the same one line as every other
    r = llmbench(*args)
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], r.stderr
    assert "Traceback" not in r.stderr and "╭" not in r.stderr


@pytest.mark.parametrize("args, needle", [
    (["ramp", "--users", "1e308"], "at most 1,000,000 users a step"),
    (["ramp", "--by", "rate", "--users", "1,2e9"], "at most 1,000,000 requests/s a step"),
    (["ramp", "--start", "1", "--step", "500000", "--up-to", "2000000"], "--up-to 2e+06: at most"),
    (["run", "--concurrency", "1000000000000"], "--concurrency 1000000000000: must be between"),
])
def test_loads_no_machine_opens_are_refused(args, needle, tmp_path):
    r = llmbench(*args, "--out", str(tmp_path))
    assert r.returncode == 2, r.stderr
    assert [x for x in r.stderr.splitlines() if x.strip()] == [x for x in r.stderr.splitlines()
                                                                if needle in x], r.stderr


def test_a_run_json_nested_too_deeply_is_one_line_for_report_runs_and_compare(tmp_path):
    folder = tmp_path / "r1"
    folder.mkdir()
    (folder / "run.json").write_text("[" * 100_000)
    for args in (["report", str(folder)], ["compare", str(folder), str(folder)]):
        r = llmbench(*args)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.strip().endswith("run.json is nested too deeply to be one llmbench wrote")
    r = llmbench("runs", "--out", str(tmp_path))
    assert r.returncode == 0 and "nested too deeply" in r.stdout and "Traceback" not in r.stderr


# -- signals outside the load phase (issue 40 §4 item 10) ----------------------------------------

@pytest.mark.parametrize("step, signals, status, says", [
    ("setup", ["SIGHUP"], "interrupted", "interrupted (SIGHUP) before the load started"),
    ("summarize", ["SIGINT", "SIGTERM"], "complete",
     "interrupted (Ctrl-C) after run.json was written (complete); skipped the rest of the "
     "output and report.html"),
    ("report", ["SIGINT", "SIGTERM"], "complete", "skipped the rest of the output and report.html"),
    ("load", ["SIGHUP"], "partial", None),
])
def test_a_signal_outside_the_load_never_leaves_run_json_running(step, signals, status, says,
                                                                tmp_path):
    """SIGHUP, or Ctrl-C then SIGTERM 50 ms later, outside the load left run.json "running";
    a Ctrl-C during the final write skipped report.html and said nothing."""
    marker = tmp_path / "marker"
    out = tmp_path / "out"
    p = subprocess.Popen([sys.executable, str(ROOT / "tests" / "helpers" / "slow_step.py"), step,
                          str(marker), "--", "run", "--requests", "40", "--concurrency", "2",
                          "--prompt-tokens", "5", "--output-tokens", "4", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                         cwd=ROOT, preexec_fn=as_from_a_terminal)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            logs = list(out.glob("*/requests.jsonl"))
            if (marker.exists() if step != "load" else
                    logs and len(logs[0].read_text().splitlines()) >= 2):
                break
            time.sleep(0.05)
        for i, name in enumerate(signals):
            if i:
                time.sleep(0.05)
            p.send_signal(getattr(signal, name))
        _, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 130, err
    assert "Traceback" not in err, err
    if says is not None:                # one line, the last, that says what was skipped
        last = err.strip().splitlines()[-1]
        assert last.startswith("error: ") and says in last, err
    run_dir = next(out.iterdir())
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == status, run.get("error")
    assert not (run_dir / ".llmbench.lock").exists()
    if status != "interrupted":
        assert run["summary"]["completed"] >= 1


def test_report_on_a_run_in_progress_never_writes_over_it(tmp_path):
    """`llmbench report RUN` on a live run rewrote its run.json as "partial ... (killed?)";
    the run's lock (its pid and start time) now says it is alive, and the reader only reads."""
    p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "run", "--duration", "60s",
                          "--concurrency", "2", "--prompt-tokens", "5", "--output-tokens", "20",
                          "--out", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=ENV, cwd=ROOT)
    try:
        deadline = time.monotonic() + 60
        log = None
        while time.monotonic() < deadline:
            logs = list(tmp_path.glob("*/requests.jsonl"))
            if logs and len(logs[0].read_text().splitlines()) >= 3:
                log = logs[0]
                break
            time.sleep(0.1)
        assert log is not None
        run_dir = log.parent
        before = (run_dir / "run.json").read_bytes()
        r = llmbench("report", str(run_dir))
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
        assert f"note: {run_dir} is in progress (llmbench (pid {p.pid}))" in r.stderr, r.stderr
        assert (run_dir / "run.json").read_bytes() == before        # not written over
        listing = llmbench("runs", "--out", str(tmp_path))
        assert "running" in listing.stdout and "killed?" not in listing.stdout
    finally:
        p.kill()
        p.wait(10)
    r = llmbench("report", str(run_dir))         # now the writer is gone: rebuilt, written
    assert r.returncode == 0 and "rebuilt from requests.jsonl" in r.stderr, r.stderr
    assert json.loads((run_dir / "run.json").read_text())["status"] == "partial"


def test_a_lock_whose_pid_was_reused_or_is_gone_is_not_a_live_writer(tmp_path):
    from llmbench.results import lock
    lock.take(tmp_path)
    assert lock.writer(tmp_path)["pid"] == os.getpid()             # this process, alive
    doc = json.loads((tmp_path / lock.LOCK).read_text())
    (tmp_path / lock.LOCK).write_text(json.dumps({**doc, "start": "1"}))   # another process
    assert lock.writer(tmp_path) is None
    (tmp_path / lock.LOCK).write_text(json.dumps({**doc, "pid": 2 ** 22 + 7}))   # gone
    assert lock.writer(tmp_path) is None
    (tmp_path / lock.LOCK).write_text(json.dumps({**doc, "host": "elsewhere"}))
    assert "on elsewhere" in lock.writer_text(tmp_path, lock.writer(tmp_path))
    lock.drop(tmp_path)
    assert (tmp_path / lock.LOCK).exists()          # another's (pid alike, host not) stays
    (tmp_path / lock.LOCK).write_text(json.dumps(doc))
    lock.drop(tmp_path)
    assert not (tmp_path / lock.LOCK).exists()


def test_sigstop_mid_run_is_the_generators_freeze_not_server_timeouts(tmp_path):
    """SIGSTOP llmbench mid-run: the requests it froze were blamed on the server as timeouts.
    Its monitor sees the freeze; what timed out during it is client_stall, not measured, and
    the console says the generator was frozen. (The watchdog's part on both transports:
    tests/integration/test_hostile_inputs_api.py.)"""
    stall = http_head(chunked=True)
    ok = http_head() + chat_token("a") + b"data: [DONE]\n\n"
    with RawServer(lambda i: [(0, ok)] if i == 0 else [(0, stall), (60, None)]) as s:
        p = subprocess.Popen([sys.executable, "-m", "llmbench.cli", "run", "--url", s.url + "/v1",
                              "--model", "m", "--duration", "5s", "--concurrency", "4",
                              "--prompt-tokens", "5", "--output-tokens", "4",
                              "--timeout-first-token", "2", "--out", str(tmp_path)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=ENV, cwd=ROOT)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:      # some genuine timeouts first
                logs = list(tmp_path.glob("*/requests.jsonl"))
                if logs and len(logs[0].read_text().splitlines()) >= 4:
                    break
                time.sleep(0.05)
            time.sleep(0.5)                          # the next four are in flight
            p.send_signal(signal.SIGSTOP)
            time.sleep(3.5)
            p.send_signal(signal.SIGCONT)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
    assert p.returncode == 0 and "Traceback" not in err, err
    run_dir = next(tmp_path.iterdir())
    recs = [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    kinds = {r.get("error_kind") for r in recs}
    stalls = [r for r in recs if r.get("error_kind") == "client_stall"]
    assert kinds <= {"timeout_first_token", "client_stall"} and len(stalls) >= 1, kinds
    run = json.loads((run_dir / "run.json").read_text())
    assert "client_stall" not in run["summary"]["errors"]          # not the server's failures
    assert run["summary"]["requests"] == len(recs) - len(stalls)
    assert run["monitor"]["frozen_s"] >= 3.0 and run["monitor"]["client_stalls"] == len(stalls)
    assert "WARNING: llmbench itself was frozen for" in out


def test_a_bug_in_llmbench_leaves_run_json_failed_not_running(tmp_path, monkeypatch):
    """Every way out of a command leaves its folder complete, partial, failed or interrupted:
    an error of llmbench's own too (its traceback is still shown: it is a bug)."""
    from llmbench.analysis import metrics
    import llmbench

    def broken(*a, **k):
        raise ZeroDivisionError("a bug in the summary")
    monkeypatch.setattr(metrics, "summarize", broken)
    with pytest.raises(ZeroDivisionError):
        llmbench.run(requests=2, prompt_tokens=5, output_tokens=2, out=tmp_path)
    run_dir = next(tmp_path.iterdir())
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "failed" and "ZeroDivisionError: a bug in the summary" in run["error"]
    assert not (run_dir / ".llmbench.lock").exists()


@pytest.mark.parametrize("loop", [[], ["--rate", "10", "--requests", "1"]], ids=["closed", "open"])
def test_duration_stops_an_agent_session_under_way(loop, tmp_path, transport):
    """Issue 49: a replayed session whose tool gap is an hour (within the 30-day ceiling) is cut
    at --duration, in a closed loop and an open one: the call in flight finished, no call after
    the deadline, the run complete (not `running`), in seconds rather than the hour the trace
    asks."""
    gap_s = 3600.0
    trace = tmp_path / "gap.jsonl"
    trace.write_text(json.dumps({"session": "s", "step": "1", "output_tokens": 4,
                                 "new_tokens": 10}) + "\n"
                     + json.dumps({"session": "s", "step": "2", "parent": "1", "output_tokens": 4,
                                   "new_tokens": 10, "tool_gap_s": gap_s}) + "\n")
    t0 = time.monotonic()
    r = llmbench("run", "--workload", "agent", "--dataset", str(trace), "--duration", "2s",
                 *loop, "--out", str(tmp_path / "res"), timeout=gap_s / 4)
    took = time.monotonic() - t0
    assert r.returncode == 0, r.stderr[-2000:]
    run_dir = next((tmp_path / "res").iterdir())
    doc = json.loads((run_dir / "run.json").read_text())
    assert doc["status"] in ("complete", "partial")
    recs = [json.loads(x) for x in (run_dir / "requests.jsonl").read_text().splitlines()]
    # the session started once (the closed loop's one user; the open loop's one arrival):
    # its first call, never its second
    assert [x.get("step_id") for x in recs if not x.get("warmup")] == ["1"], recs
    assert recs[0]["ok"] and took < gap_s / 4

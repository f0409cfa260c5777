"""``ramp --scenario FILE``: every class's thresholds, option values and the files its options
name are checked before any prompt is built or the server is asked anything (issue 36's loose
end: a bad threshold in the class after a long-prompt class came only after that class's
2,000 conversations were built, ~40 s, and a dead --url was reported before it).

Nothing listens at the --url, and no --model is given: had the command asked the server (its
model list) before the check, the line would be the connection one."""

from __future__ import annotations

import pytest

import llmbench
from llmbench.errors import UsageError
from tests.helpers import free_port, llmbench as cli

DEAD = f"http://127.0.0.1:{free_port()}/v1"

# a first class whose prompts take long to build (4,000 tokens, 2,000 conversations)
LONG_FIRST = "[classes.long]\nshare = 0.5\nprompt_tokens = 4000\n\n[classes.chat]\nshare = 0.5\n"


def _write(tmp_path, body: str):
    p = tmp_path / "mix.toml"
    p.write_text(LONG_FIRST + body)
    return p


def test_a_bad_threshold_in_a_later_class_is_one_line_before_the_server(tmp_path):
    p = _write(tmp_path, "thresholds = ['ttft.p95<=soon']\n")
    r = cli("ramp", "--scenario", str(p), "--url", DEAD, "--users", "1,2", "--hold", "1s",
            "--think", "0", "--out", str(tmp_path / "out"))
    assert r.returncode == 2, r.stderr
    lines = [x for x in r.stderr.splitlines() if x.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in r.stderr
    # the file and the line of the key, the class, the threshold itself (said once)
    assert lines[0].startswith(f"error: {p}:7: class 'chat': threshold 'ttft.p95<=soon' "
                               "does not parse"), lines[0]
    assert lines[0].count("'ttft.p95<=soon'") == 1
    assert "cannot reach" not in r.stderr and "Connection refused" not in r.stderr
    assert not (tmp_path / "out").exists()


@pytest.fixture
def no_build(monkeypatch):
    """Building a class's prompts (or any workload) fails the test: the check must come first.
    (The method, looked up at each call: a module's own name for make_common would outlive
    the test in a module first imported during it.)"""
    from llmbench.specs.groups import WorkloadOpts

    def built(*_a, **_k):
        raise AssertionError("a workload was built before the scenario was checked")
    monkeypatch.setattr(WorkloadOpts, "build", built)


@pytest.mark.parametrize("body, key, words", [
    ("thresholds = ['ttfx.p95<=2s']\n", 7, "threshold 'ttfx.p95<=2s': unknown metric 'ttfx'"),
    ("dataset = 'nope.jsonl'\n", 7, "--dataset nope.jsonl: no such file"),
    ("tools = 'nope.json'\n", 7, "--tools nope.json: no such file"),
    ("response_format = 'nope.json'\n", 7, "--response-format nope.json: no such file"),
    ("think = 'soon'\n", 7, "--think 'soon'"),
])
def test_every_class_is_checked_before_any_prompt_is_built(tmp_path, no_build, body, key,
                                                            words):
    p = _write(tmp_path, body)
    with pytest.raises(UsageError) as e:
        llmbench.ramp(url=DEAD, scenario=str(p), users=[1, 2], hold="1s",
                      out=tmp_path / "out")
    assert str(e.value).startswith(f"{p}:{key}: class 'chat': {words}"), str(e.value)

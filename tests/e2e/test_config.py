"""--config FILE: options from TOML, YAML or JSON, the command line winning; one line and exit 2
for a key or value the command cannot take; and config.toml in every run folder replaying it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmbench.specs.config import normalize, read, replay_values, to_toml
from llmbench.errors import UsageError
from tests.helpers import llmbench, only_run

SHORT = ["--prompt-tokens", "8", "--output-tokens", "4"]


# -- parsing, in-process ---------------------------------------------------------------------
@pytest.mark.parametrize("key", ["--max-tokens", "max-tokens", "max_tokens", " max_tokens"])
def test_keys_are_option_names_with_or_without_dashes(key):
    assert normalize(key) == "max_tokens"


def test_toml_yaml_and_json_read_the_same(tmp_path):
    (tmp_path / "a.toml").write_text('concurrency = 4\nusers = [1, 2]\n"--no-stream" = true\n')
    (tmp_path / "a.yaml").write_text("concurrency: 4\nusers: [1, 2]\n--no-stream: true\n")
    (tmp_path / "a.json").write_text('{"concurrency": 4, "users": [1, 2], "--no-stream": true}')
    want = {"concurrency": 4, "users": [1, 2], "no_stream": True}
    for name in ("a.toml", "a.yaml", "a.json"):
        assert read(tmp_path / name) == want, name


@pytest.mark.parametrize("name, text, needle", [
    ("x.toml", "concurrency = ", "not valid TOML"),
    ("x.json", "[1, 2]", "expected a table of option names"),
    ("x.ini", "a=1", "unknown format '.ini'"),
    ("x.toml", "max-tokens = 1\nmax_tokens = 2\n", "given twice"),
])
def test_a_bad_file_is_one_line_naming_it(tmp_path, name, text, needle):
    (tmp_path / name).write_text(text)
    with pytest.raises(UsageError) as exc:
        read(tmp_path / name)
    assert needle in str(exc.value) and str(tmp_path / name) in str(exc.value)
    assert "\n" not in str(exc.value)


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(UsageError, match="check the path"):
        read(tmp_path / "none.toml")


def test_the_replay_leaves_secrets_out_and_reads_back(tmp_path):
    values = {"url": "http://user:pw@host:1/v1?api_key=s3cret", "api_key": "sk-1",
              "header": ["X-Key: v"], "concurrency": 2, "think": "0", "label": ["a=b"],
              "progress": False, "model": None, "stream": True, "burstiness": 1.0}
    kept, left_out = replay_values(values, {})
    text = to_toml("run", kept, left_out)
    assert "sk-1" not in text and "X-Key" not in text and "pw" not in text
    assert "s3cret" not in text and sorted(left_out) == ["api_key", "header"]
    (tmp_path / "config.toml").write_text(text)
    back = read(tmp_path / "config.toml")
    assert back["concurrency"] == 2 and back["label"] == ["a=b"] and back["stream"] is True
    assert "model" not in back and "progress" not in back


# -- the command line ------------------------------------------------------------------------
@pytest.mark.parametrize("text, needle", [
    ("concurency = 3\n", "unknown key 'concurency'"),
    ("concurrency = 'abc'\n", "concurrency = 'abc'"),
    ("stream = 'yes please'\n", "stream = 'yes please'"),
])
def test_a_bad_key_or_value_is_one_line_and_exit_2(tmp_path, text, needle):
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    r = llmbench("run", "--config", str(cfg), "--out", str(tmp_path / "out"))
    assert r.returncode == 2, r.stdout + r.stderr
    assert needle in r.stderr and str(cfg) in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_every_command_takes_config(tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text('{"format": "md"}')
    for cmd in ("run", "ramp", "sweep", "probe", "mock", "report", "compare"):
        r = llmbench(cmd, "--help")
        assert "--config" in r.stdout, cmd
    r = llmbench("report", str(tmp_path / "nothing"), "--config", str(cfg))
    assert r.returncode == 2 and "nothing" in r.stderr      # the config was read, then the path


def test_the_command_line_wins_over_the_file(mock_factory, tmp_path):
    m = mock_factory(ttft_ms=5, itl_ms=1)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"url: {m.url}/v1\nmodel: mock\nrequests: 5\nconcurrency: 2\n"
                   "prompt-tokens: 8\n--output-tokens: 4\nlabel: {name: fromfile}\n")
    r = llmbench("run", "--config", str(cfg), "--requests", "3", "--out", str(tmp_path / "o"))
    assert r.returncode == 0, r.stdout + r.stderr
    run = json.loads((only_run(tmp_path / "o") / "run.json").read_text())
    assert run["config"]["load"]["requests"] == 3               # the command line's
    assert run["config"]["load"]["concurrency"] == 2            # the file's
    assert run["labels"] == {"name": "fromfile"}


@pytest.mark.parametrize("command, options", [
    ("run", dict(concurrency=2, requests=4, warmup=1)),
    ("ramp", dict(users="1,2", hold="0.6s", ramp_in="0.1s", think="0", turns=1,
                  threshold="ttft.p95<=5s", generator_lag_limit="2000ms")),
])
def test_config_toml_in_the_run_folder_replays_the_run(mock_factory, tmp_path, command, options):
    # the first run only makes the folder: in this process, through the API; the replay of its
    # config.toml is the command line's --config
    import llmbench as api
    from tests.helpers.api import ramp_exit_code, run_exit_code
    m = mock_factory(ttft_ms=5, itl_ms=1)
    first = tmp_path / "first"
    done = getattr(api, command)(url=m.url + "/v1", model="mock", **options, prompt_tokens=8,
                                 output_tokens=4, api_key="sk-never-saved",
                                 header="X-Secret: hush", out=first)
    assert (run_exit_code if command == "run" else ramp_exit_code)(done) == 0
    folder = only_run(first)
    text = (folder / "config.toml").read_text()
    assert "sk-never-saved" not in text and "hush" not in text
    assert "api_key" in text.splitlines()[3]                     # named as left out
    again = tmp_path / "again"
    r = llmbench(command, "--config", str(folder / "config.toml"), "--out", str(again),
                 timeout=180)
    assert r.returncode == 0, r.stdout + r.stderr
    a = json.loads((folder / "run.json").read_text())["config"]
    b = json.loads((only_run(again) / "run.json").read_text())["config"]
    for key in ("load", "ramp", "request", "timeouts"):
        assert a.get(key) == b.get(key), key
    assert a["target"]["url"] == b["target"]["url"]
    wa = json.loads((folder / "run.json").read_text())["workload"]
    wb = json.loads((only_run(again) / "run.json").read_text())["workload"]
    assert wa.get("fingerprint") == wb.get("fingerprint")

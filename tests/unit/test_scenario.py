"""The scenario file (--scenario): TOML, YAML and JSON read to the same typed value, defaults
under each class's own keys, and every bad file one line naming the file and the line."""

from __future__ import annotations

import pytest

from llmbench.commands.scenario import MAX_SCENARIO_BYTES, check_thresholds, read
from llmbench.errors import UsageError
from llmbench.workload.scenario import Scenario, TrafficClass

ALLOWED = {"prompt_tokens", "output_tokens", "think", "dataset", "turns", "abandon"}.__contains__

TOML = """\
[defaults]
think = "0s"
thresholds = ["ttft.p95<=2s"]

[classes.chat]
share = 0.7
prompt_tokens = "64-256"

[classes.rag]
share = "30%"
prompt-tokens = 4000
thresholds = ["ttft.p95<=4s"]
"""

YAML = """\
defaults:
  think: 0s
  thresholds: ["ttft.p95<=2s"]
classes:
  chat:
    share: 0.7
    prompt_tokens: 64-256
  rag:
    share: 30%
    prompt-tokens: 4000
    thresholds: ["ttft.p95<=4s"]
"""

JSON = """{
  "defaults": {"think": "0s", "thresholds": ["ttft.p95<=2s"]},
  "classes": {
    "chat": {"share": 0.7, "prompt_tokens": "64-256"},
    "rag": {"share": "30%", "prompt-tokens": 4000, "thresholds": ["ttft.p95<=4s"]}
  }
}
"""


def _file(tmp_path, text, suffix=".toml"):
    p = tmp_path / f"scenario{suffix}"
    p.write_text(text)
    return p


@pytest.mark.parametrize("text, suffix", [(TOML, ".toml"), (YAML, ".yaml"), (JSON, ".json")])
def test_the_three_formats_give_the_same_classes(tmp_path, text, suffix):
    sc = read(_file(tmp_path, text, suffix), ALLOWED)
    assert sc.names == ["chat", "rag"]
    chat, rag = sc.classes
    assert (chat.share, rag.share) == (0.7, pytest.approx(0.3))
    assert chat.options == {"think": "0s", "prompt_tokens": "64-256"}
    assert rag.options == {"think": "0s", "prompt_tokens": 4000}
    # a class's own thresholds replace the defaults'
    assert chat.thresholds == ["ttft.p95<=2s"] and rag.thresholds == ["ttft.p95<=4s"]


def test_a_list_of_classes_and_fixed_loads(tmp_path):
    text = ('[[classes]]\nname = "chat"\nshare = 1\n\n[[classes]]\nname = "batch"\n'
            'users = 2\n')
    sc = read(_file(tmp_path, text), ALLOWED)
    assert [(c.name, c.share, c.users, c.share is None) for c in sc.classes] == [
        ("chat", 1, None, False), ("batch", None, 2, True)]
    sc.check_grow(None)
    sc.check_grow("batch")


@pytest.mark.parametrize("text, line, says", [
    ("[classes.chat]\nshare = 0.5\npromt_tokens = 10\n", 3, "unknown key 'promt_tokens' in class 'chat'"),
    ("[classes.chat]\nshare = 0.5\n\n[classes.rag]\nshare = 0.3\n", 2, "the shares sum to 0.8"),
    ("[classes.chat]\nshare = 0.5\nusers = 3\n", 3, "needs exactly one of share, users or rate"),
    ("[classes.chat]\nprompt_tokens = 5\n", 1, "needs exactly one of share, users or rate"),
    ("[classes.chat]\nshare = 1.5\n", 2, "share 1.5 must be above 0 and at most 1"),
    ("[classes.chat]\nusers = 0\n", 2, "users 0 must be a whole number"),
    ("[classes.chat]\nrate = -1\n", 2, "rate -1 must be requests per second above 0"),
    ("[classes.chat]\nshare = 1\nthresholds = 3\n", 3, "thresholds must be a list of texts"),
    ("[classes.\"9x\"]\nshare = 1\n", 1, "class name '9x'"),
    ("[defaults]\nshare = 0.5\n[classes.chat]\nshare = 1\n", 2, "share in defaults"),
    ("speed = 3\n[classes.chat]\nshare = 1\n", 1, "unknown key 'speed'"),
    ("[classes.chat]\nusers = 2\nmin_users = 1\n", 3, "min_users goes with a share"),
    ("[classes.chat]\nshare = 1\nmin_users = -1\n", 3, "min_users -1 must be a whole number"),
    ("[classes.chat]\nshare = 1\nmin_users = 1.5\n", 3, "min_users 1.5 must be a whole number"),
    ("[defaults]\nmin_users = 1\n[classes.chat]\nshare = 1\n", 2, "min_users in defaults"),
])
def test_a_bad_file_is_one_line_naming_file_and_line(tmp_path, text, line, says):
    p = _file(tmp_path, text)
    with pytest.raises(UsageError) as e:
        read(p, ALLOWED)
    msg = str(e.value)
    assert msg.startswith(f"{p}:{line}: ") and says in msg and "\n" not in msg, msg


@pytest.mark.parametrize("suffix, text", [
    (".toml", '[[classes]]\nname = "chat"\nshare = 1\n[[classes]]\nname = "ch"\ncolour = 1\n'),
    (".yaml", "classes:\n  - name: chat\n    share: 1\n  - name: ch\n    colour: 1\n")])
def test_a_list_item_is_found_by_its_place_not_by_a_name_inside_another(tmp_path, suffix, text):
    # "ch" is in the line `name = "chat"`: the class's lines are its own item's (line 6 or 5)
    p = _file(tmp_path, text, suffix)
    with pytest.raises(UsageError, match=rf"^{p}:{6 if suffix == '.toml' else 5}: unknown key"):
        read(p, ALLOWED)


def test_yaml_lines_are_named_too(tmp_path):
    p = _file(tmp_path, "classes:\n  chat:\n    share: 1\n    colour: red\n", ".yaml")
    with pytest.raises(UsageError, match=rf"^{p}:4: unknown key 'colour'"):
        read(p, ALLOWED)


@pytest.mark.parametrize("text, suffix, says", [
    ("[classes.chat\nshare = 1\n", ".toml", "not valid TOML"),
    ("a: [1, 2\n", ".yaml", "not valid YAML"),
    ("!!python/object:os.system {}\n", ".yaml", "not valid YAML"),     # safe loading only
    ("[classes]\n", ".toml", "no traffic class"),
    ("x", ".ini", "unknown format '.ini'"),
])
def test_a_file_that_is_no_scenario(tmp_path, text, suffix, says):
    p = _file(tmp_path, text, suffix)
    with pytest.raises(UsageError) as e:
        read(p, ALLOWED)
    assert str(e.value).startswith(f"--scenario {p}") or str(e.value).startswith(f"{p}")
    assert says in str(e.value) and "\n" not in str(e.value)


def test_size_limit_and_missing_file(tmp_path):
    big = _file(tmp_path, "# " + "x" * MAX_SCENARIO_BYTES + "\n")
    with pytest.raises(UsageError, match="larger than the 1 MB"):
        read(big, ALLOWED)
    with pytest.raises(UsageError, match="check the path"):
        read(tmp_path / "nope.toml", ALLOWED)


def test_grow_names_a_class_that_can_grow(tmp_path):
    sc = read(_file(tmp_path, TOML), ALLOWED)
    with pytest.raises(UsageError, match=r"^--grow 'video': no such class in .*\(classes: chat, rag\)"):
        sc.check_grow("video")
    fixed = Scenario([TrafficClass("chat", share=1.0), TrafficClass("cron", rate=0.5)])
    with pytest.raises(UsageError, match="has a fixed rate"):
        fixed.check_grow("cron")
    none = Scenario([TrafficClass("a", users=2), TrafficClass("b", users=3)])
    with pytest.raises(UsageError, match="nothing grows"):
        none.check_grow(None)


def test_a_bad_threshold_names_its_line(tmp_path):
    from llmbench.analysis.slo import parse_threshold
    p = _file(tmp_path, "[classes.chat]\nshare = 1\nthresholds = [\"ttft.p95<=soon\"]\n")
    sc = read(p, ALLOWED)
    with pytest.raises(UsageError) as e:
        check_thresholds(sc, sc.get("chat"), sc.get("chat").thresholds, parse_threshold)
    assert str(e.value).startswith(f"{p}:3: class 'chat': threshold 'ttft.p95<=soon'")


def test_from_python_the_messages_name_the_class():
    with pytest.raises(UsageError, match="^scenario class 'rag': the shares sum to 1.2"):
        Scenario([TrafficClass("rag", share=0.6), TrafficClass("chat", share=0.6)])
    with pytest.raises(UsageError, match="is given twice"):
        Scenario([TrafficClass("a", share=0.5), TrafficClass("a", share=0.5)])


@pytest.mark.parametrize("what", ["fifo", "folder", "/dev/zero"])
def test_only_a_regular_file_is_read(tmp_path, what):
    import os
    path = tmp_path / "s.toml"
    if what == "fifo":
        os.mkfifo(path)                 # opening it would wait for a writer forever
    elif what == "folder":
        path.mkdir()
    else:
        path = tmp_path / "zero.toml"
        os.symlink("/dev/zero", path)
    with pytest.raises(UsageError, match=r"^--scenario .*(not a regular file|is a folder)"):
        read(path, ALLOWED)


def test_a_share_class_floor_is_read_and_added_up(tmp_path):
    p = _file(tmp_path, "[classes.chat]\nshare = 0.8\nmin_users = 1\n\n"
                        "[classes.rag]\nshare = 0.2\nmin_users = 2\n\n"
                        "[classes.cron]\nusers = 3\n")
    sc = read(p, ALLOWED)
    assert [c.min_users for c in sc.classes] == [1, 2, None]
    assert sc.least_users == 3          # the floors of the share classes; cron is its own
    assert sc.get("rag").load_text() == "share 0.2, at least 2"
    assert sc.describe()["classes"][1]["min_users"] == 2
    assert Scenario([TrafficClass("a", share=1.0)]).least_users == 1


@pytest.mark.parametrize("key", ["users", "share", "rate"])
def test_a_load_too_large_for_a_float_is_one_line(tmp_path, key):
    # JSON and YAML read any integer; 10**400 is beyond a float: one line, never OverflowError
    p = _file(tmp_path, '{"classes": {"chat": {"%s": %s}}}' % (key, "9" * 400), ".json")
    with pytest.raises(UsageError, match=rf"class 'chat': {key} 9+ must be") as e:
        read(p, ALLOWED)
    assert "\n" not in str(e.value)
    with pytest.raises(UsageError, match=rf"{key} 10+ must be"):
        Scenario([TrafficClass(name="chat", **{key: 10**400})]).check()

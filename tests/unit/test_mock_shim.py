"""The deprecated top-level ``mock_server`` package (the mock moved to llmbench.mock_server):
old imports and ``python -m mock_server`` still work, give the very same modules, and warn."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.helpers import ROOT

_PROBE = r"""
import json, warnings
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from mock_server import MockConfig, MockServer, MockProcess
    import mock_server.engine
    from mock_server.cli import MOCK
import llmbench.mock_server as new
import llmbench.mock_server.engine, llmbench.mock_server.cli
with MockServer(MockConfig(ttft_ms=0, itl_ms=0)) as m:
    import urllib.request
    served = json.load(urllib.request.urlopen(m.url + "/v1/models"))["data"][0]["id"]
print(json.dumps({
    "same": [MockConfig is new.MockConfig, MockServer is new.MockServer,
             MockProcess is new.MockProcess, mock_server.engine is llmbench.mock_server.engine,
             MOCK is llmbench.mock_server.cli.MOCK],
    "warnings": [(w.category.__name__, str(w.message)) for w in caught],
    "served": served}))
"""


def test_old_imports_are_the_new_modules_and_warn():
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["same"] == [True] * 5
    assert got["served"] == "mock"
    assert [c for c, _ in got["warnings"]] == ["DeprecationWarning"]   # once, at the import
    assert "llmbench.mock_server" in got["warnings"][0][1]


def test_python_m_mock_server_still_runs_and_says_it_is_deprecated():
    out = subprocess.run([sys.executable, "-m", "mock_server", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "--config-json" in out.stdout and "--workers" in out.stdout
    assert "deprecated" in out.stderr and "python -m llmbench.mock_server" in out.stderr
    # an unknown module of the old package is an ImportError, not a silent alias
    bad = subprocess.run([sys.executable, "-W", "ignore", "-c", "import mock_server.nothere"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1 and "No module named 'mock_server.nothere'" in bad.stderr

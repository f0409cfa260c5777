"""llmbench's pytest plugin (llmbench/testing.py, the pytest11 entry point), run by pytest itself
(pytester: a test suite in a temporary folder, collected and run in this process, the plugin
loaded by its entry point as in any project that installs llmbench): load tests deselected
unless -m names them; assert_holds passing against a mock that holds and failing, with the
verdict, the steps and the thresholds in its message, against one that does not; assert_run
failing with its summary."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers import ENV, ROOT

pytest_plugins = ["pytester"]

SHORT = 'hold="2s", ramp_in="0.5s", think="0.1s-0.2s", output_tokens=8, prompt_tokens=10'


def test_load_tests_run_only_when_asked_for(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.load
        def test_heavy():
            pass

        def test_light():
            pass
    """)
    plain = pytester.runpytest("-p", "no:xdist")
    plain.assert_outcomes(passed=1, deselected=1)
    asked = pytester.runpytest("-p", "no:xdist", "-m", "load", "-v")
    asked.assert_outcomes(passed=1, deselected=1)
    asked.stdout.fnmatch_lines(["*test_heavy PASSED*"])
    assert pytester.runpytest("-p", "no:xdist", "--markers").stdout.str().count("@pytest.mark.load") == 1


def test_assert_holds_passes_on_a_server_that_holds_and_says_why_on_one_that_does_not(pytester):
    pytester.makepyfile(f"""
        from llmbench.testing import assert_holds, assert_run

        def test_holds(llmbench_mock):
            m = llmbench_mock(parallel=4, ttft_ms=20, itl_ms=5)
            run = assert_holds(url=m.url, model=m.model, users=2,
                               threshold=["ttft.p50<=2s", "error_rate<=1%"], {SHORT})
            assert run.held == 2 and run.path is not None

        def test_does_not_hold(llmbench_mock):
            m = llmbench_mock(parallel=1, ttft_ms=250, itl_ms=5)
            assert_holds(url=m.url, model=m.model, users=4, threshold=["ttft.p50<=100ms"],
                         {SHORT})

        def test_run_breaks_a_threshold(llmbench_mock):
            assert_run(url=llmbench_mock.url, model=llmbench_mock.model, concurrency=2,
                       requests=6, threshold="ttft.p95<=1ms", output_tokens=8, prompt_tokens=10)
    """)
    r = pytester.runpytest("-p", "no:xdist")
    r.assert_outcomes(passed=1, failed=2)
    out = r.stdout.str()
    # the ramp's failure: what did not hold, the verdict and why, the table, the threshold
    r.stdout.fnmatch_lines([
        "*LoadAssertionError: llmbench: the server did not hold 4 users (held 0) at http://127.0.0.1:*",
        "*Held 0 users. At 4 users, TTFT p50 was *, over 100 ms*",
        "*Why: *",
        "*Users*Reqs*TTFT p50*",
        "*Thresholds at 4 users:*",
        "*FAIL  ttft.p50<=100ms: *",
        "*Run folder: *ramp (report.html*"])
    # the run's: its summary and the threshold
    r.stdout.fnmatch_lines([
        "*LoadAssertionError: llmbench: the run at http://127.0.0.1:* failed 1 of 1 thresholds*",
        "*Summary at 2 concurrent: 6 requests, 6 succeeded, 0 failed; TTFT p50 *",
        "*FAIL  ttft.p95<=1ms: *"])
    # the plugin's own frames are hidden: the test's line, then the message
    assert "def assert_holds" not in out and "def assert_run" not in out


def test_the_plugin_imports_nothing_of_llmbench_until_used():
    code = ("import sys, llmbench.testing; "
            "print(sorted(m for m in sys.modules if m.startswith('llmbench')))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                       env=ENV, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "['llmbench', 'llmbench.testing', 'llmbench.version']"

"""At the end of a run, the OTLP exporter process gets time to start before its collector is
judged (report/otlp.py ``_drain``): its imports on a busy machine are not a slow collector."""

import subprocess
import sys

from llmbench.report import otlp


def _child(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)


def test_a_slow_start_is_waited_for_and_is_not_the_collector(monkeypatch):
    monkeypatch.setattr(otlp, "CLOSE_WAIT_S", 1.0)
    # silent for twice the per-batch wait (its imports), then ready, a batch, the end
    out, why = otlp._drain(_child("import time, sys; time.sleep(2.0); print('{\"exported\": 0}',"
                                  " flush=True); print('{\"exported\": 3}')"))
    assert why is None and out.splitlines()[-1] == b'{"exported": 3}'


def test_a_ready_exporter_that_stalls_is_a_slow_collector(monkeypatch):
    monkeypatch.setattr(otlp, "CLOSE_WAIT_S", 0.3)
    child = _child("import time; print('{}', flush=True); time.sleep(60)")
    out, why = otlp._drain(child)
    assert why == "the collector was too slow" and child.returncode is not None


def test_an_exporter_that_never_starts_says_so(monkeypatch):
    monkeypatch.setattr(otlp, "START_WAIT_S", 0.5)
    child = _child("import time; time.sleep(60)")
    out, why = otlp._drain(child)
    assert out == b"" and "did not start within 0.5 s" in why and child.returncode is not None

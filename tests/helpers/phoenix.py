"""A real third-party OTLP/HTTP receiver on loopback: the Arize Phoenix server (PyPI
``arize-phoenix``), with its SQLite store in a temporary folder. It takes OTLP/HTTP protobuf at
/v1/traces and gives the spans it stored back through its own REST API
(GET /v1/projects/default/spans), so a test reads what the receiver made of llmbench's export,
not what our own decoder (tests/helpers/otlp_sink.py) thinks of it.

Phoenix lives in its own virtualenv (scripts/install-test-deps.sh makes it): in the test venv
its graphql-core 3.3 breaks mlflow's graphene (<3.3) and it downgrades anthropic. The server
needs no network once installed (telemetry off below).
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from llmbench.servers.ports import free_port

VENV = Path(os.environ.get("LLMBENCH_PHOENIX_VENV",
                           Path.home() / ".cache" / "llmbench-test" / "phoenix"))
INSTALL = ("Arize Phoenix (a real OTLP receiver) is not installed: run "
           f"scripts/install-test-deps.sh (it makes {VENV} with pip install arize-phoenix)")
START_WAIT_S = 240.0        # its first start migrates a fresh SQLite store: ~30 s on a busy CI box


def _env(workdir: Path, **more: str) -> dict[str, str]:
    # PHOENIX_WORKING_DIR even for the import check: importing phoenix makes its folders there
    # (~/.phoenix without it)
    return dict(os.environ, PHOENIX_WORKING_DIR=str(workdir), PHOENIX_TELEMETRY_ENABLED="false",
                **more)


def _python(workdir: Path) -> str:
    py = VENV / "bin" / "python"
    if not py.exists() or subprocess.run([str(py), "-c", "import phoenix.server.main"],
                                         env=_env(workdir), capture_output=True).returncode:
        pytest.fail(INSTALL, pytrace=False)
    return str(py)


def _get(url: str, timeout: float = 10.0) -> Any:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        body = r.read()
    return json.loads(body) if body[:1] in (b"{", b"[") else body.decode()


class Phoenix:
    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.log = workdir / "phoenix.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> "Phoenix":
        py = _python(self.workdir)
        env = _env(self.workdir, PHOENIX_HOST="127.0.0.1", PHOENIX_PORT=str(self.port),
                   PHOENIX_GRPC_PORT=str(free_port()))
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen([py, "-m", "phoenix.server.main", "serve"], env=env,
                                         stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_WAIT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                if _get(self.url + "/healthz", timeout=2) == "OK":
                    return self
            except OSError:
                pass
            time.sleep(0.5)
        tail = self.log.read_text(errors="replace")[-3000:]
        self.stop()
        pytest.fail(f"Phoenix did not answer on {self.url}/healthz within "
                    f"{START_WAIT_S:.0f} s; its log ends:\n{tail}", pytrace=False)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def spans(self, project: str = "default") -> list[dict[str, Any]]:
        """Every span Phoenix stored in ``project``, through its REST API (paginated)."""
        out: list[dict[str, Any]] = []
        cursor = ""
        while True:
            page = _get(f"{self.url}/v1/projects/{project}/spans?limit=1000"
                        + (f"&cursor={cursor}" if cursor else ""))
            out.extend(page["data"])
            cursor = page.get("next_cursor") or ""
            if not cursor:
                return out

    def wait_for_spans(self, n: int, timeout_s: float = 60.0) -> list[dict[str, Any]]:
        """The stored spans once there are ``n`` (Phoenix inserts what it received in batches,
        a moment after it answered the export), or what is there at the timeout."""
        deadline = time.monotonic() + timeout_s
        got = self.spans()
        while len(got) < n and time.monotonic() < deadline:
            time.sleep(0.25)
            got = self.spans()
        return got

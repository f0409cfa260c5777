"""A real Prometheus server for the tests (Debian package ``prometheus``): started on a free
loopback port with its config and storage in a temporary folder, scraping the given targets
every second, queried through its HTTP API."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tests.helpers import free_port
from tests.helpers.field import require, wait_port


class Prometheus:
    def __init__(self, folder: Path, targets: list[str], interval_s: float = 1.0) -> None:
        self.binary = require("prometheus", "prometheus")
        self.folder = folder
        self.port = free_port()
        self.targets = targets
        self.interval_s = interval_s
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Prometheus":
        self.folder.mkdir(parents=True, exist_ok=True)
        interval = f"{int(self.interval_s * 1000)}ms"
        (self.folder / "prometheus.yml").write_text(
            "global:\n"
            f"  scrape_interval: {interval}\n"
            f"  evaluation_interval: {interval}\n"
            "scrape_configs:\n"
            "  - job_name: llmbench\n"
            f"    scrape_interval: {interval}\n"
            f"    scrape_timeout: {interval}\n"
            "    static_configs:\n"
            f"      - targets: {json.dumps(self.targets)}\n")
        self.log = open(self.folder / "prometheus.log", "wb")
        self.proc = subprocess.Popen(
            [self.binary, f"--config.file={self.folder / 'prometheus.yml'}",
             f"--storage.tsdb.path={self.folder / 'data'}",
             f"--web.listen-address=127.0.0.1:{self.port}"],
            stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(self.port, 30, self.proc)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:        # ready: the API answers
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.1)
        return self

    def query(self, expr: str) -> list[dict[str, Any]]:
        url = f"http://127.0.0.1:{self.port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as r:
            doc = json.loads(r.read())
        assert doc["status"] == "success", doc
        return doc["data"]["result"]

    def value(self, expr: str) -> float | None:
        result = self.query(expr)
        return float(result[0]["value"][1]) if result else None

    def __exit__(self, *exc: Any) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

"""Shared fixtures: real servers on loopback, started by the tests."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
import time
from pathlib import Path

import pytest



from llmbench.mock_server import MockConfig, MockServer
from tests.helpers import ROOT, free_port  # noqa: F401  (ROOT: the LLMBENCH_TOKENIZER default is set there)


@pytest.fixture(params=["aiohttp", "fast"])
def transport(request, monkeypatch):
    """Run the test once per HTTP transport of the client (LLMBENCH_TRANSPORT, which the CLI
    subprocesses a test starts inherit too)."""
    monkeypatch.setenv("LLMBENCH_TRANSPORT", request.param)
    return request.param


@pytest.fixture
def mock_factory():
    """Start mocks on free ports; all are stopped after the test."""
    started: list[MockServer] = []

    def start(replicas: int = 1, record: str | None = None, record_prompts: bool = False,
              **cfg) -> MockServer:
        m = MockServer(MockConfig(**cfg), replicas=replicas, record=record,
                       record_prompts=record_prompts)
        m.__enter__()
        started.append(m)
        return m

    yield start
    for m in started:
        m.__exit__(None, None, None)


if os.environ.get("LLMBENCH_COUNT_CLI_SPAWNS"):
    # which items start the CLI in a child process (scripts/count_cli_spawns.py; off by default)
    from tests.helpers import spawns

    def pytest_configure(config):
        spawns.install(os.environ[spawns.ENV_VAR])

    def pytest_runtest_logstart(nodeid, location):
        spawns.begin(nodeid)

"""A real headless browser for the tests: Debian's chromium, driven over its DevTools protocol
(a websocket: aiohttp's client, no new dependency, no browser download). It records every
console message and uncaught exception of the page, evaluates JavaScript in it and takes
screenshots.

Chromium that is not installed fails the test with the line saying how to install it
(``scripts/install-test-deps.sh``), through ``tests/helpers/field.require``.
"""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tests.helpers import busy
from tests.helpers.field import require

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars"]


class Browser:
    """``async with Browser() as b: await b.goto(url); await b.eval("1+1")``."""

    def __init__(self, width: int = 1200, height: int = 2200) -> None:
        self.binary = require("chromium", "chromium")
        self.width, self.height = width, height
        self.console: list[dict[str, Any]] = []     # every console message and exception
        self._ids = iter(range(1, 1 << 30))
        self._waiting: dict[int, asyncio.Future[Any]] = {}

    async def __aenter__(self) -> "Browser":
        import aiohttp
        self.profile = tempfile.mkdtemp(prefix="llmbench-test-chromium-")
        self.proc = subprocess.Popen(
            [self.binary, *FLAGS, f"--user-data-dir={self.profile}",
             f"--window-size={self.width},{self.height}", "--remote-debugging-port=0",
             "about:blank"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = busy.Deadline(60)   # stretched on a busy machine
        while not (port_file.exists() and port_file.read_text().count("\n") >= 1):
            if self.proc.poll() is not None or deadline.expired():
                raise RuntimeError(f"chromium did not start (exit {self.proc.poll()})")
            await asyncio.sleep(0.1)
        port = int(port_file.read_text().split()[0])
        self.http = aiohttp.ClientSession()
        deadline = busy.Deadline(30)   # stretched on a busy machine
        while True:
            async with self.http.get(f"http://127.0.0.1:{port}/json/list") as r:
                pages = [t for t in await r.json() if t.get("type") == "page"]
            if pages or deadline.expired():
                break
            await asyncio.sleep(0.1)
        self.ws = await self.http.ws_connect(pages[0]["webSocketDebuggerUrl"], max_msg_size=0)
        self._reader = asyncio.get_running_loop().create_task(self._read())
        for domain in ("Runtime", "Log", "Page"):
            await self.call(f"{domain}.enable")
        return self

    async def __aexit__(self, *exc: Any) -> None:
        self._reader.cancel()
        await self.ws.close()
        await self.http.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    async def _read(self) -> None:
        async for msg in self.ws:
            data = json.loads(msg.data)
            if "id" in data:
                fut = self._waiting.pop(data["id"], None)
                if fut is not None and not fut.done():
                    fut.set_result(data)
                continue
            method, params = data.get("method"), data.get("params") or {}
            if method == "Runtime.consoleAPICalled":
                text = " ".join(str(a.get("value", a.get("description", "")))
                                for a in params.get("args") or [])
                self.console.append({"level": params.get("type"), "text": text})
            elif method == "Runtime.exceptionThrown":
                d = params.get("exceptionDetails") or {}
                self.console.append({"level": "exception", "text": d.get("text", "") + " "
                                     + str((d.get("exception") or {}).get("description", ""))})
            elif method == "Log.entryAdded":
                e = params.get("entry") or {}
                self.console.append({"level": e.get("level"), "text": e.get("text", "")
                                     + " " + e.get("url", "")})
            elif method == "Page.javascriptDialogOpening":
                self.console.append({"level": "dialog", "text": params.get("message", "")})
                asyncio.get_running_loop().create_task(
                    self.call("Page.handleJavaScriptDialog", accept=True))

    async def call(self, method: str, **params: Any) -> dict[str, Any]:
        i = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[i] = fut
        await self.ws.send_str(json.dumps({"id": i, "method": method, "params": params}))
        out = await asyncio.wait_for(fut, 60)
        if "error" in out:
            raise RuntimeError(f"{method}: {out['error']}")
        return out.get("result") or {}

    async def goto(self, url: str) -> None:
        await self.call("Page.navigate", url=url)
        deadline = busy.Deadline(30)   # stretched on a busy machine
        while await self.eval("document.readyState") != "complete":
            if deadline.expired():
                raise RuntimeError(f"{url} did not load")
            await asyncio.sleep(0.1)

    async def eval(self, expression: str) -> Any:
        r = await self.call("Runtime.evaluate", expression=expression, returnByValue=True,
                            awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return (r.get("result") or {}).get("value")

    async def screenshot(self, path: Path) -> Path:
        r = await self.call("Page.captureScreenshot", format="png",
                            clip={"x": 0, "y": 0, "width": self.width, "height": self.height,
                                  "scale": 1}, captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(r["data"]))
        return path

    def errors(self) -> list[dict[str, Any]]:
        """Console errors, warnings about failed loads, uncaught exceptions, dialogs."""
        return [m for m in self.console if m["level"] in ("error", "assert", "exception",
                                                          "dialog", "warning")]

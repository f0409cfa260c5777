"""A server the sweep starts and stops itself (``--serve``), or restarts by a one-shot command
(``--before``): its own process group, its output in a log file, ready checks, a warm-up request,
and a stop that cannot leave it running (SIGTERM to the group, SIGKILL after a grace period).

Everything here is blocking and runs between ramps, never while requests are in flight.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from contextlib import suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from llmbench.servers.discover import DiscoverError, _get, _headers, pick_model, wait_ready
from llmbench.client.target import Target

LOG_TAIL_LINES = 15


class ServerFailed(Exception):
    """The server did not start, did not get ready, or its --before command failed; the
    message says which, and the log's last lines go with it."""


def _die_with_parent() -> None:
    """In the child: Linux sends it SIGTERM when llmbench dies (even killed with SIGKILL), so a
    crashed sweep does not leave a server holding the port. Best effort elsewhere."""
    try:
        import ctypes
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGTERM)       # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> list[str]:
    """The last lines of a log (read from its end: a server may log megabytes)."""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 16384))
            text = fh.read().decode("utf-8", errors="replace")
    except OSError:
        return []
    return [line.rstrip("\r") for line in text.splitlines() if line.strip()][-lines:]


def their_environ() -> dict[str, str]:
    """The environment for a process llmbench starts but does not own (a server under test,
    a --before command): this process's, without the one-BLAS-thread setting the command line
    made for itself (cli/__init__.py), which would slow a CPU server's matrix work; a value the
    user set stays."""
    env = dict(os.environ)
    if env.pop("LLMBENCH_SET_OPENBLAS", None) == "1":
        env.pop("OPENBLAS_NUM_THREADS", None)
    return env


@dataclass
class ManagedServer:
    """One server process (a shell command, or an argv list) in its own process group."""

    command: str | Sequence[str]
    env: dict[str, str]
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    started: float = field(default=0.0)

    def start(self) -> "ManagedServer":
        argv = ["/bin/sh", "-c", self.command] if isinstance(self.command, str) \
            else list(self.command)
        with open(self.log_path, "ab") as log:
            # its own session: Ctrl-C in the terminal reaches llmbench only, which then stops
            # the server in order; killpg reaches whatever the shell started
            self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, env=self.env,
                                         start_new_session=True, preexec_fn=_die_with_parent)
        self.started = time.monotonic()
        return self

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def exit_code(self) -> int | None:
        """None while it runs."""
        return None if self.proc is None else self.proc.poll()

    def exited(self) -> str | None:
        code = self.exit_code()
        if code is None:
            return None
        how = f"was killed by signal {-code}" if code < 0 else f"exited with code {code}"
        return f"the server {how} {time.monotonic() - self.started:.1f} s after it was started"

    def stop(self, grace_s: float) -> None:
        """SIGTERM to the whole group, SIGKILL to what is left after ``grace_s``."""
        if self.proc is None:
            return
        pgid = self.proc.pid                     # the session leader's pid is the group's id
        _signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline:
            self.proc.poll()
            if not _group_alive(pgid):
                break
            time.sleep(0.05)
        else:
            _signal_group(pgid, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(5)


def _signal_group(pgid: int, sig: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def run_before(command: str, env: dict[str, str], log_path: Path, timeout_s: float) -> None:
    """--before: a one-shot command (``docker restart x``, ``systemctl restart ollama``), its
    output appended to the log; raises ServerFailed when it fails or outlives ``timeout_s``."""
    with open(log_path, "ab") as log:
        log.write(f"$ {command}\n".encode())
        log.flush()
        try:
            p = subprocess.run(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL, stdout=log,
                               stderr=subprocess.STDOUT, env=env, timeout=timeout_s,
                               start_new_session=True)
        except subprocess.TimeoutExpired:
            raise ServerFailed(f"--before did not finish within {timeout_s:g} s (--ready-timeout)")
    if p.returncode != 0:
        raise ServerFailed(f"--before exited with code {p.returncode}")


def wait_up(target: Target, timeout_s: float, give_up: Callable[[], str | None] | None = None
            ) -> tuple[float, str]:
    """Ready: the models list answers without a 5xx (``wait_ready``), /health is not a 5xx
    either (llama.cpp answers 503 while it loads; a server without /health answers 404, which is
    fine), then one one-token request succeeds (Ollama loads the model on the first request; a
    sweep must not time that). A target whose model is "?" (no --model) asks the server for the
    one it serves. Returns the seconds it took and the model; raises ServerFailed."""
    t0 = time.monotonic()
    try:
        wait_ready(target, timeout_s, poll_s=0.25, give_up=give_up, flag="--ready-timeout")
    except DiscoverError as exc:
        raise ServerFailed(str(exc))
    health = target.server_root.rstrip("/") + "/health"
    while True:
        try:
            status, _ = _get(health, _headers(target), 5.0)
        except (OSError, ValueError):
            status = 599
        if status < 500:
            break
        why = give_up() if give_up else None
        if why:
            raise ServerFailed(why)
        if time.monotonic() - t0 > timeout_s:
            raise ServerFailed(f"{health} still answered {status} after {timeout_s:g} s "
                               "(--ready-timeout)")
        time.sleep(0.25)
    if target.model == "?":
        import dataclasses
        try:
            target = dataclasses.replace(target, model=pick_model(target))
        except DiscoverError as exc:
            raise ServerFailed(str(exc))
    left = max(timeout_s - (time.monotonic() - t0), 1.0)
    asyncio.run(_warm_up(target, left, give_up))
    return time.monotonic() - t0, target.model


async def _warm_up(target: Target, timeout_s: float,
                   give_up: Callable[[], str | None] | None) -> None:
    from llmbench.client.request import Client, RequestParams, Timeouts
    from llmbench.records.record import Record
    deadline = time.monotonic() + timeout_s
    timeouts = Timeouts(10.0, timeout_s, timeout_s, timeout_s)
    last = ""
    async with Client(target, RequestParams(), timeouts) as client:
        while True:
            rec = Record("warm-up", scheduled=time.perf_counter())
            await client.send([{"role": "user", "content": "Hi"}], 1, rec, abandon=False)
            if rec.ok or (rec.status == 200 and rec.error_kind == "no_token"):
                return
            last = f"{rec.error_kind} {rec.status or ''}: {(rec.error or '')[:120]}".strip()
            if rec.status in (400, 401, 403, 404, 405, 422):
                # the server is up and said no: waiting longer will not help
                raise ServerFailed(f"the warm-up request was refused ({target.redact(last)}); "
                                   "check --model, --api and --url")
            why = give_up() if give_up else None
            if why:
                raise ServerFailed(why)
            if time.monotonic() > deadline:
                raise ServerFailed(f"the warm-up request did not succeed within {timeout_s:.0f} s "
                                   f"(--ready-timeout; last: {target.redact(last)})")
            await asyncio.sleep(0.5)

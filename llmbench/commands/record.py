"""``llmbench record --upstream URL --out FILE``: a reverse proxy that records what real clients
send (servers/recorder.py), anonymised unless --keep-text, as a trace ``run --trace`` replays
(workload/recording.py). Ctrl-C stops it; the file is complete at every moment, each request's
line written when it finished; the statistics are printed on the way out."""

from __future__ import annotations

import asyncio
import dataclasses
import signal
import sys
from pathlib import Path
from typing import Any, Callable
from urllib.parse import urlsplit

from llmbench.commands.options import FLAG, INT, PATH, REQUIRED, Spec, UsageError, count, option

LOOPBACK = ("127.0.0.1", "::1", "localhost")


@dataclasses.dataclass
class RecordSpec(Spec):
    """``llmbench record``: real traffic through a recording proxy, into a replayable trace."""

    command = "record"

    upstream: str = option("The server the clients' requests go on to (its root, e.g. http://127.0.0.1:8080).", default=REQUIRED, metavar="URL")
    out: Path | str = option("The recording (JSON lines; appended as requests finish).", kind=PATH, default=REQUIRED)
    listen: str = option("Where clients connect (loopback by default; 0.0.0.0:PORT to record other machines' clients).", default="127.0.0.1:8001", metavar="HOST:PORT")
    keep_text: bool = option("Keep the requests' own text (the file says so); by default every text is replaced by synthetic text of the same token length.", kind=FLAG, default=False)
    tokenizer: str = option("Counts tokens for the synthetic text: auto (the upstream's /tokenize, else local), server, ORG/NAME, DIR, tokenizer.json, tiktoken, approx.", default="auto", metavar="SPEC")
    seed: int = option("Seeds the synthetic text (the same seed, the same replacements).", kind=INT, default=0)

    def check(self) -> None:
        super().check()
        p = urlsplit(self.upstream)
        if p.scheme not in ("http", "https") or not p.hostname:
            raise UsageError(f"--upstream {self.upstream!r}: give the server's URL, e.g. "
                             "http://127.0.0.1:8080")
        self.listen_host, self.listen_port = self._listen()
        count(self.seed, "--seed", lo=0)
        out = Path(self.out)
        if out.is_dir():
            raise UsageError(f"--out {out}: is a folder; give a file name (e.g. traffic.jsonl)")
        if out.exists() and out.stat().st_size:
            raise UsageError(f"--out {out}: exists; choose a new file (a recording is never "
                             "appended to another)")

    def _listen(self) -> tuple[str, int]:
        host, sep, port = self.listen.rpartition(":")
        if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
            raise UsageError(f"--listen {self.listen!r}: expected HOST:PORT such as "
                             "127.0.0.1:8001 (port 0: any free one)")
        return (host.strip("[]") or "127.0.0.1"), int(port)

    def perform(self, listening: Callable[[str], Any],
                log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
                stop: asyncio.Event | None = None) -> list[str]:
        """Record until Ctrl-C (or ``stop``); returns the statistics' lines."""
        from llmbench.servers.recorder import Writer, public_url, serve
        from llmbench.workload.tokenizer import ServerRef, TokenizerError, load_tokenizer

        upstream = self.upstream.rstrip("/")
        for suffix in ("/v1",):
            if upstream.endswith(suffix):        # clients name the paths; the root is wanted
                upstream = upstream[: -len(suffix)]

        def make_tok(model: str | None) -> Any:
            ref = ServerRef(upstream, model or "")
            try:
                # auto: $LLMBENCH_TOKENIZER when set, as for the other commands
                return load_tokenizer(None if self.tokenizer == "auto" else self.tokenizer, ref)
            except TokenizerError as exc:
                log(f"llmbench record: {exc}; counting with words and punctuation instead")
                return load_tokenizer("approx")
        try:
            f = open(self.out, "a", encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"--out {self.out}: cannot write there ({exc.strerror or exc})")
        writer = Writer(f, make_tok, self.keep_text, public_url(upstream), log, self.seed)

        async def main() -> None:
            done = stop or asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    loop.add_signal_handler(sig, done.set)
                except (NotImplementedError, RuntimeError):
                    pass
            host = self.listen_host

            def bound(port: int) -> None:
                shown = f"[{host}]" if ":" in host else host
                listening(f"http://{shown}:{port}")
            await serve(upstream, host, self.listen_port, writer, bound, done, log)
        try:
            asyncio.run(main())
        except OSError as exc:
            raise UsageError(f"--listen {self.listen}: cannot listen there "
                             f"({exc.strerror or exc}); choose a free port, or 0 for any")
        finally:
            f.close()
        return writer.summary()

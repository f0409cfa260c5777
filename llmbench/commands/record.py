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
from typing import Iterator, Any, Callable
from urllib.parse import urlsplit

from llmbench.specs.groups import OutputOpts, WorkloadOpts
from llmbench.commands.options import (FLAG, REQUIRED, Spec, UsageError, count, opt_of, option,
                                       problem)



def _shared(group: type, name: str, help: str, default: Any) -> Any:
    """A group's option, declared there once (tests/e2e/test_cli_help.py), with this
    command's help and default."""
    field = next(f for f in dataclasses.fields(group) if f.name == name)
    o = dataclasses.replace(opt_of(field), help=help)
    return dataclasses.field(default=default, metadata={"opt": o})


@dataclasses.dataclass
class RecordSpec(Spec):
    """``llmbench record``: real traffic through a recording proxy, into a replayable trace."""

    command = "record"

    upstream: str = option("The server the clients' requests go on to (its root, e.g. http://127.0.0.1:8080).", default=REQUIRED, metavar="URL")
    out: Path | str = _shared(OutputOpts, "out", "The recording (JSON lines; appended as requests finish).", REQUIRED)
    listen: str = option("Where clients connect (loopback by default; 0.0.0.0:PORT to record other machines' clients).", default="127.0.0.1:8001", metavar="HOST:PORT")
    keep_text: bool = option("Keep the requests' own text (the file says so); by default every text is replaced by synthetic text of the same token length.", None, "--keep-text", kind=FLAG, default=False)
    tokenizer: str | None = _shared(WorkloadOpts, "tokenizer", "Counts the tokens of the synthetic text (auto: the upstream's).", None)
    seed: int = _shared(WorkloadOpts, "seed", "Seed of the synthetic text (the same seed, the same replacements).", 0)

    def _check(self) -> Iterator[str]:
        p = urlsplit(self.upstream)
        if p.scheme not in ("http", "https") or not p.hostname:
            yield (f"--upstream {self.upstream!r}: give the server's URL, e.g. "
                   "http://127.0.0.1:8080")
        self.listen_host, self.listen_port = self._listen()
        yield from problem(count, self.seed, "--seed", lo=0)
        out = Path(self.out)
        if out.is_dir():
            yield f"--out {out}: is a folder; give a file name (e.g. traffic.jsonl)"
        if out.exists() and out.stat().st_size:
            yield (f"--out {out}: exists; choose a new file (a recording is never "
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
                return load_tokenizer(self.tokenizer, ref)
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
            try:
                f.close()
            except OSError:
                pass       # the disk refused the last line: said once already (Writer)
        return summary(writer)


def summary(writer: Any) -> list[str]:
    """What ``llmbench record`` prints on the way out: requests, sessions, the prefix share a
    prefix cache could serve, the latencies seen through the recorder."""
    from llmbench.analysis.stats import quantile
    s = writer.stats
    turns = sorted(writer.linker.turns.values())
    share = writer.share.share if writer.share else None

    def q(xs: list[float]) -> str:
        if not xs:
            return "-"
        return f"p50 {quantile(xs, 50):.1f} ms, p99 {quantile(xs, 99):.1f} ms"

    def n(k: int, what: str) -> str:
        return f"{k} {what}" + ("" if k == 1 else "s")
    out = [f"Recorded {n(s.requests, 'request')} in {n(len(turns), 'session')}"
           + (f" (turns per session: max {turns[-1]})" if turns else "")
           + (f"; {s.passed} other requests passed through" if s.passed else "")
           + (f"; {s.failed} failed: upstream down" if s.failed else "")]
    if s.requests:
        out.append(f"Tokens: {s.prompt_tokens} prompt, {s.output_tokens} output (the "
                   "server's usage)")
        out.append("Prompt tokens repeating an earlier prefix: "
                   + ("-" if share is None else f"{share * 100:.1f} %"))
        out.append(f"TTFT {q(s.ttft_ms)}; ITL {q(s.itl_ms)}; E2EL {q(s.e2el_ms)}")
    return out

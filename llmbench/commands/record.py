"""``llmbench record --upstream URL --out FILE``: a reverse proxy that records what real clients
send (servers/recorder.py), anonymised unless --keep-text, as a trace ``run --trace`` replays
(workload/recording.py). Ctrl-C stops it; the file is complete at every moment, each request's
line written when it finished; the statistics are printed on the way out
(report.outcome.record_summary)."""

from __future__ import annotations

import asyncio
import signal
import sys
from typing import Any, Callable

from llmbench.errors import UsageError
from llmbench.specs.record import RecordSpec


def perform_record(spec: RecordSpec, listening: Callable[[str], Any],
                   log: Callable[[str], None] = lambda s: print(s, file=sys.stderr, flush=True),
                   stop: asyncio.Event | None = None) -> list[str]:
    """Record until Ctrl-C (or ``stop``); returns the statistics' lines."""
    from llmbench.servers.recorder import Writer, public_url, serve
    from llmbench.workload.tokenizer import ServerRef, TokenizerError, load_tokenizer

    upstream = spec.upstream.rstrip("/")
    for suffix in ("/v1",):
        if upstream.endswith(suffix):        # clients name the paths; the root is wanted
            upstream = upstream[: -len(suffix)]

    def make_tok(model: str | None) -> Any:
        ref = ServerRef(upstream, model or "")
        try:
            return load_tokenizer(spec.tokenizer, ref)
        except TokenizerError as exc:
            log(f"llmbench record: {exc}; counting with words and punctuation instead")
            return load_tokenizer("approx")
    try:
        f = open(spec.out, "a", encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--out {spec.out}: cannot write there ({exc.strerror or exc})")
    writer = Writer(f, make_tok, spec.keep_text, public_url(upstream), log, spec.seed)

    async def main() -> None:
        done = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, done.set)
            except (NotImplementedError, RuntimeError):
                pass
        host = spec.listen_host

        def bound(port: int) -> None:
            shown = f"[{host}]" if ":" in host else host
            listening(f"http://{shown}:{port}")
        await serve(upstream, host, spec.listen_port, writer, bound, done, log)
    try:
        asyncio.run(main())
    except OSError as exc:
        raise UsageError(f"--listen {spec.listen}: cannot listen there "
                         f"({exc.strerror or exc}); choose a free port, or 0 for any")
    finally:
        try:
            f.close()
        except OSError:
            pass       # the disk refused the last line: said once already (Writer)
    from llmbench.report.outcome import record_summary
    return record_summary(writer)


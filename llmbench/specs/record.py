"""``llmbench record``'s spec: where the proxy listens, the server it forwards to, and the
recording it writes (what it does: llmbench/commands/record.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Iterator
from urllib.parse import urlsplit

from llmbench.specs.groups import OutputOpts, WorkloadOpts
from llmbench.specs.options import (FLAG, REQUIRED, Spec, UsageError, count, opt_of, option,
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

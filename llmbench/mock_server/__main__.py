"""``python -m llmbench.mock_server``: the child-process entry used by MockProcess (``python -m
mock_server``, the old spelling, comes here too)."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys

from .engine import MockConfig
from .server import WorkerFailed, serve_forever


def main() -> None:
    ap = argparse.ArgumentParser(prog="python -m llmbench.mock_server")
    ap.add_argument("--config-json", default="{}")
    ap.add_argument("--replicas", type=int, default=1)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--record")
    ap.add_argument("--record-prompts", action="store_true")
    ap.add_argument("--announce", action="store_true")
    ap.add_argument("--watch-stdin", action="store_true",
                    help="stop when stdin reaches end of file (the parent process died)")
    ap.add_argument("--workers", type=int, default=1,
                    help="worker processes sharing the port(s) (SO_REUSEPORT); >1 without "
                         "--worker: supervise them")
    ap.add_argument("--worker", type=int, default=None, help="this process is worker N")
    ap.add_argument("--peers-dir", help="where the workers' unix sockets live")
    a = ap.parse_args()
    cfg = MockConfig()
    cfg.update(json.loads(a.config_json))
    try:
        asyncio.run(serve_forever(cfg, a.replicas, a.host, a.port, a.record, a.record_prompts,
                                  a.announce, watch_stdin=a.watch_stdin, workers=a.workers,
                                  worker=a.worker, peers_dir=a.peers_dir))
    except KeyboardInterrupt:
        pass
    except (WorkerFailed, OSError) as exc:
        print(f"error: mock: {exc}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()

"""One request -> one Record: the client (request), its transports (fasthttp, aiohttp), the
stream decoder, the target (URL, wire format, headers) and the way to it (netconfig).

``MockTransport`` (mock_transport.py) stands in for the network: ``Client(target,
transport=MockTransport(handler))`` plays scripted replies on a virtual clock."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from llmbench.client.mock_transport import MockReply, MockRequest, MockTransport, VirtualClock
    from llmbench.client.request import Client, RequestParams, Timeouts

__all__ = ["Client", "MockReply", "MockRequest", "MockTransport", "RequestParams", "Timeouts",
           "VirtualClock"]

_WHERE = {"Client": "request", "RequestParams": "request", "Timeouts": "request",
          "MockReply": "mock_transport", "MockRequest": "mock_transport",
          "MockTransport": "mock_transport", "VirtualClock": "mock_transport"}


def __getattr__(name: str) -> Any:
    # lazy: importing one module of the package (the decoder, a worker's client) loads no other
    if name in _WHERE:
        from importlib import import_module
        return getattr(import_module(f"llmbench.client.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'llmbench.client' has no attribute {name!r}")

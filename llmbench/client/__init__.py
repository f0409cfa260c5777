"""One request -> one Record: the client (request), its transports (fasthttp, aiohttp), the
stream decoder, the target (URL, wire format, headers) and the way to it (netconfig)."""

"""Error replies as each API shapes them, and the one exception a handler raises for a bad
request (``BadRequest``: a status and the real server's wording)."""

from __future__ import annotations

from aiohttp import web

OLLAMA_BUSY = "server busy, please try again.  maximum pending requests exceeded"


class BadRequest(Exception):
    def __init__(self, message: str, status: int = 400, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.param = param


def openai_error(message: str, status: int, etype: str | None = None,
                 param: str | None = None) -> web.Response:
    etype = etype or {400: "BadRequestError", 404: "NotFoundError", 429: "RateLimitError",
                      500: "InternalServerError"}.get(status, "Error")
    body = {"error": {"message": message, "type": etype, "param": param, "code": status}}
    return web.json_response(body, status=status)


def ollama_error(message: str, status: int) -> web.Response:
    return web.json_response({"error": message}, status=status)

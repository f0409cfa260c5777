"""A request's id as it travels in the ``x-request-id`` header: a UUID (RFC 4122, version 4
shape) that carries llmbench's own id (``28618-12``, kept in the record) and gives it back.

Why a UUID: servers parse the header. llama-cpp-python's server (starlette-context) answers an
empty HTTP 400 to any value that is not a UUID, and vLLM takes it for its own request id.
Why one that gives the id back: the mock seeds a reply's words from the id and logs the id of
each request (so a record and the mock's log meet), and a packet capture shows the header; both
must name the record's id, not a number nothing else knows.

Layout: the id's characters, 6 bits each (0 = end, then 0-9 a-z A-Z and '-' as 1-63), fill
120 bits, written as 30 hex digits with the version digit ``4`` and the variant digit ``8``
put in their places: at most 20 characters. A longer id, or one with another character, gets a
UUID from its SHA-1 with the variant digit ``b``, which ``id_of`` knows it cannot read back.
"""

from __future__ import annotations

import hashlib

_ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-"
_CODE = {c: i + 1 for i, c in enumerate(_ALPHABET)}
MAX_CHARS = 20                       # 120 bits / 6
_HEX = frozenset("0123456789abcdef")


def _dashed(hex32: str) -> str:
    return f"{hex32[:8]}-{hex32[8:12]}-{hex32[12:16]}-{hex32[16:20]}-{hex32[20:]}"


def header_id(request_id: str) -> str:
    """The UUID sent for ``request_id`` (the same id, the same UUID, every time)."""
    if len(request_id) <= MAX_CHARS:
        n = 0
        for c in request_id:
            code = _CODE.get(c)
            if code is None:
                break
            n = (n << 6) | code
        else:
            n <<= 6 * (MAX_CHARS - len(request_id))
            h = f"{n:030x}"
            return _dashed(f"{h[:12]}4{h[12:15]}8{h[15:]}")
    h = hashlib.sha1(request_id.encode("utf-8", "surrogatepass")).hexdigest()
    return _dashed(f"{h[:12]}4{h[12:15]}b{h[15:30]}")


def id_of(header: str) -> str | None:
    """llmbench's id inside a header ``header_id`` made; None for a hashed id, free text and
    most other UUIDs (one in about six of another client's random ones reads as 20 characters
    of noise: harmless where it is used, as a seed and a log key)."""
    h = header.replace("-", "").lower()
    if len(h) != 32 or len(header) != 36 or h[12] != "4" or h[16] != "8" or not _HEX.issuperset(h):
        return None
    n = int(h[:12] + h[13:16] + h[17:], 16)
    chars: list[str] = []
    for shift in range(6 * (MAX_CHARS - 1), -1, -6):
        code = (n >> shift) & 63
        if code == 0:
            # the rest must be padding: a UUID that only looks like ours has bits after a 0
            return "".join(chars) if chars and (n & ((1 << shift) - 1)) == 0 else None
        chars.append(_ALPHABET[code - 1])
    return "".join(chars)

"""Every record's token events, in little memory: the RecordStore's largest part.

A record's token events are integer microseconds after its start (requests.jsonl's
``token_us``). Held as int32 they cost 4 bytes an event: a million 128-token replies are 512 MB.
But successive events of one reply are close (a gap of a few ms is a few thousand µs), so the
events are kept as each record's first value followed by the gaps between its events, in the
narrowest unsigned integers that hold nearly all of them (1 or 2 bytes; first values and gaps
each in their own width); the few values that do not fit (a stall, a first token after 65 ms
among earlier ones) are kept aside as exceptions, by position. Exact: decoding gives back the
very integers appended. A chunk that would not be smaller so (values all over the int32 range)
stays int32.

Appending is a plain int32 array append (the hot path); every ``SEAL_EVENTS`` events the store
seals the appended records into a chunk (a few ms of numpy). Reading is by whole records
(``get``), a chunk at a time, so the end-of-run passes never hold every event at once.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from typing import TYPE_CHECKING, Iterator

if TYPE_CHECKING:
    import numpy as np

SEAL_EVENTS = 1 << 16          # events appended between seals (256 kB of int32: ~2 ms of numpy)
_ESCAPE_BYTES = 12             # an exception: its position (int32) and value (int64)


class _Narrow:
    """Integers (int64) as the narrowest of uint8 / uint16 / int32 that costs least, counting
    12 bytes for each value that does not fit and is kept aside (position and value)."""

    __slots__ = ("enc", "esc_pos", "esc_val")

    def __init__(self, values: "np.ndarray") -> None:
        import numpy as np
        best: tuple[float, object] = (float("inf"), None)
        for dtype, lo, hi in ((np.uint8, 0, 0xFF), (np.uint16, 0, 0xFFFF),
                              (np.int32, -(2 ** 31), 2 ** 31 - 1)):
            bad = (values < lo) | (values > hi)
            n_bad = int(np.count_nonzero(bad))
            cost = len(values) * np.dtype(dtype).itemsize + n_bad * _ESCAPE_BYTES
            if cost < best[0]:
                best = (cost, (dtype, bad))
        dtype, bad = best[1]                      # type: ignore[misc]
        self.esc_pos = np.flatnonzero(bad).astype(np.int32)
        self.esc_val = values[self.esc_pos]
        if len(self.esc_pos):
            values = values.copy()
            values[self.esc_pos] = 0              # any value: the exception replaces it
        self.enc = values.astype(dtype)

    @property
    def nbytes(self) -> int:
        return int(self.enc.nbytes + self.esc_pos.nbytes + self.esc_val.nbytes)

    def __getitem__(self, sl: slice) -> "np.ndarray":
        """Values ``sl.start .. sl.stop`` as int64."""
        import numpy as np
        a, b = sl.start, sl.stop
        v = self.enc[a:b].astype(np.int64)
        i0, i1 = np.searchsorted(self.esc_pos, (a, b))
        if i1 > i0:
            v[self.esc_pos[i0:i1] - a] = self.esc_val[i0:i1]
        return v


class _Chunk:
    """Sealed events ``e0 ..`` of records ``r0 ..``: the records' first values and the gaps
    after them, each narrow; or (``raw``) the int32 values themselves when that is smaller."""

    __slots__ = ("e0", "r0", "n", "raw", "firsts", "gaps")

    def __init__(self, e0: int, r0: int, us: "np.ndarray", k: "np.ndarray") -> None:
        """``us``: the events (int32) of records ``r0 ..`` with ``k`` events each."""
        import numpy as np
        self.e0, self.r0, self.n = e0, r0, len(us)
        v = us.astype(np.int64)
        is_first = np.zeros(len(v), dtype=bool)
        is_first[(np.cumsum(k) - k)[k > 0]] = True
        d = np.empty_like(v)
        d[1:] = v[1:] - v[:-1]
        d[is_first] = v[is_first]
        self.firsts, self.gaps = _Narrow(d[is_first]), _Narrow(d[~is_first])
        self.raw: "np.ndarray | None" = None
        if self.firsts.nbytes + self.gaps.nbytes >= 4 * len(v):
            self.raw, self.firsts, self.gaps = us.astype(np.int32, copy=True), None, None

    def __len__(self) -> int:
        return self.n

    @property
    def nbytes(self) -> int:
        if self.raw is not None:
            return int(self.raw.nbytes)
        return self.firsts.nbytes + self.gaps.nbytes

    def decode(self, ra: int, rb: int, ntok: "np.ndarray", off: "np.ndarray") -> "np.ndarray":
        """The events of records ``ra .. rb`` (all in this chunk) as int32; ``ntok``, ``off``:
        the store's counts and offsets."""
        import numpy as np
        a, b = int(off[ra]) - self.e0, int(off[rb]) - self.e0
        if self.raw is not None:
            return self.raw[a:b].copy()
        k = ntok[ra:rb].astype(np.int64)
        f0 = int(np.count_nonzero(ntok[self.r0:ra]))     # records with events before ra
        fpos = (np.cumsum(k) - k)[k > 0]
        v = np.empty(b - a, dtype=np.int64)
        gap = np.ones(b - a, dtype=bool)
        gap[fpos] = False
        v[fpos] = self.firsts[f0:f0 + len(fpos)]
        v[gap] = self.gaps[a - f0:b - f0 - len(fpos)]
        cs = np.cumsum(v)
        # each record restarts at its first value: take away what came before it
        cs -= np.repeat(cs[fpos] - v[fpos], k[k > 0])
        return cs.astype(np.int32)


class TokenEvents:
    """Token events (int32 µs), records one after another: sealed chunks, then a tail."""

    __slots__ = ("tail", "_chunks", "_rec_starts", "_sealed", "_sealed_recs")

    def __init__(self) -> None:
        self.tail = array("i")          # appended since the last seal (the store extends it)
        self._chunks: list[_Chunk | None] = []      # None: released (release_before)
        self._rec_starts: list[int] = []    # each chunk's first record
        self._sealed = 0                # events in chunks
        self._sealed_recs = 0           # records in chunks

    def __len__(self) -> int:
        return self._sealed + len(self.tail)

    @property
    def sealed_records(self) -> int:
        return self._sealed_recs

    def seal(self, k: "np.ndarray") -> None:
        """Encode the tail into a chunk; ``k``: the token event counts of the records appended
        since the last seal (whose events the tail holds)."""
        import numpy as np
        if not len(self.tail):
            return                      # nothing to encode: those records stay in the tail
        us = np.frombuffer(self.tail, dtype=np.int32)
        chunk = _Chunk(self._sealed, self._sealed_recs, us, np.asarray(k, dtype=np.int64))
        del us
        self._chunks.append(chunk)
        self._rec_starts.append(self._sealed_recs)
        self._sealed += len(chunk)
        self._sealed_recs += len(k)
        self.tail = array("i")

    def _pieces(self, r0: int, r1: int) -> Iterator[tuple[int, int, _Chunk | None]]:
        """Records ``r0 .. r1`` split where chunks end: (first, end, its chunk or None for
        the tail)."""
        r = r0
        k = max(bisect_right(self._rec_starts, r0) - 1, 0)
        while r < r1 and k < len(self._chunks) and r < self._sealed_recs:
            c = self._chunks[k]
            assert c is not None, "token events read after they were released"
            end = min(r1, self._rec_starts[k + 1] if k + 1 < len(self._chunks)
                      else self._sealed_recs)
            if end > r:
                yield r, end, c
                r = end
            k += 1
        if r < r1:
            yield r, r1, None

    def _decode(self, ra: int, rb: int, c: _Chunk | None, ntok: "np.ndarray",
                off: "np.ndarray") -> "np.ndarray":
        import numpy as np
        if c is not None:
            return c.decode(ra, rb, ntok, off)
        t0, t1 = int(off[ra]) - self._sealed, int(off[rb]) - self._sealed
        return np.frombuffer(self.tail, dtype=np.int32)[t0:t1]

    def get(self, r0: int, r1: int, ntok: "np.ndarray", off: "np.ndarray") -> "np.ndarray":
        """The events of records ``r0 .. r1`` as a new int32 array; ``ntok`` and ``off``: every
        record's event count and where its events start (length records + 1). Decoded a
        chunk at a time into the result (a chunk's temporaries, whatever the range)."""
        import numpy as np
        e0 = int(off[r0])
        out = np.empty(max(int(off[r1]) - e0, 0), dtype=np.int32)
        for ra, rb, c in self._pieces(r0, r1):
            out[int(off[ra]) - e0:int(off[rb]) - e0] = self._decode(ra, rb, c, ntok, off)
        return out

    def take(self, pos: "np.ndarray", r0: int, r1: int, ntok: "np.ndarray",
             off: "np.ndarray") -> "np.ndarray":
        """The events at positions ``pos`` (ascending, within records ``r0 .. r1``) as int32:
        one value each, decoded a chunk at a time (a record's first or last event without
        every event of the block at once)."""
        import numpy as np
        out = np.empty(len(pos), dtype=np.int32)
        for ra, rb, c in self._pieces(r0, r1):
            a, b = int(off[ra]), int(off[rb])
            lo, hi = np.searchsorted(pos, (a, b))
            if hi > lo:
                out[lo:hi] = self._decode(ra, rb, c, ntok, off)[pos[lo:hi] - a]
        return out

    def release_before(self, r: int) -> None:
        """Let go of the chunks whose records all lie before record ``r``: this object is being
        replaced (RecordStore.reorder) and nothing reads those records from it again."""
        for k, c in enumerate(self._chunks):
            end = self._rec_starts[k + 1] if k + 1 < len(self._chunks) else self._sealed_recs
            if end > r:
                break
            if c is not None:
                self._chunks[k] = None          # type: ignore[call-overload]

    def nbytes(self) -> int:
        return sum(c.nbytes for c in self._chunks if c is not None) + len(self.tail) * 4

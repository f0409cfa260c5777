"""The compact column store of a run's records: what a summary reads, ~105 bytes a request."""

from __future__ import annotations

from array import array
from dataclasses import MISSING as MISSING_DEFAULT
from operator import attrgetter
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Sequence

from llmbench.records.definitions import UNMEASURED_KINDS, in_step_window, is_measured
from llmbench.records.record import NAN, Record, token_us
from llmbench.records.token_events import SEAL_EVENTS, TokenEvents

if TYPE_CHECKING:
    import numpy as np


# -- the compact store ---------------------------------------------------------------------
#
# Why columns (a million-request replay ran out of memory as Records) and what each column
# costs: docs/memory.md.
#
# What it holds is exactly what requests.jsonl holds: token times as integer microseconds after
# ``start`` (Record.to_json's rounding) and read back as ``start + us / 1e6`` (Record.from_json),
# every other time as the same float64. So a record read from the store equals the record read
# back from the file, and a summary built in memory equals one rebuilt from the run folder.

_NONE_I = -(2 ** 31)          # "None" in a 4-byte integer column
_NONE_H = -(2 ** 15)          # "None" in a 2-byte integer column
_INT_RANGE = {"i": (_NONE_I + 1, 2 ** 31 - 1), "h": (_NONE_H + 1, 2 ** 15 - 1)}
# float64 columns; None is NaN (a real NaN, never stored by clean(), goes to the extras)
_F8 = ("scheduled", "start", "sent", "done", "first_token", "end", "server_queue_ms")
# integer columns and their array typecode
_INTS = {"status": "h", "prompt_tokens": "i", "output_tokens": "i", "cached_tokens": "i",
         "max_tokens": "i", "user": "i", "turn": "h", "step": "h", "retries": "h",
         "worker": "h", "first_byte_us": "i"}
_FLAGS = ("ok", "warmup", "stream")            # bits of one byte
# short strings from a small vocabulary: an index into the store's string table
_STRS = ("error_kind", "finish_reason", "served_by", "path", "prompt_tokens_source",
         "output_tokens_source", "traffic_class")
# "prefix" + number (run-12, syn-345): the prefix interned, the number in a 4-byte column
_IDS = ("request_id", "conversation")
_COLUMNS = set(_F8) | set(_INTS) | set(_FLAGS) | set(_STRS) | set(_IDS) | {"token_times"}
# every other field (error text, note, token_counts, server_timing, the reasoning fields and
# any field added later) is kept only when it differs from its default, in a sparse dict
_DEFAULTS = {name: (f.default if f.default is not MISSING_DEFAULT else None)
             for name, f in Record.__dataclass_fields__.items()}  # type: ignore[attr-defined]
_OTHER = tuple(n for n in _DEFAULTS if n not in _COLUMNS)
_OTHER_DEFAULTS = tuple(_DEFAULTS[n] for n in _OTHER)
_get_other = attrgetter(*_OTHER)
_get_f8 = attrgetter(*_F8)
_get_ints = attrgetter(*_INTS)
_get_strs = attrgetter(*_STRS)


_heap_fixed = False
_libc: Any = None


def _return_large_blocks() -> None:
    """Have glibc's malloc give every block of 256 kB or more back to the system when freed.

    By default its mmap threshold grows to the largest block freed so far (up to 32 MB), after
    which the summary's per-request temporaries (8 MB each at a million requests) come from the
    heap and stay resident once freed: about 60 MB of a million-request run's peak was such
    freed memory. A fixed threshold turns that off; 256 kB rather than 1 MB also sends the
    end-of-run passes' block temporaries (512 kB) to mmap. Nothing happens on other C
    libraries."""
    global _heap_fixed, _libc
    if _heap_fixed:
        return
    _heap_fixed = True
    try:
        import ctypes
        _libc = ctypes.CDLL(None)
        _libc.mallopt(-3, 1 << 18)            # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        _libc = None


def trim_heap() -> None:
    """Give the heap's free pages back to the system (glibc's malloc_trim), after a pass that
    made and dropped many small objects or blocks: a million requests' Records, each freed once
    stored, leave free memory spread over the heap that otherwise counts as resident for the
    rest of the run. A few milliseconds; nothing on other C libraries."""
    if _libc is not None:
        try:
            _libc.malloc_trim(0)
        except AttributeError:
            pass


class RecordStore:
    """Finished requests in typed columns: ``append(rec)``, ``len``, iteration and indexing
    (each gives a fresh Record), and numpy columns for the analysis (``col``, ``token_us``).
    Records are copied in: changing one after it was appended does not change the store."""

    def __init__(self) -> None:
        _return_large_blocks()
        self._f8 = {n: array("d") for n in _F8}
        self._ints = {n: array(code) for n, code in _INTS.items()}
        self._flags = array("B")
        self._strs = {n: array("H") for n in _STRS}
        self._id_prefix = {n: array("H") for n in _IDS}
        self._id_num = {n: array("i") for n in _IDS}
        self._ntok = array("I")          # token events per record
        # all token events, µs after their start, records one after another (sealed narrow)
        self._tok = TokenEvents()
        self._extras: dict[int, dict[str, Any]] = {}
        self._table: list[str | None] = [None]      # shared string table; 0 is None
        self._index: dict[str | None, int] = {None: 0}
        self._offsets: np.ndarray | None = None      # cumulative token offsets (cache)
        # A column that has held one value so far (status 200, a fixed max_tokens, no worker,
        # the same finish reason...) keeps it as (value, count) ahead of its array: most of a
        # plain run's columns are such, about 45 bytes a request. Found every _COMPACT_EVERY
        # appends (compact), so appending stays a plain array append.
        self._head: dict[tuple[str, str], tuple[Any, int]] = {}
        self._varied: set[tuple[str, str]] = set()
        self._compact_at = _COMPACT_EVERY

    # -- writing ----------------------------------------------------------------------------
    def _intern(self, s: str | None) -> int:
        i = self._index.get(s)
        if i is None:
            i = self._index[s] = len(self._table)
            self._table.append(s)
        return i

    def append(self, rec: Record, token_us: list[int] | None = None) -> None:
        """Copy one finished record in (on the hot path: a few µs). ``token_us``: the record's
        records.record.token_us(rec), when the caller has it already (computed once for the
        store and the log)."""
        if not self._append_plain(rec, token_us):
            self._append_any(rec)
        self._offsets = None
        if len(self._tok.tail) >= SEAL_EVENTS:
            self._seal()
        if len(self._ntok) >= self._compact_at:
            self.compact()

    def _seal(self) -> None:
        """Encode the token events appended since the last seal (token_events)."""
        import numpy as np
        self._tok.seal(np.frombuffer(self._ntok, dtype=np.uint32)[self._tok.sealed_records:])

    # -- constant columns -------------------------------------------------------------------
    def _keys(self) -> Iterator[tuple[tuple[str, str], array]]:
        """Every column but the token events and their counts: (key, its array)."""
        for n, arr in self._f8.items():
            yield ("f8", n), arr
        for n, arr in self._ints.items():
            yield ("int", n), arr
        yield ("flags", ""), self._flags
        for n, arr in self._strs.items():
            yield ("str", n), arr
        for n, arr in self._id_prefix.items():
            yield ("idp", n), arr
        for n, arr in self._id_num.items():
            yield ("idn", n), arr

    def compact(self) -> None:
        """Fold each column's newly appended values into its head while they all equal it
        (bit for bit: -0.0 is not 0.0); a column that differed once is left alone for good.
        Done every 65,536 appends anyway; called at the end of a run, a column of one value
        reads back as a broadcast, not as an array (~18 columns of a million values each)."""
        import numpy as np
        self._compact_at = len(self._ntok) + _COMPACT_EVERY
        # the Records and buffers made and freed since the last look: their free pages go back
        # (the store grew ~35 bytes a request more than its columns in RSS without this)
        trim_heap()
        for key, arr in self._keys():
            if key in self._varied or not len(arr):
                continue
            a = np.frombuffer(arr, dtype=arr.typecode)
            head = self._head.get(key)
            value = a[0] if head is None else np.array([head[0]], dtype=a.dtype)[0]
            same = a.view(f"u{a.itemsize}") == np.array([value]).view(f"u{a.itemsize}")[0]
            if bool(same.all()):
                self._head[key] = (value.item(), (head[1] if head else 0) + len(a))
                del a
                del arr[:]                      # frees the array's buffer
            else:
                self._varied.add(key)

    def _full(self, key: tuple[str, str], arr: array, readonly: bool = False) -> np.ndarray:
        """A column as one numpy array: a view of its array when it has no head, else a new
        array with the head's values first; ``readonly`` and one value throughout: that value
        broadcast, no memory per request."""
        import numpy as np
        head = self._head.get(key)
        tail = np.frombuffer(arr, dtype=arr.typecode) if len(arr) else np.zeros(0, arr.typecode)
        if head is None or not head[1]:
            return tail
        if readonly and not len(tail):
            return np.broadcast_to(np.array(head[0], dtype=tail.dtype), (head[1],))
        out = np.empty(head[1] + len(tail), dtype=tail.dtype)
        out[:head[1]] = head[0]
        out[head[1]:] = tail
        return out

    def _item(self, key: tuple[str, str], arr: array, i: int) -> Any:
        head = self._head.get(key)
        if head is None:
            return arr[i]
        return head[0] if i < head[1] else arr[i - head[1]]

    def _append_plain(self, rec: Record, us: list[int] | None = None) -> bool:
        """The usual record, column by column without checks; False (nothing appended) when
        any value needs the general path: an extra field, a number out of range, an odd id."""
        if _get_other(rec) != _OTHER_DEFAULTS:
            return False
        f8 = _get_f8(rec)
        ints = _get_ints(rec)
        strs = _get_strs(rec)
        index = self._index
        sids = [index.get(v, -1) for v in strs]
        if -1 in sids or type(rec.ok) is not bool or type(rec.warmup) is not bool \
                or type(rec.stream) is not bool:
            return False
        ids = [_split_id(rec.request_id), _split_id(rec.conversation)]
        for prefix, _ in ids:
            if prefix is _UNSPLIT or prefix not in index:
                return False
        for v, (lo, hi) in zip(ints, _INT_RANGES):
            if v is not None and not (type(v) is int and lo <= v <= hi):
                return False
        for v in f8:
            if v is not None and v != v:
                return False
        if us is None:
            us = token_us(rec)
        if us and (min(us) < _NONE_I + 1 or max(us) > 2 ** 31 - 1):
            return False
        for arr, v in zip(self._f8.values(), f8):
            arr.append(NAN if v is None else v)
        for arr, v, none in zip(self._ints.values(), ints, _INT_NONES):
            arr.append(none if v is None else v)
        self._flags.append(rec.ok | rec.warmup << 1 | rec.stream << 2)
        for arr, v in zip(self._strs.values(), sids):
            arr.append(v)
        for n, (prefix, num) in zip(_IDS, ids):
            self._id_prefix[n].append(index[prefix])
            self._id_num[n].append(num)
        self._ntok.append(len(us))
        self._tok.tail.extend(us)
        return True

    def _append_any(self, rec: Record) -> None:
        i = len(self._ntok)
        extra: dict[str, Any] = {}
        for n in _F8:
            v = getattr(rec, n)
            if v is None:
                self._f8[n].append(NAN)
            elif v != v:
                self._f8[n].append(NAN)
                extra[n] = v
            else:
                self._f8[n].append(v)
        for n, code in _INTS.items():
            v = getattr(rec, n)
            lo, hi = _INT_RANGE[code]
            if v is None:
                self._ints[n].append(_NONE_I if code == "i" else _NONE_H)
            elif type(v) is int and lo <= v <= hi:
                self._ints[n].append(v)
            else:                                  # out of range or not an int: kept as is
                self._ints[n].append(_NONE_I if code == "i" else _NONE_H)
                extra[n] = v
        flags = 0
        for bit, n in enumerate(_FLAGS):
            v = getattr(rec, n)
            if v is True:
                flags |= 1 << bit
            elif v is not False:
                extra[n] = v
        self._flags.append(flags)
        for n in _STRS:
            v = getattr(rec, n)
            if v is None or type(v) is str:
                self._strs[n].append(self._intern(v) if len(self._table) < 65535 or v in self._index
                                     else 0)
                if v is not None and self._strs[n][-1] == 0:
                    extra[n] = v                  # a table full of distinct strings
            else:
                self._strs[n].append(0)
                extra[n] = v
        for n in _IDS:
            prefix, num = _split_id(getattr(rec, n))
            if prefix is _UNSPLIT or (len(self._table) >= 65535 and prefix not in self._index):
                self._id_prefix[n].append(0)
                self._id_num[n].append(-1)
                extra[n] = getattr(rec, n)
            else:
                self._id_prefix[n].append(self._intern(prefix))
                self._id_num[n].append(num)
        start = rec.start
        us = token_us(rec)
        if us and (min(us) < _NONE_I + 1 or max(us) > 2 ** 31 - 1):
            self._ntok.append(0)              # a reply longer than 35 minutes: kept aside
            extra["token_times"] = [start + u / 1e6 for u in us]
        else:
            self._ntok.append(len(us))
            self._tok.tail.extend(us)
        for n, default in _DEFAULTS.items():
            if n in _COLUMNS:
                continue
            v = getattr(rec, n)
            if v is not default and v != default:
                extra[n] = v if type(v) is not list else list(v)
        if extra:
            self._extras[i] = extra

    def extend(self, records: Iterable[Record]) -> None:
        for r in records:
            self.append(r)

    def clear(self) -> None:
        self.__init__()  # type: ignore[misc]

    # -- reading ----------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self._ntok)

    def __bool__(self) -> bool:
        return len(self._ntok) > 0

    def offsets(self) -> np.ndarray:
        """Where each record's token events start in ``token_us()`` (length len + 1)."""
        import numpy as np
        if self._offsets is None or len(self._offsets) != len(self._ntok) + 1:
            off = np.zeros(len(self._ntok) + 1, dtype=np.int64)
            np.cumsum(np.frombuffer(self._ntok, dtype=np.uint32), out=off[1:])
            self._offsets = off
        return self._offsets

    def _record(self, i: int, lo: int, hi: int, events: list[int] | None = None) -> Record:
        """Record ``i``, its token events at ``lo .. hi`` of the store's (or of ``events``)."""
        f8 = self._f8
        item = self._item
        kw: dict[str, Any] = {}
        for n in _F8:
            v = item(("f8", n), f8[n], i)
            kw[n] = None if v != v else v
        for n, code in _INTS.items():
            v = item(("int", n), self._ints[n], i)
            kw[n] = None if v == (_NONE_I if code == "i" else _NONE_H) else v
        flags = item(("flags", ""), self._flags, i)
        for bit, n in enumerate(_FLAGS):
            kw[n] = bool(flags >> bit & 1)
        table = self._table
        for n in _STRS:
            kw[n] = table[item(("str", n), self._strs[n], i)]
        for n in _IDS:
            num = item(("idn", n), self._id_num[n], i)
            prefix = table[item(("idp", n), self._id_prefix[n], i)]
            kw[n] = None if prefix is None and num < 0 else \
                (prefix or "") + (str(num) if num >= 0 else "")
        extra = self._extras.get(i)
        if extra:
            kw.update({k: (list(v) if type(v) is list else v) for k, v in extra.items()})
        start = kw["start"]
        if "token_times" not in kw:
            us = self.token_us_of(i, i + 1).tolist() if events is None else events[lo:hi]
            kw["token_times"] = [start + u / 1e6 for u in us]
        return Record(**kw)

    def __iter__(self) -> Iterator[Record]:
        off = self.offsets()
        n = len(self._ntok)
        step = self.block_records(_ITER_EVENTS)
        for c in range(0, n, step):
            c1 = min(c + step, n)
            base = int(off[c])
            events = self.token_us_of(c, c1).tolist()      # one decode for the block
            for i in range(c, c1):
                yield self._record(i, int(off[i]) - base, int(off[i + 1]) - base, events)

    def __getitem__(self, i: int) -> Record:
        n = len(self._ntok)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        off = self.offsets()
        return self._record(i, int(off[i]), int(off[i + 1]))

    def records_at(self, idx: Iterable[int]) -> list[Record]:
        """The records at ``idx``, in that order (their token events decoded a block at a
        time, not record by record)."""
        import numpy as np
        idx = np.fromiter(idx, dtype=np.int64) if not isinstance(idx, np.ndarray) \
            else idx.astype(np.int64, copy=False)
        out = []
        step = self.block_records(_ITER_EVENTS)
        for c in range(0, len(idx), step):
            block = idx[c:c + step]
            us, k = self.events_at(block)
            events, pos = us.tolist(), 0
            for i, n in zip(block.tolist(), k.tolist()):
                out.append(self._record(i, pos, pos + n, events))
                pos += n
        return out

    def in_window(self, step: int, start: float, end: float) -> list[Record]:
        """The records of a ramp step's window (``definitions.in_step_window``), found on the
        columns (the judge runs while load goes on)."""
        import numpy as np
        steps, present = self.ints("step")
        mask = present & in_step_window(steps, self.col("start"), self.col("warmup"), step,
                                        start, end)
        return self.records_at(np.nonzero(mask)[0])

    def measured_mask(self) -> np.ndarray:
        """Which records count (``definitions.is_measured``), on the columns."""
        return is_measured(self.col("warmup"), self.col("error_kind"),
                           tuple(self.str_id(kind) for kind in UNMEASURED_KINDS))

    def __add__(self, other: Iterable[Record]) -> "RecordStore":
        """Both stores' records in one new store (the probe joins its two targets' records)."""
        out = RecordStore()
        out.extend(self)
        out.extend(other)
        return out

    # -- columns ----------------------------------------------------------------------------
    def col(self, name: str) -> np.ndarray:
        """One field as a numpy array (a copy): floats with NaN for None, integers with None
        as -2**31 (``ints`` gives a present mask), booleans for flags, table indices for strings."""
        import numpy as np
        if name in self._f8:
            return np.array(self._full(("f8", name), self._f8[name]), dtype=np.float64)
        if name in self._ints:
            return np.array(self._full(("int", name), self._ints[name]),
                            dtype=np.int32 if _INTS[name] == "i" else np.int16)
        if name in _FLAGS:
            bit = _FLAGS.index(name)
            return (self._full(("flags", ""), self._flags) >> bit & 1).astype(bool)
        if name in self._strs:
            return np.array(self._full(("str", name), self._strs[name]), dtype=np.uint16)
        if name == "ntok":
            return np.array(self._ntok, dtype=np.int64)
        raise KeyError(name)

    def view(self, name: str) -> np.ndarray:
        """One float or integer column as a read-only numpy view, no copy (None as in ``col``;
        ``ntok`` as int32) unless the column began with a run of one value (a new array then).
        Valid until the next append, which fails while it lives."""
        import numpy as np
        if name in self._f8:
            key, arr, dtype = ("f8", name), self._f8[name], np.float64
        elif name in self._ints:
            key, arr, dtype = ("int", name), self._ints[name], \
                (np.int32 if _INTS[name] == "i" else np.int16)
        elif name == "ntok":
            key, arr, dtype = ("ntok", ""), self._ntok, np.int32   # counts, far below 2**31
        else:
            raise KeyError(name)
        if key in self._head:
            a = self._full(key, arr, readonly=True)
        else:
            a = np.frombuffer(arr, dtype=dtype) if len(arr) else np.zeros(0, dtype)
        a.flags.writeable = False
        return a

    def view_strs(self, name: str) -> np.ndarray:
        """A string column's table indices (``str_id``), read-only, copied only as ``view``."""
        a = self._full(("str", name), self._strs[name], readonly=True)
        a.flags.writeable = False
        return a

    def ints(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """An integer field as (values as int64 with None as 0, present mask); extras that did
        not fit the column are put back. Read them only: a column of one value comes back as
        that value broadcast."""
        import numpy as np
        code = _INTS[name]
        none = _NONE_I if code == "i" else _NONE_H
        head = self._head.get(("int", name))
        if head is not None and not len(self._ints[name]) and \
                not any(type(e.get(name)) is int for e in self._extras.values()):
            # one value throughout (max_tokens, turn, retries...): broadcast, read-only
            n = head[1]
            return (np.broadcast_to(np.int64(0 if head[0] == none else head[0]), (n,)),
                    np.broadcast_to(np.bool_(head[0] != none), (n,)))
        a = self.col(name)
        present = a != none
        out = np.where(present, a, 0).astype(np.int64)
        for i, extra in self._extras.items():
            v = extra.get(name)
            if type(v) is int:
                out[i], present[i] = v, True
        return out, present

    def token_us(self) -> np.ndarray:
        """Every record's token events (µs after its start, int32), records one after another,
        decoded into a new array (4 bytes an event: passes over a long run read
        ``token_us_of`` a block of records at a time instead)."""
        return self.token_us_of(0, len(self._ntok))

    def token_us_of(self, r0: int, r1: int) -> np.ndarray:
        """The token events of records ``r0 .. r1`` (int32 µs after each one's start), records
        one after another, as a new array: ``offsets()[r0:r1 + 1] - offsets()[r0]`` index it."""
        import numpy as np
        return self._tok.get(r0, r1, np.frombuffer(self._ntok, dtype=np.uint32), self.offsets())

    def token_us_take(self, pos: np.ndarray, r0: int, r1: int) -> np.ndarray:
        """The token events at positions ``pos`` of ``token_us()`` (ascending, all within
        records ``r0 .. r1``): e.g. each record's first or last event, without decoding the
        block's every event at once."""
        import numpy as np
        return self._tok.take(pos, r0, r1, np.frombuffer(self._ntok, dtype=np.uint32),
                              self.offsets())

    def block_records(self, events: int = 1 << 18) -> int:
        """How many records to read at a time so that a block holds about ``events`` token
        events (16 to 65,536): a pass's temporaries stay the same size for replies of 8 tokens
        or of 2,000."""
        n = len(self._ntok)
        total = len(self._tok)
        if not n or not total:
            return 1 << 16
        return max(16, min(1 << 16, events * n // total))

    def events_at(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The token events of the records ``idx`` (a block, any order; a record may come
        twice), one after another, and their counts: decoded over the span of records they
        lie in."""
        import numpy as np
        k = np.frombuffer(self._ntok, dtype=np.uint32)[idx].astype(np.int64)
        if not len(idx) or not k.sum():
            return np.zeros(0, np.int32), k
        r0, r1 = int(idx.min()), int(idx.max()) + 1
        off = self.offsets()
        seg = self.token_us_of(r0, r1)
        starts = np.repeat(off[idx] - off[r0] - (np.cumsum(k) - k), k)
        return seg[starts + np.arange(int(k.sum()))], k

    def _events_of(self, idx: np.ndarray, release: bool = False) -> TokenEvents:
        """The token events of the records ``idx``, in that order, as a new TokenEvents
        (a block of records at a time: no second copy of every event). ``release``: the
        store's own events are being replaced; each of its chunks is let go as soon as no
        later block needs it, so that a reorder holds little more than one copy."""
        import numpy as np
        out = TokenEvents()
        step = self.block_records()
        starts = range(0, len(idx), step)
        later_min = None
        if release and len(idx):
            # the lowest record any later block reads
            lows = np.array([idx[c:c + step].min() for c in starts])
            later_min = np.minimum.accumulate(lows[::-1])[::-1]
        for j, c in enumerate(starts):
            us, k = self.events_at(idx[c:c + step])
            out.tail.frombytes(us.tobytes())
            out.seal(k)
            if later_min is not None and j + 1 < len(later_min):
                self._tok.release_before(int(later_min[j + 1]))
        return out

    def str_id(self, s: str | None) -> int:
        """The table index of a string (-1 when no record has it)."""
        return self._index.get(s, -1)

    def table(self) -> list[str | None]:
        return self._table

    def extras(self) -> dict[int, dict[str, Any]]:
        return self._extras

    def take(self, idx: Sequence[int] | np.ndarray) -> "RecordStore":
        """A new store with the records at ``idx``, in that order."""
        import numpy as np
        idx = np.asarray(idx, dtype=np.int64)
        out = RecordStore()
        out._table, out._index = self._table, self._index     # append-only, shared
        mine = dict(self._keys())
        for key, arr in out._keys():
            head = self._head.get(key)
            if head is not None and not len(mine[key]):     # one value throughout: stays so
                out._head[key] = (head[0], len(idx))
            else:
                arr.frombytes(self._full(key, mine[key])[idx].tobytes())
        ntok = np.frombuffer(self._ntok, dtype=np.uint32)[idx]
        out._ntok = array("I", ntok.tobytes())
        out._tok = self._events_of(idx)
        out._extras = {}
        if self._extras:
            keys = np.fromiter(self._extras, dtype=np.int64, count=len(self._extras))
            for k in np.nonzero(np.isin(idx, keys))[0]:     # a record may be chosen twice
                out._extras[int(k)] = self._extras[int(idx[k])]
        return out

    def reorder(self, idx: Sequence[int] | np.ndarray) -> None:
        """Put the records in the order ``idx`` (a permutation of them all), in place and one
        column at a time: at most one column's copy is alive, where ``take`` makes a second
        store (a million records that arrived from several workers, put in order of ``done``:
        150 MB more)."""
        import numpy as np
        idx = np.asarray(idx, dtype=np.int64)
        n = len(self._ntok)
        if len(idx) != n:
            raise ValueError("reorder needs a permutation of every record")
        # Only the records that move are written again: a run's own records come in order of
        # ``done`` but for a few neighbours (200,000 requests of one process: 793 moved, none
        # by more than 29 places), and a full copy of each column is 8 MB at a million
        step = 1 << 16
        moved = np.concatenate([np.flatnonzero(idx[c:c + step] != np.arange(c, min(c + step, n)))
                                + c for c in range(0, n, step)] or [np.zeros(0, np.int64)])
        if not len(moved):
            return
        src = idx[moved]
        # the token events first (the largest), a block of records at a time
        self._tok = self._events_of(idx, release=True)
        # a column of one value so far keeps it: fold the values appended since the last look
        # (up to 65,535 of them) into its head first, or it would be written out whole
        self.compact()
        lo = int(min(moved.min(), src.min()))
        for key, arr in [*self._keys(), (("ntok", ""), self._ntok)]:
            head = self._head.get(key)
            if head is not None:
                if not len(arr):
                    continue                   # one value throughout: any order is the same
                if lo >= head[1]:              # every move is among the values after the run
                    a = np.frombuffer(arr, dtype=arr.typecode)
                    a[moved - head[1]] = a[src - head[1]]
                    del a
                    continue
                full = self._full(key, arr)    # a run of one value, then the rest
                del self._head[key]
                self._varied.add(key)
                del arr[:]
                arr.frombytes(full[idx].tobytes())
                del full
            elif len(arr):
                a = np.frombuffer(arr, dtype=arr.typecode)
                a[moved] = a[src]
                del a
        if self._extras:
            where = dict(zip(src.tolist(), moved.tolist()))     # old place -> new
            self._extras = {where.get(i, i): e for i, e in self._extras.items()}
        self._offsets = None

    def select(self, mask: np.ndarray) -> "RecordStore":
        import numpy as np
        return self.take(np.nonzero(mask)[0])

    def nbytes(self) -> int:
        """Bytes held by the columns and the extras (for the memory-bound test)."""
        arrays = [arr for _, arr in self._keys()] + [self._ntok]
        total = sum(a.buffer_info()[1] * a.itemsize for a in arrays) + self._tok.nbytes()
        return total + sum(_deep_size(e) for e in self._extras.values())

    @classmethod
    def of(cls, records: Iterable[Record]) -> "RecordStore":
        """``records`` as a store (the same object when it already is one)."""
        if isinstance(records, RecordStore):
            return records
        store = cls()
        store.extend(records)
        return store


_COMPACT_EVERY = 1 << 16     # appends between looks for columns of one value
_ITER_EVENTS = 1 << 15       # token events decoded at once when iterating
_INT_RANGES = tuple(_INT_RANGE[c] for c in _INTS.values())
_INT_NONES = tuple(_NONE_I if c == "i" else _NONE_H for c in _INTS.values())
_UNSPLIT = object()


def _split_id(s: Any) -> tuple[Any, int]:
    """"run-12" -> ("run-", 12); a string without a plain trailing number -> (s, -1);
    None -> (None, -1). Anything else cannot be stored in the columns."""
    if s is None:
        return None, -1
    if type(s) is not str:
        return _UNSPLIT, -1
    head = s.rstrip("0123456789")
    digits = s[len(head):]
    if digits and (digits == "0" or digits[0] != "0") and len(digits) <= 9:
        return head, int(digits)
    return s, -1


def _deep_size(obj: Any) -> int:
    import sys
    size = sys.getsizeof(obj)
    if isinstance(obj, dict):
        size += sum(_deep_size(k) + _deep_size(v) for k, v in obj.items())
    elif isinstance(obj, (list, tuple)):
        size += sum(_deep_size(v) for v in obj)
    return size


def by_done(stores: Sequence[RecordStore]) -> RecordStore:
    """The records of several stores in one, ordered by when each finished (stable); one store
    is put in that order where it is and returned."""
    import numpy as np
    if len(stores) == 1:
        store = stores[0]
    else:
        store = RecordStore()
        for s in stores:
            store.extend(s)
    trim_heap()                 # the run's Records are gone; their memory need not stay
    store.compact()             # what reads the run's records next reads one-value columns free
    done = store.view("done")
    if len(done) < 2 or bool(np.all(done[1:] >= done[:-1])):
        return store
    # in place, also when it is one session's own store: nothing reads a run's records in
    # the order they arrived, and a copy of a million-record store is 150 MB more
    order = np.argsort(done, kind="stable")
    del done                    # a view: the store is reordered after it is gone
    store.reorder(order)
    return store

"""The x-request-id llmbench sends: a UUID every server's parser takes, that gives the record's
id back (the mock's log and reply words are keyed by it)."""

import re
import uuid

from llmbench.records.ids import MAX_CHARS, header_id, id_of

UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")


def test_llmbench_ids_travel_as_version_4_uuids_and_come_back():
    for rid in ("28618-1", "28618-123456", "preflight", "28618w12-1234567", "rt-5", "dr-a12",
                "r-1", "A-Z-9", "x" * MAX_CHARS):
        h = header_id(rid)
        # the strictest readers: an RFC 4122 version 4 pattern, and uuid.UUID as
        # starlette-context (llama-cpp-python's server) reads it, without changing it
        assert UUID4.match(h), (rid, h)
        assert str(uuid.UUID(h, version=4)) == h
        assert uuid.UUID(h).variant == uuid.RFC_4122 and uuid.UUID(h).version == 4
        assert id_of(h) == rid
        assert header_id(rid) == h                  # the same id, the same header


def test_ids_that_do_not_fit_are_hashed_and_never_read_back_wrong():
    for rid in ("x" * (MAX_CHARS + 1), "a_b", "ü-1", ""):
        h = header_id(rid)
        assert UUID4.match(h) and id_of(h) is None, rid
    assert header_id("a_b") != header_id("a_c")


def test_other_values_are_not_taken_for_ours():
    assert id_of("preflight") is None and id_of("28618-1") is None and id_of("") is None
    assert id_of("00000000-0000-4000-8000-000000000000") is None
    # another client's UUID4 with a variant digit other than 8 is never ours
    assert id_of("6f1c2b3a-1d2e-4f50-9a6b-7c8d9e0f1a2b") is None
    # an id read back has only llmbench's characters
    for _ in range(200):
        got = id_of(str(uuid.uuid4()))
        assert got is None or re.fullmatch(r"[0-9a-zA-Z-]{1,20}", got)

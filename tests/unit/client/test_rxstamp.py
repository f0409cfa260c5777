"""client.rxstamp's conversion of the kernel's realtime receive stamps to perf_counter time."""

from __future__ import annotations

import time

from llmbench.client import rxstamp


def test_a_kernel_stamp_converts_to_the_monotonic_time_it_was_taken_at():
    off = rxstamp._Offset()
    real, mono = time.time_ns(), time.perf_counter()
    now = mono + 0.010                              # read 10 ms after it arrived
    t = off.arrival(real, now)
    assert abs(t - mono) < 0.002, (t - mono)        # the clocks' offset, not the read time


def test_a_converted_time_is_never_after_the_read():
    off = rxstamp._Offset()
    off.measure()
    now = time.perf_counter()
    # a stamp in the future (a realtime step back since the offset was measured)
    assert off.arrival(time.time_ns() + 5 * 10**9, now) == now


def test_a_stamp_older_than_any_queue_falls_back_to_the_read_time():
    off = rxstamp._Offset()
    now = time.perf_counter()
    old = time.time_ns() - int((rxstamp.MAX_AGE_S + 5) * 1e9)      # a realtime step forward
    assert off.arrival(old, now) == now


def test_the_offset_is_measured_again_after_a_second():
    off = rxstamp._Offset()
    off.measure()
    off.ns += 10**9                                 # as if realtime stepped since
    at = off.at
    now = at + rxstamp.OFFSET_EVERY_S + 0.5
    off.arrival(time.time_ns(), now)
    assert off.at > at and abs(off.ns - (time.time_ns() - time.perf_counter_ns())) < 10**7

"""Worker processes: one run's plan split over N workers, each with its own event loop and
client, records streamed back to one coordinator (``run/ramp/probe --workers N|auto``).

THE SEAM (what a second launcher, e.g. Ray actors across machines, implements against)
=====================================================================================

Three pieces, all in ``llmbench.workers.protocol``:

1. ``WorkerSpec``: everything one worker needs (its id, its ``plan`` from plan.py, the targets,
   request params and timeouts, the reply counter's tokenizer spec, ``clock_offset_s``),
   picklable: nothing in it is a socket, a closure or an open file.

2. The worker entry: ``await llmbench.workers.worker.worker_main(spec, channel)`` (async: a Ray
   async actor awaits it in its own loop), or ``run_worker(spec, channel)`` (sync, a fresh
   event loop). ``channel`` is any object with
       ``send(msg: dict) -> None``        worker -> coordinator, never blocks for long
       ``async recv() -> dict | None``    coordinator -> worker; None: the coordinator is gone
   The worker returns when its plan is done (or it was stopped); it never raises: a failure is
   sent as an ``error`` message, then it returns.

3. ``Launcher`` (one method): ``launch(spec) -> WorkerLink``. A ``WorkerLink`` is the
   coordinator's end: ``worker_id``, ``clock_offset_s``, ``send(msg)``,
   ``async recv() -> dict | None`` (None: the worker is gone, crashed or exited),
   ``exit_note() -> str`` (why it is gone, e.g. "exit code -9"), ``kill()``, and
   ``async close()`` (wait for a clean exit, then kill).
   ``llmbench.workers.local.LocalLauncher`` runs workers as processes on this machine.

Messages are plain dicts of plain values (str, int, float, bool, None, lists, dicts): they
pickle, and they could be JSON. Every message has ``type`` and (from a worker) ``worker``.

  worker -> coordinator
    {"type": "ready"}                      clients made, warm-up done: waiting for "go"
    {"type": "records", "clock": "worker", "records": [Record.to_json() dicts]}  batched
    {"type": "live", "counters": {started, done, failed, in_flight, events, cancelled},
     "target": name}                        absolute counters of this worker, per target
    {"type": "monitor", "clock": "worker", "sample": {t, lag_p99_ms, lag_max_ms, cpu_pct}}
                                           (the coordinator adds its own, tagged "coordinator")
    {"type": "users", "clock": "worker", "t": float, "delta": +1 | -1}   (ramp)
    {"type": "reply", "id": int, "value": ...}   the answer to a "call"
    {"type": "done", "clock": "worker", "result": float | None, "interrupted": bool}
    {"type": "error", "error": "one line"}     then the worker returns
  coordinator -> worker
    {"type": "go", "clock": "coordinator", "t0": float}   dispatch starts at t0
    {"type": "call", "id": int, "op": str, "args": {...}, "clock": "coordinator"}
    {"type": "stop", "now": bool}    stop starting requests; in-flight ones get grace_s
                                     (now: cancel them at once, recorded as interrupted)
    {"type": "end"}                  a remote-controlled plan (ramp, probe) is over

CLOCKS. Every time is ``time.perf_counter()`` seconds of some process; a message with times
says which clock (``"clock": "worker"`` or ``"coordinator"``). ``clock_offset_s`` is defined
by ``coordinator_time = worker_time + clock_offset_s``. On one host perf_counter is
CLOCK_MONOTONIC, shared by all processes, so the offset is 0. The worker converts times it
receives (t0, ramp-in starts, hold windows) to its clock with the spec's offset; the
coordinator converts a worker's times with the link's offset: records are shifted as a whole,
so a request's own latencies never mix clocks. Records carry ``worker`` (their worker's id).

Batching: a worker sends its records at least every ``FLUSH_S`` or every ``BATCH`` records,
and always before a "reply" and before "done" (the pipe keeps order, so the coordinator has
every record of a window before it hears that the window's requests finished).

Load layer: this package never imports metrics, stats, thresholds, verdicts or reports.
"""

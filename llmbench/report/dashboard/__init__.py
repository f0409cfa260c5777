"""``--dashboard [HOST:]PORT``: a page llmbench serves itself while a run, ramp, sweep or probe
goes, updated every second over Server-Sent Events, and the run's report.html when it ends.
docs/watching.md ("How it works") has the design and what it was measured to cost.

Two processes, so that watching never changes what is measured: this one (the load generator)
only appends each finished record to a deque on its event loop (``observe``), and a feeder
thread (handle.py) sends per-second numbers (feed.py) to the dashboard's own process
(server.py), which draws the report's charts only while somebody watches: building a long run's
chart costs tens of ms of CPU, which here would hold the interpreter lock the event loop needs.

One dashboard per command: a sweep's ramps and ``--repeat``'s repeats share it (``shared``); the
command line keeps it up after the end until Ctrl-C or ``--dashboard-linger`` (``linger``); in
Python it stays up until the interpreter exits, and the next run with a dashboard reuses it.
"""

"""``--dashboard [HOST:]PORT``: a page llmbench serves itself while a run, ramp, sweep or probe
goes, updated every second over Server-Sent Events, and the run's report.html when it ends.

Two processes, so that watching never changes what is measured:

- this one (the load generator) only appends each finished record to a deque on its event loop
  (``observe``, as the Prometheus exporter and the terminal view do); a feeder thread drains it
  once a second into per-second numbers (``feed.LiveSeries``) and reads the live state the
  harness keeps (``load.observe.LiveNow``), and sends a small JSON line to
- the dashboard's own process (``python -m llmbench.report.dashboard.server``), which keeps the
  run's rows, builds the charts from the HTML report's descriptions (report/charts.py), serves
  the page, its script and its events, and, when the run ends, report.html itself.

Building a chart costs 10-100 ms of CPU (a long run's timeline): in this process it would hold
the interpreter's lock that the event loop needs, so it happens there, on the other core, only
while somebody watches (scripts/bench_client_accuracy.py --dashboard measures the cost).

One dashboard per command: a sweep's ramps and ``--repeat``'s repeats share it (``shared``); the
command line keeps it up after the end until Ctrl-C or ``--dashboard-linger`` (``linger``); in
Python it stays up until the interpreter exits, and the next run with a dashboard reuses it.
"""

"""Every formula and judgement over records: pure functions, no I/O beyond reading a run folder.

stats and metrics (the summary), stepstats (a ramp step), slo (thresholds), verdict and outages
(why a step broke), timeline, backends, checks (what the client saw), prefix_hit,
router_ab (router versus direct), compare (two runs), recover (a summary rebuilt from the log).
"""

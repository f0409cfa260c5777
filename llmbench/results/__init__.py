"""The result contract: what a run is, as the typed objects the pipeline builds and every reader
loads (schema: Run, Step, Check, Summary, Metric, Verdict; Run.save and Run.load), how a typed
field is a key of run.json (contract), the JSON files (jsonfile), the run folder (folder) and
the per-request columns a report reads back (latencies, table)."""

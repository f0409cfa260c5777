"""The run folder: written once, read by every report (folder: run.json, the folder list;
latencies: the per-request columns a report reads back)."""

"""What a report reads from a run folder: see ``llmbench.rundata`` (below both the reports and
``compare``, so neither imports the other's package)."""

from ..rundata import Latencies, load, read_jsonl, read_latencies

__all__ = ["Latencies", "load", "read_jsonl", "read_latencies"]

"""Reports: consumers of records and summaries (console now; HTML and compare build on them)."""

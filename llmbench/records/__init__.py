"""The per-request Record and its append-only log (record), its token event times
(token_events), and the column store a summary reads (store)."""

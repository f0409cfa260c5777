"""Exit codes, documented in the README. A module of their own so the CLI imports nothing heavy."""

EXIT_OK = 0
EXIT_EXPECTATION = 1      # ramp --expect-users: fewer held; compare --max-regression: a regression
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_OVERLOADED = 4
EXIT_REFUSED = 5
EXIT_WRITE = 6            # the results could not be written (disk full, file too large, read-only)
EXIT_INTERRUPTED = 130
# a threshold failed, as k6 does: `run --threshold` breached, or a ramp whose first step did not
# hold (no load level met the thresholds)
EXIT_THRESHOLD = 99

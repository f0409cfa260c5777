"""What went wrong, as exit codes (documented in the README) and as exceptions. A module of its
own, below every other, so the CLI and every layer import nothing heavy to name a failure."""

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


class UsageError(Exception):
    """A bad flag value; the message is one line for the user."""

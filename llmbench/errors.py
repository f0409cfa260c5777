"""What went wrong, as exit codes (docs/exit-codes.md) and as exceptions. A module of its own,
below every other, so the CLI and every layer import nothing heavy to name a failure."""

EXIT_OK = 0
EXIT_EXPECTATION = 1      # ramp --expect-users: fewer held; compare --max-regression: a regression
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_OVERLOADED = 4
EXIT_REFUSED = 5
EXIT_WRITE = 6            # the results could not be written (disk full, file too large, read-only)
EXIT_NOT_JUDGED = 7       # nothing could be judged: every step (setting) had too few requests
EXIT_INTERRUPTED = 130
EXIT_THRESHOLD = 99       # a threshold failed (k6's code)


class LlmbenchError(Exception):
    """Every failure llmbench reports to a library caller; ``exit_code`` is what the command
    line exits with for it, ``str(exc)`` the one line it prints after ``error:``."""

    exit_code = 1


class UsageError(LlmbenchError):
    """A bad option value (a flag, a keyword of the Python API, a key of a --config file); the
    message is one line for the user, the same one the command line prints."""

    exit_code = EXIT_USAGE


class ServerUnreachable(LlmbenchError):
    """The server did not answer (refused connection, DNS, timeout, wrong URL or model), before
    anything was measured."""

    exit_code = EXIT_UNREACHABLE


class ServerRefused(LlmbenchError):
    """The server answered but refused the work (authentication, a bad request) before anything
    was measured."""

    exit_code = EXIT_REFUSED


class CommandFailed(LlmbenchError):
    """Any other failure, with its exit code (a Ray cluster not joined, a mock not listening)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class RunFailed(LlmbenchError):
    """A run that started but did not end as a result: the results could not be written, it was
    interrupted, or a worker process died. ``run`` is what was measured (a ``Run``, or None)."""

    def __init__(self, message: str, exit_code: int, run: object = None) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.run = run


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP outside the load (which handles them as Ctrl-C): raised in the main
    thread as Ctrl-C's KeyboardInterrupt is, so a command ends the same way for all three
    (its run.json marked, what it skipped said). ``signal``: the signal's name."""

    def __init__(self, signal: str = "SIGINT") -> None:
        super().__init__(signal)
        self.signal = signal


def failure(message: str, exit_code: int) -> LlmbenchError:
    """The exception for a failure the command line reports as ``message`` and ``exit_code``."""
    kinds = {EXIT_USAGE: UsageError, EXIT_UNREACHABLE: ServerUnreachable,
             EXIT_REFUSED: ServerRefused}
    cls = kinds.get(exit_code)
    return cls(message) if cls is not None else CommandFailed(message, exit_code)

"""What a command prints last, fitted to the screen it is printed on.

A terminal wraps a long line wherever its last column falls ("req" / "uest(s)") and scrolls
off what came first: the steps table and the answer. So on a terminal every line is wrapped at
word boundaries to its width, and a command's closing block is cut to the rows left under its
table: what must stay (``KEEP``) always does; the evidence and the notes are left out from the
least needed on, and one line says how many and where they are (the report, or ``--verbose``).
Printed to a file or a pipe, nothing scrolls: every line is kept, unwrapped.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from dataclasses import dataclass
from typing import IO, Sequence

# how soon a part may be left out to fit the screen: 0 never; the highest first
KEEP = 0          # the headline, why, what to change, warnings, the folder
CLASSES = 1       # each class's state (--scenario)
EVIDENCE = 2      # the verdict's evidence, the search's steps
DETAIL = 3        # the knee, steady-state notes
NOTE = 4          # the notes: the server, prompt counts, the cache, the closed loop


@dataclass
class Part:
    """One line (or paragraph) of a closing block: its text, how soon it may be left out to
    fit (``KEEP``: never), and whether it goes to stderr (a warning ``--quiet`` keeps)."""

    text: str
    drop: int = KEEP
    err: bool = False


def terminal(stream: IO[str] | None = None) -> tuple[int, int] | None:
    """(columns, rows) of the terminal ``stream`` (stdout) is, or None for a file or a pipe."""
    stream = sys.stdout if stream is None else stream
    try:
        if not stream.isatty():
            return None
    except (AttributeError, ValueError):      # a closed or replaced stream
        return None
    size = shutil.get_terminal_size((80, 24))
    return max(size.columns, 20), max(size.lines, 5)


def wrap(text: str, width: int | None) -> list[str]:
    """``text``'s lines wrapped at word boundaries to ``width`` (None: as they are). A wrapped
    line's next rows are indented two more than its own indent, so a paragraph reads as one;
    a word longer than the width (a URL, a path) is kept whole on its own row, never cut."""
    lines = text.split("\n")
    if width is None:
        return lines
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = len(line) - len(line.lstrip(" "))
        hang = " " * min(indent + 2, width // 2)
        out += textwrap.wrap(line.strip(" "), width=width, initial_indent=" " * indent,
                             subsequent_indent=hang, break_long_words=False,
                             break_on_hyphens=False) or [""]
    return out


def rows_of(text: str, width: int | None) -> int:
    return len(wrap(text, width))


def more_line(n: int) -> str:
    return (f"({n} more line{'s' if n != 1 else ''} of evidence and notes: in report.html, "
            "or here with --verbose)")


def fit(parts: Sequence[Part], width: int | None, rows: int | None) -> tuple[list[Part], int]:
    """The parts to print so that they take at most ``rows`` rows (None: all of them), and how
    many rows were left out. Parts are left out from the highest ``drop`` down, the last of
    equals first, never a ``KEEP`` one; when any is, a row is kept for ``more_line``."""
    kept = list(parts)
    if rows is None:
        return kept, 0
    sizes = [rows_of(p.text, width) for p in kept]
    total = sum(sizes)
    if total <= rows:
        return kept, 0
    left_out = 0
    budget = rows - 1                          # the "N more lines" row
    order = sorted((i for i, p in enumerate(kept) if p.drop != KEEP),
                   key=lambda i: (-kept[i].drop, -i))
    dropped: set[int] = set()
    for i in order:
        if total <= budget:
            break
        dropped.add(i)
        total -= sizes[i]
        left_out += sizes[i]
    return [p for i, p in enumerate(kept) if i not in dropped], left_out


def show(parts: Sequence[Part], rows_used: int = 0, verbose: bool = False,
         stream: IO[str] | None = None) -> None:
    """Print a closing block: on a terminal wrapped to its width and (unless ``verbose``) cut
    to the rows left under the ``rows_used`` already on screen, less two: the shell's prompt
    line after it, and the row the live view's last redraw leaves (measured in an 80x30 tmux:
    the table's header scrolled off by one without it); elsewhere every part as it is."""
    out = sys.stdout if stream is None else stream
    size = terminal(out)
    width = size[0] if size is not None else None
    rows = None if size is None or verbose else max(size[1] - rows_used - 2, 0)
    kept, left_out = fit(parts, width, rows)
    shown_more = False
    for p in kept:
        if left_out and not shown_more and p.drop == KEEP and p.text.startswith("Results: "):
            # said just above the folder, which stays the last line
            print("\n".join(wrap(more_line(left_out), width)), file=out, flush=True)
            shown_more = True
        target = sys.stderr if p.err else out
        print("\n".join(wrap(p.text, width if not p.err else _width(sys.stderr))),
              file=target, flush=True)
    if left_out and not shown_more:
        print("\n".join(wrap(more_line(left_out), width)), file=out, flush=True)


def _width(stream: IO[str]) -> int | None:
    size = terminal(stream)
    return size[0] if size is not None else None


def say(text: str, stream: IO[str] | None = None) -> int:
    """Print ``text`` wrapped to the terminal (as it is elsewhere); the rows it took."""
    out = sys.stdout if stream is None else stream
    width = _width(out)
    lines = wrap(text, width)
    print("\n".join(lines), file=out, flush=True)
    return len(lines)

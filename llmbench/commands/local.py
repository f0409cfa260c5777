"""No --url: measure the server on this machine, if one answers (servers/local.py), else the
demo on the built-in mock. One place for run, ramp and sweep: each command's ``perform`` starts
with ``spec = with_local_server(spec)``, so what it measures is what --url would have named
(the server's defaults, its URL in config.toml)."""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar

from llmbench.commands.options import UsageError
from llmbench.commands.spec import say

S = TypeVar("S")


def with_local_server(spec: S, needed: bool = False) -> S:
    """``spec`` with the URL (and, without --model, the model) of the first local server
    found; unchanged with --url, --demo, or nothing found. ``needed``: nothing found is an
    error (sweep --before has no mock to fall back on)."""
    s: Any = spec
    if getattr(s, "url", None) or getattr(s, "demo", False):
        return spec
    from llmbench.servers import local
    try:
        found = local.find()
    except local.PortsError as exc:
        raise UsageError(str(exc)) from None
    if not found:
        if needed:
            raise UsageError("no --url, and no LLM server answered on this machine's usual "
                             f"ports ({local.ORDER_TEXT}): give --url")
        return spec
    pick = found[0] if s.model else next((f for f in found if f.model), None)
    if pick is None:
        raise UsageError(f"no --url: found {'; '.join(f.brief() for f in found)}, but no chat "
                         "model is served there: load one, or give --url and --model "
                         "(--demo runs the built-in mock)")
    say(local.first_line([pick]))
    others = [pick] + [f for f in found if f is not pick]
    line = local.others_line(others)
    if line:
        say(line)
    return dataclasses.replace(s, url=pick.url, model=s.model or pick.model)

"""No --url: measure the server on this machine, if one answers (servers/local.py), else the
demo on the built-in mock. One place for run, ramp, sweep, chat, context and probe: each
command's ``perform`` starts with ``spec = with_local_server(spec)`` (probe: ``local_server``
for its --direct), so what it measures is what --url would have named (the server's defaults,
its URL in config.toml). ``llmbench servers`` lists what that look finds."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any, TypeVar

from llmbench.commands.spec import MaybeMock, make_target, prepare, say
from llmbench.errors import UsageError
from llmbench.specs.report import ServersSpec

S = TypeVar("S")


def perform_servers(spec: ServersSpec | None = None) -> list[Any]:
    """``llmbench servers``: the servers found on this machine's usual ports, the one a
    command with no --url would measure first."""
    from llmbench.servers import local
    try:
        return local.find()
    except local.PortsError as exc:
        raise UsageError(str(exc)) from None


def local_server(model: str | None, needed: bool, flag: str = "--url") -> Any:
    """The first server found here that serves a chat model (any, with ``model`` given),
    said in one line and the others in another; None when nothing answers (an error when
    ``needed``)."""
    from llmbench.servers import local
    found = perform_servers()
    if not found:
        if needed:
            raise UsageError(f"no {flag}, and no LLM server answered on this machine's usual "
                             f"ports ({local.ORDER_TEXT}): give {flag}")
        return None
    pick = next((f for f in found if f.model or (model and not f.note)), None)
    if pick is None:
        raise UsageError(f"no {flag}: found {'; '.join(f.brief() for f in found)}, but no "
                         f"chat model is served there: load one, or give {flag} and --model")
    say(local.first_line([pick], flag))
    line = local.others_line([pick] + [f for f in found if f is not pick])
    if line:
        say(line)
    return pick


def with_local_server(spec: S, needed: bool = False) -> S:
    """``spec`` with the URL (and, without --model, the model) of the first local server
    found; unchanged with --url, --demo, or nothing found. ``needed``: nothing found is an
    error (sweep --before has no mock to fall back on)."""
    s: Any = spec
    if getattr(s, "url", None) or getattr(s, "demo", False):
        return spec
    pick = local_server(s.model, needed)
    if pick is None:
        return spec
    return dataclasses.replace(s, url=pick.url, model=s.model or pick.model)


def lines(found: list[Any]) -> list[str]:
    """What ``llmbench servers`` prints: one block per server, 80 columns at most."""
    from llmbench.servers import local
    if not found:
        return [f"no LLM server answered on this machine's usual ports ({local.ORDER_TEXT}); "
                "give --url, or run the demo: llmbench ramp --demo"]
    out = []
    measured = next((f for f in found if f.model), None)
    for f in found:
        if f.note:
            out.append(f"{f.root}  {f.note}")
            continue
        head = f"{f.root}  {f.name}" + ("  (the one measured)" if f is measured else "")
        out.append(head)
        if f.models:
            shown = ", ".join(f.models[:6]) + (f", ... ({len(f.models)} in all)"
                                                if len(f.models) > 6 else "")
            out.append(f"    models: {shown}")
        else:
            out.append("    models: none listed")
        if f.loaded:
            out.append(f"    loaded: {', '.join(f.loaded[:6])}")
        facts = []
        if f.model:
            facts.append(f"its chat model: {f.model}")
        facts.append(f"slots {f.slots}" if f.slots else "slots not said")
        facts.append(f"context {f.context} tokens" if f.context else
                     f"the model takes up to {f.context_max} tokens" if f.context_max else
                     "context not said")
        out.append("    " + "; ".join(facts))
    return out


@contextlib.contextmanager
def one_server(opts: Any, no_embeddings: str) -> Any:
    """chat and context: the spec (no --url: a server on this machine, else the mock), its
    target, request and timeouts; an embeddings API refused with ``no_embeddings``."""
    from llmbench import wire
    spec = with_local_server(opts)
    prepare(spec)
    with MaybeMock(spec.url, demo=spec.demo) as (url, model):
        tgt = make_target(spec, url, spec.model or model)
        if wire.get(tgt.api).output == "embeddings":
            raise UsageError(f"--api {tgt.api}: {no_embeddings}")
        params, timeouts = spec.build_request(api=tgt.api)
        yield spec, tgt, params, timeouts

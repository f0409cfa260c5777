"""``llmbench servers``: the LLM servers on this machine's usual ports, what each is and
serves (servers/local.py); the same look run, ramp and sweep take with no --url."""

from __future__ import annotations

from typing import Any

from llmbench.errors import UsageError
from llmbench.specs.report import ServersSpec


def perform_servers(spec: ServersSpec) -> list[Any]:
    """The servers found, the one a command with no --url would measure first."""
    from llmbench.servers import local
    try:
        return local.find()
    except local.PortsError as exc:
        raise UsageError(str(exc)) from None


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

"""``llmbench servers``'s spec: it has no options (what it does: llmbench/commands/servers.py)."""

from __future__ import annotations

import dataclasses

from llmbench.specs.options import Spec


@dataclasses.dataclass(kw_only=True)
class ServersSpec(Spec):
    """``llmbench servers``: every server found (engine, version, models, slots, context),
    the one a command with no --url would measure first."""

    command = "servers"

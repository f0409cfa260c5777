"""Every command accepts the options it declares, on every Python the package claims.

On Python 3.10, ``typing.get_type_hints`` once turned ``group: TargetOpts = None`` into
``Optional[TargetOpts]``, so option groups were passed to typer as one option each (``run``
took ``--output <OutputOpts>`` instead of ``--out``; ``ramp`` crashed). The expected names are
the fixture; ``scripts/check_pythons.py`` runs the same comparison on the other interpreters.
"""

import importlib.util
import json
from pathlib import Path

from tests.helpers import ROOT  # noqa: E402


def _cli_options():
    spec = importlib.util.spec_from_file_location("cli_options", ROOT / "scripts" / "cli_options.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_command_accepts_the_expected_option_names():
    mod = _cli_options()
    got = mod.option_names()
    want = json.loads(mod.FIXTURE.read_text())
    assert not mod.differences(got, want), (
        "option names changed; if on purpose, run: python scripts/cli_options.py --write\n"
        + "\n".join(mod.differences(got, want)))
    # the groups reached every command that uses them
    for cmd in ("run", "ramp", "probe", "sweep"):
        assert {"--out", "--label"} <= set(got[cmd]), cmd
    for cmd in ("run", "ramp"):
        assert {"--url", "--model", "--api-key"} <= set(got[cmd]), cmd
    assert not any(n in got[c] for c in got for n in ("--output-opts", "--target", "--workload-opts"))
    # --workload is an option (chat | agent, AgentOpts.workload_type), not the group's name
    assert "--workload-type" not in got["ramp"] and "--workload" in got["ramp"]


def test_a_spec_reaches_typer_as_its_fields_never_as_one_value():
    """The command line is built from the specs' field metadata (cli/options.py: spec_command):
    no annotation is evaluated, so no interpreter can wrap a group in Optional and hand typer the
    group as one option (what Python 3.10 once did, issue 30)."""
    import dataclasses
    from llmbench.cli.app import commands
    got = _cli_options().option_names()
    for name, (spec, *_rest) in commands().items():
        flags = {d.split("/")[0] for f in dataclasses.fields(spec) for d in
                 (f.metadata["opt"].decls or ("--" + f.name.replace("_", "-"),))
                 if not f.metadata["opt"].argument}
        assert flags <= set(got[name]), (name, flags - set(got[name]))

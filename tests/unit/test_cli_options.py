"""Every command accepts the options it declares, on every Python the package claims.

On Python 3.10, ``typing.get_type_hints`` once turned ``group: TargetOpts = None`` into
``Optional[TargetOpts]``, so option groups were passed to typer as one option each (``run``
took ``--output <OutputOpts>`` instead of ``--out``; ``ramp`` crashed). The expected names are
the fixture; ``scripts/check_pythons.py`` runs the same comparison on the other interpreters.
"""

import importlib.util
import json
from pathlib import Path

import pytest

from llmbench.cli.options import OptionGroup, TargetOpts, _group_class

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


@pytest.mark.parametrize("ann", [TargetOpts, "Optional", "Union"])
def test_a_group_is_found_whether_or_not_python_wrapped_it_in_optional(ann):
    import typing
    wrapped = {"Optional": typing.Optional[TargetOpts],
               "Union": typing.Union[TargetOpts, None]}.get(ann, ann)
    assert _group_class(wrapped) is TargetOpts


def test_non_groups_are_not_taken_for_groups():
    import typing
    assert _group_class(typing.Optional[str]) is None
    assert _group_class(typing.Union[TargetOpts, int]) is None
    assert _group_class(int) is None and _group_class(OptionGroup) is OptionGroup

"""The README's Python API example, as the README shows it (tests run it and type-check it)."""

from __future__ import annotations

import re

from tests.helpers import ROOT


def python_example() -> str:
    """The first ```python block under '## Python API'."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("\n## Python API\n", 1)[1]
    m = re.search(r"```python\n(.*?)```", section, re.S)
    assert m, "README.md: no ```python block under ## Python API"
    return m.group(1)

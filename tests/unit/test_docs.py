"""The documentation follows the code: ARCHITECTURE.md's map names every top-level entry of
llmbench/ in layer order, and no link or source path in the docs points at nothing.

1. Every top-level package and module of ``llmbench/`` (read from the tree, as
   tests/unit/test_architecture.py reads it) has a line in the map (the code block under
   ARCHITECTURE.md's "## Map"), and the map lists them in ``LAYERS`` order, lowest first. A new
   package fails here until it has its line (and its place in LAYERS).
2. Every relative link in README.md, ARCHITECTURE.md and docs/*.md points to a file or folder
   that exists, and a ``#anchor`` to a heading of that page.
3. Every ``llmbench/...py`` (and ``mock_server/``, the deprecated shim, ``scripts/``, ``tests/``)
   path they mention exists.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from tests.helpers import ROOT  # noqa: E402
from tests.helpers.layers import LAYERS, PACKAGE

MAP_ENTRY = re.compile(r"^([A-Za-z_][\w]*)(/|\.py)(?=\s|$)")


def docs() -> list[Path]:
    return [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *sorted((ROOT / "docs").glob("*.md"))]


def top_level_entries() -> set[str]:
    """The packages and modules at the top of llmbench/, as test_architecture names them."""
    return {p.stem if p.suffix == ".py" else p.name for p in (ROOT / PACKAGE).iterdir()
            if (p.suffix == ".py" or (p / "__init__.py").exists())}


def map_entries(text: str) -> list[str]:
    """The names the map gives a line to, in order: ``records/`` -> records, ``errors.py`` -> errors."""
    section = text.split("\n## Map", 1)[1].split("\n## ", 1)[0]
    block = section.split("```", 2)[1]
    return [m.group(1) for line in block.splitlines() if (m := MAP_ENTRY.match(line))]


def map_problems(entries: set[str], mapped: list[str]) -> list[str]:
    problems = [f"no line in ARCHITECTURE.md's map for llmbench/{e}" for e in sorted(entries - set(mapped))]
    problems += [f"the map names {m!r}, which is neither in llmbench/ nor in LAYERS"
                 for m in mapped if m not in entries and m not in LAYERS]
    order = [m for m in mapped if m in LAYERS]
    if order != sorted(order, key=LAYERS.index):
        problems.append(f"the map's order {order} is not LAYERS' {[e for e in LAYERS if e in order]}")
    if len(set(mapped)) != len(mapped):
        problems.append(f"the map names an entry twice: {mapped}")
    return problems


def test_the_map_names_every_top_level_entry_in_layer_order():
    mapped = map_entries((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    assert len(mapped) >= len(top_level_entries())
    problems = map_problems(top_level_entries(), mapped)
    assert not problems, "\n".join(problems)


def test_a_new_package_without_a_map_line_fails():
    mapped = map_entries((ROOT / "ARCHITECTURE.md").read_text(encoding="utf-8"))
    assert map_problems(top_level_entries() | {"exporters"}, mapped) == \
        ["no line in ARCHITECTURE.md's map for llmbench/exporters"]
    swapped = [mapped[1], mapped[0], *mapped[2:]]
    assert any("order" in p for p in map_problems(top_level_entries(), swapped))
    assert map_problems(top_level_entries(), [*mapped, "stale"])


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code (where brackets are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    h = re.sub(r"`|\*\*|\[([^\]]*)\]\([^)]*\)", r"\1", heading.strip().lower())
    h = "".join(c for c in h if c in " -_" or unicodedata.category(c)[0] in "LN")
    return h.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    out: set[str] = set()
    for line in re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M).splitlines():
        if m := re.match(r"#{1,6}\s+(.*)", line):
            s, n = slug(m.group(1)), 1
            base = s
            while s in out:
                s, n = f"{base}-{n}", n + 1
            out.add(s)
    return out


def links(path: Path) -> list[tuple[int, str]]:
    out = []
    for lineno, line in enumerate(_prose(path.read_text(encoding="utf-8")).splitlines(), 1):
        out += [(lineno, m.group(1)) for m in re.finditer(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", line)]
    return out


def test_every_relative_link_points_to_something():
    problems, seen = [], 0
    for doc in docs():
        for lineno, target in links(doc):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):        # http:, https:, mailto:
                continue
            seen += 1
            where, _, anchor = target.partition("#")
            dest = (doc.parent / where).resolve() if where else doc
            name = f"{doc.relative_to(ROOT)}: {target}"
            if not dest.exists():
                problems.append(f"{name}: no such file")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                problems.append(f"{name}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    assert not problems, "\n".join(problems)
    assert seen >= 10, seen


def test_every_source_path_the_docs_mention_exists():
    problems = []
    for doc in docs():
        for m in re.finditer(r"(?<![\w./-])((?:llmbench|mock_server|scripts|tests)/[\w/.-]*?\.py)\b",
                             doc.read_text(encoding="utf-8")):
            if not (ROOT / m.group(1)).is_file():
                problems.append(f"{doc.relative_to(ROOT)}: {m.group(1)} does not exist")
    assert not problems, "\n".join(problems)


def test_slugs_are_githubs():
    assert slug("Through proxies, TLS and gateways") == "through-proxies-tls-and-gateways"
    assert slug("`llmbench sweep`: which server setting serves more users") == \
        "llmbench-sweep-which-server-setting-serves-more-users"
    assert slug("Server probes (`--server-probe`, on `run`, `ramp` and `probe`)") == \
        "server-probes---server-probe-on-run-ramp-and-probe"

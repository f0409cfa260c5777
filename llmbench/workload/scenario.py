"""Traffic classes in one run (``--scenario FILE``): several kinds of users at once, each with its
workload, its share of the users (or users or a rate of its own) and its own thresholds.

A scenario is a typed value (``Scenario``: its ``TrafficClass``es), built from a TOML, YAML or
JSON file (``from_document``, the file read by ``specs.config``) or given from Python::

    Scenario([TrafficClass("chat", share=0.7, options={"prompt_tokens": "64-256"}),
              TrafficClass("rag", share=0.3, thresholds=["ttft.p95<=4s"],
                           options={"prompt_tokens": 4000, "output_tokens": 64})])

The file (docs/commands.md, "Traffic classes", shows one in TOML): a ``[classes.NAME]`` table
per class (YAML: a mapping of names, or a list of tables with ``name``) holding its load
(``share``, ``users`` or ``rate``; a share's floor ``min_users``), its ``thresholds`` and any
workload or request option, named as on the command line (``--prompt-tokens``,
``prompt-tokens`` or ``prompt_tokens``); ``[defaults]``: what every class has unless it says
otherwise.

A class's workload is its options (``workload = "agent"`` and its agent options: a class of
agents), applied over the command's own, so a new kind of workload is a class the moment the
command has an option for it; nothing here names one. The command says which keys are allowed
(``allowed``: an unknown one is one line naming the file and its line), checks each class's
options and thresholds and names ``Scenario.where(class, key)`` for a bad value: nothing is
parsed here beyond the load (share, users, rate).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Mapping

from llmbench.errors import UsageError

LOAD_KEYS = ("share", "users", "rate")
MIN_KEYS = ("min_users",)
THRESHOLD_KEYS = ("thresholds", "threshold")
MAX_CLASSES = 64
MAX_USERS = 1_000_000
SHARE_TOLERANCE = 1e-6
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]{0,39}$")


def normalize(key: Any) -> str:
    """'--prompt-tokens', 'prompt-tokens', 'prompt_tokens' -> 'prompt_tokens'."""
    return str(key).strip().lstrip("-").replace("-", "_")


@dataclass
class TrafficClass:
    """One kind of user. Its load is exactly one of ``share`` (of the ramp's users at each
    step, or of its rate with ``--by rate``), ``users`` (that many closed-loop users at every
    step) or ``rate`` (open-loop arrivals per second at every step). ``thresholds``: its own
    (None: the command's). ``options``: command options for its workload and requests, by
    their snake_case names."""

    name: str
    share: float | None = None
    users: int | None = None
    rate: float | None = None
    thresholds: list[str] | None = None
    options: dict[str, Any] = field(default_factory=dict)
    # a share class's floor: at least this many users at every step (the others' shares
    # split what is left), so a search's lightest steps still carry every class
    min_users: int | None = None

    def load_text(self) -> str:
        if self.share is not None:
            return f"share {self.share:g}" + (f", at least {self.min_users}"
                                              if self.min_users else "")
        if self.users is not None:
            return f"{self.users} user{'s' if self.users != 1 else ''}"
        return f"{self.rate:g} req/s"

    def describe(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name}
        for k in (*LOAD_KEYS, "min_users"):
            if getattr(self, k) is not None:
                out[k] = getattr(self, k)
        if self.thresholds is not None:
            out["thresholds"] = list(self.thresholds)
        if self.options:
            out["options"] = dict(self.options)
        return out


def _finite(v: int | float) -> bool:
    try:
        return math.isfinite(v)
    except OverflowError:       # an int beyond a float's range (JSON and YAML read any)
        return False


@dataclass
class Scenario:
    """Traffic classes in one run, and where each of their keys was written (for messages)."""

    classes: list[TrafficClass]
    source: str | None = None               # the file it was read from
    # (class name, key) -> line in the file; (name, None): the class's own line
    lines: dict[tuple[str, str | None], int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.check()

    # -- where ---------------------------------------------------------------------------------
    def where(self, cls: str | None = None, key: str | None = None) -> str:
        """'scenario.toml:12' for a class's key (or the class, or the file); 'scenario class
        "chat"' for a scenario given from Python."""
        if self.source is None:
            return f"scenario class {cls!r}" if cls is not None else "the scenario"
        line = self.lines.get((cls, key)) if cls is not None else None
        if line is None and cls is not None:
            line = self.lines.get((cls, None))
        return f"{self.source}:{line}" if line else self.source

    def fail(self, cls: str | None, key: str | None, what: str) -> UsageError:
        return UsageError(f"{self.where(cls, key)}: {what}")

    # -- the classes ---------------------------------------------------------------------------
    @property
    def names(self) -> list[str]:
        return [c.name for c in self.classes]

    def get(self, name: str) -> TrafficClass:
        for c in self.classes:
            if c.name == name:
                return c
        raise KeyError(name)

    def check(self) -> None:
        """The structure (names, loads, the shares' sum); one line naming where."""
        if not self.classes:
            raise self.fail(None, None, "no traffic class; add at least one (classes.NAME)")
        if len(self.classes) > MAX_CLASSES:
            raise self.fail(None, None, f"{len(self.classes)} classes; at most {MAX_CLASSES}")
        seen: set[str] = set()
        for c in self.classes:
            self._check_name(c, seen)
            self._check_load(c)
            self._check_extras(c)
        self._check_shares()

    def _check_name(self, c: TrafficClass, seen: set[str]) -> None:
        if not isinstance(c.name, str) or not _NAME.match(c.name):
            raise self.fail(c.name if isinstance(c.name, str) else None, None,
                            f"class name {c.name!r}: a letter, then letters, digits, "
                            "'_', '-' or '.' (at most 40)")
        if c.name in seen:
            raise self.fail(c.name, None, f"class {c.name!r} is given twice")
        seen.add(c.name)

    def _check_load(self, c: TrafficClass) -> None:
        """Exactly one of share, users or rate, of its type and range."""
        given = [k for k in LOAD_KEYS if getattr(c, k) is not None]
        if len(given) != 1:
            raise self.fail(c.name, given[1] if len(given) > 1 else None,
                            f"class {c.name!r} needs exactly one of share, users or rate"
                            + (f" (it has {' and '.join(given)})" if given else ""))
        k, v = given[0], getattr(c, given[0])
        if k == "users":
            ok = isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= MAX_USERS
            want = f"a whole number from 1 to {MAX_USERS:,}"
        else:
            real = isinstance(v, (int, float)) and _finite(v)
            ok = real and (0 < v <= 1 if k == "share" else not isinstance(v, bool) and v > 0)
            want = ("above 0 and at most 1 (or 100%)" if k == "share"
                    else "requests per second above 0")
        if not ok:
            raise self.fail(c.name, k, f"class {c.name!r}: {k} {v!r} must be {want}")

    def _check_extras(self, c: TrafficClass) -> None:
        """min_users (with a share only) and thresholds."""
        if c.min_users is not None:
            if c.share is None:
                raise self.fail(c.name, "min_users", f"class {c.name!r}: min_users goes "
                                "with a share (a class with its own users or rate has "
                                "them at every step)")
            if not (isinstance(c.min_users, int) and not isinstance(c.min_users, bool)
                    and 0 <= c.min_users <= MAX_USERS):
                raise self.fail(c.name, "min_users", f"class {c.name!r}: min_users "
                                f"{c.min_users!r} must be a whole number from 0 to "
                                f"{MAX_USERS:,}")
        if c.thresholds is not None and (
                not isinstance(c.thresholds, list)
                or not all(isinstance(t, str) for t in c.thresholds)):
            raise self.fail(c.name, "thresholds", f"class {c.name!r}: thresholds must be "
                            "a list of texts such as \"ttft.p95<=2s\"")

    def _check_shares(self) -> None:
        """The shares add up to 1."""
        shared = [c for c in self.classes if c.share is not None]
        total = sum(c.share or 0.0 for c in shared)
        if shared and abs(total - 1.0) > SHARE_TOLERANCE:
            parts = " + ".join(f"{c.name} {c.share:g}" for c in shared)
            raise self.fail(shared[0].name, "share",
                            f"the shares sum to {total:g} ({parts}), not 1; make them add up "
                            "to 1 (or 100%)")

    @property
    def least_users(self) -> int:
        """The fewest users a step of the whole crowd can have: the share classes' floors
        (min_users) added up, at least 1."""
        return max(1, sum(c.min_users or 0 for c in self.classes if c.share is not None))

    def check_grow(self, grow: str | None, flag: str = "--grow") -> None:
        """--grow CLASS names a class that can grow; without it, something must have a share."""
        if grow is None:
            if not any(c.share is not None for c in self.classes):
                raise self.fail(self.classes[0].name, None,
                                "no class has a share, so nothing grows with the ramp's steps: "
                                "give the classes shares, or pass --grow CLASS")
            return
        if grow not in self.names:
            raise UsageError(f"{flag} {grow!r}: no such class in {self.where()} (classes: "
                             f"{', '.join(self.names)})")
        if self.get(grow).rate is not None:
            raise UsageError(f"{flag} {grow!r}: that class has a fixed rate; give it a share or "
                             "users to grow it with the ramp's steps")

    def describe(self, grow: str | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"classes": [c.describe() for c in self.classes]}
        if self.source is not None:
            out["file"] = self.source
        if grow is not None:
            out["grow"] = grow
        return out


# -- from a file ---------------------------------------------------------------------------------
def _share(v: Any) -> Any:
    """0.7, '70%' -> 0.7; other values as they are (check() refuses them)."""
    if isinstance(v, str) and v.strip().endswith("%"):
        try:
            return float(v.strip()[:-1]) / 100.0
        except ValueError:
            return v
    return v


def from_document(doc: Any, source: str, text: str, kind: str,
                  allowed: Iterable[str] | Callable[[str], bool]) -> Scenario:
    """The scenario in a parsed file (``doc``, parsed from ``text``, a ``kind`` of TOML, YAML
    or JSON), each class's keys checked against the command's ``allowed`` option names."""
    ok = allowed if callable(allowed) else set(allowed).__contains__
    lines = _Lines(text, kind)
    if not isinstance(doc, Mapping):
        raise UsageError(f"{source}: expected a table with classes (classes.NAME), got a "
                         f"{type(doc).__name__}")
    top_known = {"classes", "class", "defaults", "scenario", "description", "name"}
    for k in doc:
        if normalize(k) not in top_known:
            raise UsageError(f"{source}:{lines.find(str(k)) or 1}: unknown key {k!r}; a scenario "
                             "has classes (classes.NAME), and optionally defaults")
    defaults = doc.get("defaults") or {}
    if not isinstance(defaults, Mapping):
        raise UsageError(f"{source}:{lines.find('defaults') or 1}: defaults must be a table of "
                         "options")
    items = _class_items(doc.get("classes", doc.get("class")), source, lines)
    out: list[TrafficClass] = []
    where: dict[tuple[str, str | None], int] = {}
    for name, body, index in items:
        line = lines.key(name, None, index)
        if line:
            where[(name, None)] = line
        if not isinstance(body, Mapping):
            raise UsageError(f"{source}:{line or 1}: class {name!r} must be a table of keys "
                             "(share, options...)")
        merged: dict[str, tuple[Any, int | None]] = {}
        for k, v in defaults.items():
            at = lines.find("defaults", str(k))
            if normalize(k) in LOAD_KEYS:
                raise UsageError(f"{source}:{at or 1}: {normalize(k)} in defaults: each class "
                                 "says its own share, users or rate")
            if normalize(k) in MIN_KEYS:
                raise UsageError(f"{source}:{at or 1}: {normalize(k)} in defaults: each class "
                                 "with a share says its own floor")
            merged[normalize(k)] = (v, at)
        for k, v in body.items():
            merged.pop(normalize(k), None)      # the class's own value, at its own line
            merged[normalize(k)] = (v, lines.key(name, k, index))
        tc = TrafficClass(name=name)
        for k, (v, at) in merged.items():
            if at:
                where[(name, k)] = at
            if k in LOAD_KEYS or k in MIN_KEYS:
                setattr(tc, k, _share(v) if k == "share" else v)
            elif k in THRESHOLD_KEYS:
                tc.thresholds = [v] if isinstance(v, str) else v
                if (name, "thresholds") not in where and at:
                    where[(name, "thresholds")] = at
            elif ok(k):
                tc.options[k] = v
            else:
                raise UsageError(f"{source}:{at or line or 1}: unknown key {k!r} in class "
                                 f"{name!r}; a class takes share, users or rate, thresholds, "
                                 "and the workload and request options of the command line "
                                 "(llmbench ramp --help)")
        out.append(tc)
    return Scenario(out, source=source, lines=where)


def _class_items(raw: Any, source: str, lines: "_Lines"
                 ) -> list[tuple[str, Any, int | None]]:
    """The classes as (name, body, where in the list): a table of tables (None), or a list of
    tables with a name each."""
    items: list[tuple[str, Any, int | None]] = []
    if isinstance(raw, Mapping):
        items = [(str(k), v, None) for k, v in raw.items()]
    elif isinstance(raw, list):
        for i, v in enumerate(raw):
            name = v.get("name") if isinstance(v, Mapping) else None
            if not isinstance(name, str):
                raise UsageError(f"{source}:{lines.key('', None, i) or 1}: class {i + 1} of the "
                                 "list has no name (name = \"chat\")")
            items.append((name, {k: x for k, x in v.items() if k != "name"}, i))
    else:
        raise UsageError(f"{source}: no classes; add tables like [classes.chat] with a share "
                         "(or users, or rate) each")
    return items


class _Lines:
    """Where a key was written in the file's text, as a 1-based line (None: not found)."""

    def __init__(self, text: str, kind: str) -> None:
        self.map = (_yaml_lines(text) if kind == "YAML" else
                    _toml_lines(text) if kind == "TOML" else _json_lines(text))

    def find(self, *path: str) -> int | None:
        got = self.map.get(tuple(path))
        if got is None:
            norm = tuple(normalize(p) for p in path)
            got = next((v for k, v in self.map.items()
                        if tuple(normalize(p) for p in k) == norm), None)
        return got

    def key(self, cls: str, key: Any, index: int | None = None) -> int | None:
        """The line of a class's ``key`` (None: of the class itself): the class named ``cls``
        in a table of classes, or the ``index``-th of a list of them."""
        rest = () if key is None else (str(key),)
        for top in ("classes", "class"):
            got = self.find(top, cls if index is None else str(index), *rest)
            if got:
                return got
        return None


def _toml_lines(text: str) -> dict[tuple[str, ...], int]:
    """TOML: [classes.NAME] (and [[classes]]) headers and KEY = lines under them."""
    out: dict[tuple[str, ...], int] = {}
    table: tuple[str, ...] = ()
    array_index: dict[tuple[str, ...], int] = {}
    header = re.compile(r"^\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
    keyline = re.compile(r"^\s*(\"[^\"]*\"|'[^']*'|[A-Za-z0-9_.-]+)\s*=")
    for no, line in enumerate(text.splitlines(), start=1):
        m = header.match(line)
        if m:
            parts = tuple(_unquote(p) for p in _split_dotted(m.group(2)))
            if m.group(1) == "[[":
                k = array_index[parts] = array_index.get(parts, -1) + 1
                table = parts + (str(k),)
            else:
                table = parts
            out.setdefault(table, no)
            continue
        m = keyline.match(line)
        if m:
            key = tuple(_unquote(p) for p in _split_dotted(m.group(1)))
            out.setdefault(table + key, no)
            if len(key) > 1:
                out.setdefault(table + key[:1], no)
    return out


def _split_dotted(text: str) -> list[str]:
    """'classes."my rag"' -> ['classes', '"my rag"'] (dots inside quotes kept)."""
    return [p.strip() for p in re.findall(r"(?:\"[^\"]*\"|'[^']*'|[^.\"'])+", text)]


def _unquote(s: str) -> str:
    s = s.strip()
    return s[1:-1] if len(s) >= 2 and s[0] == s[-1] and s[0] in "\"'" else s


def _yaml_lines(text: str) -> dict[tuple[str, ...], int]:
    """Every mapping key's path -> its 1-based line, from YAML's node marks (compose builds
    nodes only: nothing is constructed, as safe loading)."""
    try:
        import yaml  # type: ignore[import-untyped]
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except Exception:  # noqa: BLE001 - the parse already succeeded once; lines are a courtesy
        return {}
    out: dict[tuple[str, ...], int] = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                kp = path + (str(k.value),)
                out.setdefault(kp, k.start_mark.line + 1)
                walk(v, kp)
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                kp = path + (str(i),)
                out.setdefault(kp, v.start_mark.line + 1)
                walk(v, kp)
    if root is not None:
        walk(root, ())
    return out


def _json_lines(text: str) -> dict[tuple[str, ...], int]:
    """JSON: each "key": found in order, nested by braces (enough for a scenario's shape)."""
    out: dict[tuple[str, ...], int] = {}
    stack: list[tuple[str, ...]] = [()]
    pending: str | None = None
    line = 1
    for m in re.finditer(r'"((?:[^"\\]|\\[\s\S])*)"([ \t\r\n]*:)?|[{},\n]', text):
        tok = m.group(0)
        if tok == "{":
            stack.append(stack[-1] + ((pending,) if pending is not None else ()))
            pending = None
        elif tok == "}":
            if len(stack) > 1:
                stack.pop()
        elif tok == ",":
            pending = None
        elif tok != "\n" and m.group(2):       # a string followed by a colon: a key
            out.setdefault(stack[-1] + (m.group(1),), line)
            pending = m.group(1)
        line += tok.count("\n")
    return out

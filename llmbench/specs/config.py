"""--config FILE: options from a TOML, YAML or JSON file; and config.toml, the file every run
folder holds to replay its command (``llmbench run --config RUN/config.toml``).

A file is one table of option names to values. A name may be written as on the command line or
in snake_case, with or without its leading dashes (``--max-tokens``, ``max_tokens``); what the
names mean and whether the values fit is the command's business (llmbench/cli/config.py checks
them against the command's own options). Secrets are never written into config.toml: the
values of the options in ``results.folder.SECRET_FLAGS`` (--api-key, --header, --redact) are
left out, and URLs lose their user:password@ part and secret query values, as in the command
line run.json keeps (``scrub_argv``).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from llmbench.errors import UsageError

FORMATS = {".toml": "TOML", ".yaml": "YAML", ".yml": "YAML", ".json": "JSON"}
# A file of options is a few kB (a run folder's config.toml: ~2 kB); one over a megabyte is not
# one, and reading /dev/zero as one ended in MemoryError
MAX_CONFIG_BYTES = 1 << 20
CONFIG_DEPTH = 8            # a table of values, lists and (--label, --header) small tables


def normalize(key: str) -> str:
    """'--max-tokens', 'max-tokens', 'max_tokens' -> 'max_tokens'."""
    return str(key).strip().lstrip("-").replace("-", "_")


def read_document(path: str | Path, flag: str = "--config", max_bytes: int = MAX_CONFIG_BYTES,
                  what: str = "file of options") -> tuple[Any, str, str]:
    """(the parsed document, its text, its kind: TOML, YAML or JSON) of a small file a flag
    names (--config, --scenario), read safely: a regular file (not /dev/zero or a pipe) of at
    most ``max_bytes``, UTF-8, YAML without aliases, nested at most CONFIG_DEPTH levels; one line
    naming the flag and the file otherwise."""
    p = Path(path)
    kind = FORMATS.get(p.suffix.lower())
    if p.is_dir():
        raise UsageError(f"{flag} {p}: is a folder; give a .toml, .yaml or .json {what}")
    if kind is None:
        raise UsageError(f"{flag} {p}: unknown format {p.suffix or '(no suffix)'!r}; name the "
                         "file .toml, .yaml, .yml or .json")
    from llmbench.records import safejson
    try:
        text = safejson.read_file(p, flag, max_bytes, what=f"{kind} {what}")
    except safejson.JsonLimitError as exc:
        raise UsageError(str(exc)) from None
    try:
        if kind == "TOML":
            doc = _toml().loads(text)
        elif kind == "YAML":
            doc = _yaml_load(text, p, flag)
        else:
            doc = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:
        line = _json_line_of(text, exc.key)
        raise UsageError(f"{flag} {p}:{line}: the key {exc.key!r} appears twice in one object; "
                         "JSON keeps only the last, so give each name once") from None
    except UsageError:
        raise
    except RecursionError:
        raise UsageError(f"{flag} {p}: nested too deeply to be a {what}") from None
    except Exception as exc:  # noqa: BLE001 - each parser has its own error class
        first = " ".join(str(exc).split())[:200]
        raise UsageError(f"{flag} {p}: not valid {kind} ({first}); fix the file")
    if safejson.depth(doc, CONFIG_DEPTH) > CONFIG_DEPTH:
        raise UsageError(f"{flag} {p}: nested over {CONFIG_DEPTH} levels; a {what} is a "
                         "table of names to values")
    return doc, text, kind


def read(path: str | Path) -> dict[str, Any]:
    """The file's table: {normalized key: value}; one line naming the file when it cannot be
    read or parsed, or when it is not one table of options."""
    p = Path(path)
    doc, _, _ = read_document(p, "--config")
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise UsageError(f"--config {p}: expected a table of option names to values, "
                         f"got a {type(doc).__name__}")
    out: dict[str, Any] = {}
    for k, v in doc.items():
        name = normalize(k)
        if name in out:
            raise UsageError(f"--config {p}: key {k!r} is given twice (as {name})")
        out[name] = v
    return out


def _toml() -> Any:
    try:
        import tomllib
        return tomllib
    except ImportError:                         # Python 3.10
        pass
    try:
        import tomli  # type: ignore[import-not-found]
        return tomli
    except ImportError:
        raise UsageError("--config: reading TOML on Python 3.10 needs the tomli package "
                         "(pip install tomli), or give the options as .json")


class _DuplicateKey(ValueError):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """json's object hook: a key given twice in one object is an error, not the last one
    silently kept (a class named twice would be one class, and its shares would not add up)."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        if k in out:
            raise _DuplicateKey(k)
        out[k] = v
    return out


def _json_line_of(text: str, key: str) -> int | str:
    """The line of the second ``"key":`` in the text (where the duplicate is)."""
    import re
    hits = [m.start() for m in re.finditer(re.escape(json.dumps(key)) + r"\s*:", text)]
    return text.count("\n", 0, hits[1]) + 1 if len(hits) > 1 else "?"


def _yaml_duplicates(yaml: Any, text: str) -> tuple[str, int] | None:
    """The first key given twice in one YAML mapping, and its line (PyYAML keeps the last)."""
    def walk(node: Any) -> tuple[str, int] | None:
        if isinstance(node, yaml.MappingNode):
            seen: set[Any] = set()
            for k, v in node.value:
                name = getattr(k, "value", None)
                if isinstance(name, str):
                    if name in seen:
                        return name, k.start_mark.line + 1
                    seen.add(name)
                got = walk(v)
                if got:
                    return got
        elif isinstance(node, yaml.SequenceNode):
            for v in node.value:
                got = walk(v)
                if got:
                    return got
        return None
    return walk(yaml.compose(text, Loader=yaml.SafeLoader))


def _yaml_load(text: str, p: Path, flag: str = "--config") -> Any:
    """YAML without aliases: ``*name`` repeats a node by reference, and nine levels of
    ten-fold repeats (a "billion laughs") are 10^9 values to whatever walks the document. A
    file of options has no use for them, so one is refused at its line."""
    yaml = _yaml()
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.AliasEvent):
            line = event.start_mark.line + 1 if event.start_mark else "?"
            raise UsageError(f"{flag} {p}:{line}: a YAML alias (*{event.anchor}); a config "
                             "file takes plain values, write them out")
    dup = _yaml_duplicates(yaml, text)
    if dup is not None:
        raise UsageError(f"{flag} {p}:{dup[1]}: the key {dup[0]!r} appears twice in one "
                         "mapping; YAML keeps only the last, so give each name once")
    return yaml.safe_load(text)


def _yaml() -> Any:
    try:
        import yaml  # type: ignore[import-untyped]
        return yaml
    except ImportError:
        raise UsageError("--config: reading YAML needs PyYAML (pip install pyyaml), which is "
                         "not installed; give the options as .toml or .json")


# -- config.toml: the replay ---------------------------------------------------------------------
def _toml_value(v: Any) -> str | None:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, (str, Path)):
        return json.dumps(str(v), ensure_ascii=False)    # a JSON string is a TOML basic string
    if isinstance(v, (list, tuple)):
        items = [_toml_value(x) for x in v]
        return None if any(i is None for i in items) else "[" + ", ".join(items) + "]"  # type: ignore[arg-type]
    return None


def replay_values(values: dict[str, Any], fields: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The options worth writing: set (not None), without secrets, URLs scrubbed as
    ``scrub_argv`` scrubs a command line; and the names of the secrets left out."""
    from llmbench.results.folder import SECRET_FLAGS, scrub_argv
    out: dict[str, Any] = {}
    left_out = []
    # --redact's names and texts are hidden in every value, as in the command line run.json
    # keeps (the --redact values themselves are secrets: never written)
    redact = [a for r in values.get("redact") or [] for a in ("--redact", str(r))]

    def scrub(flag: str, text: str) -> str:
        return scrub_argv([flag, text, *redact])[1]
    for name, v in values.items():
        f = fields.get(name)
        flag = f.flag if f is not None else "--" + name.replace("_", "-")
        if v is None or v is Ellipsis or name in ("progress", "dashboard", "dashboard_linger"):
            continue                            # display only: a replay opens no page
        if flag in SECRET_FLAGS:
            if v:
                left_out.append(name)
            continue
        if isinstance(v, str):
            v = scrub(flag, v)
        elif isinstance(v, Path):
            v = Path(scrub(flag, str(v)))
        elif isinstance(v, list):
            v = [scrub(flag, str(x)) for x in v]
        out[name] = v
    return out, left_out


def to_toml(command: str, values: dict[str, Any], left_out: list[str] = (),  # type: ignore[assignment]
            salt: dict[str, Any] | None = None) -> str:
    lines = [f"# llmbench {command}: the options of this run. Replay it with",
             f"#   llmbench {command} --config config.toml",
             "# (the command line wins over this file)."]
    if left_out:
        lines.append(f"# Not saved (secrets): {', '.join(sorted(left_out))}; give them on the "
                     "command line (or $OPENAI_API_KEY).")
    if salt and salt.get("text") and salt.get("source") == "per run":
        # a replay is a new run: new prompts for the server (workload.salt); this run's exact
        # prompts, cache state and all, are one uncommented line away
        lines.append("# This run's prompt salt; uncomment to send its very prompts again:")
        lines.append(f"# prompt_salt = {_toml_value(salt['text'])}")
    for name, v in values.items():
        text = _toml_value(v)
        if text is not None:
            lines.append(f"{name} = {text}")
    return "\n".join(lines) + "\n"


def write_replay(path: Path, command: str, replay: dict[str, Any]) -> None:
    """config.toml in a run folder. Best effort: a disk that cannot take it does not stop the
    run (run.json and requests.jsonl say what happened)."""
    values, left_out = replay_values(replay["values"], replay.get("fields") or {})
    try:
        path.write_text(to_toml(command, values, left_out, replay.get("salt")), encoding="utf-8")
    except OSError:
        pass

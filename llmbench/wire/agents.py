"""Tools and structured output (--tools, --tool-choice, --response-format): the request fields
each API takes them in, and the check of a structured reply against its schema.

The files are read and checked once, by the plan (``load_tools``, ``load_schema``); the rest
is pure: ``request_fields`` gives what goes into every request body of that API.
``validates`` is a small JSON-schema checker (type, properties, required, additionalProperties
false, items, enum, const, minimum/maximum, exclusive bounds, minLength/maxLength,
minItems/maxItems, anyOf/oneOf/allOf): what structured output uses; keywords it does not know
are not checked, and a reply that parses and passes them counts as valid.
"""

from __future__ import annotations

import json
from typing import Any

from llmbench.records import safejson
from llmbench.records.safejson import schema_problem  # noqa: F401  (this module's check, kept here)

TOOL_CHOICES = ("auto", "required", "none")


# -- a reply's tool calls, as an agent sends them back -----------------------------------------
class Reply(list):  # type: ignore[type-arg]
    """What the client collects of one reply: its text pieces (a list of str) and the tool-call
    pieces it streamed (``calls``: wire.events.ToolPiece), filled when the decoder gets a Reply."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[Any] = []


class ReplyText(str):
    """A reply's text that also carries the tool calls the reply made (chat's shape, see
    ``assemble_calls``): what an agent puts in its history. A plain str everywhere else."""

    __slots__ = ("tool_calls",)
    tool_calls: list[dict[str, Any]]

    def __new__(cls, text: str, calls: list[dict[str, Any]]) -> "ReplyText":
        out = super().__new__(cls, text)
        out.tool_calls = calls
        return out


def reply_text(reply: list[str]) -> str:
    """The client's return value: the text, with its tool calls when it made any."""
    text = "".join(reply)
    calls = getattr(reply, "calls", None)
    if calls:
        return ReplyText(text, assemble_calls(calls))
    return text


def tool_calls_of(text: str) -> list[dict[str, Any]]:
    """The tool calls a reply (the client's return value) made; [] when none."""
    return list(getattr(text, "tool_calls", None) or ())


def assemble_calls(pieces: list[Any]) -> list[dict[str, Any]]:
    """Streamed pieces (index, id, name, arguments text) -> chat's tool calls, in index order:
    [{"id", "type": "function", "function": {"name", "arguments"}}]. A call the server named
    no id for gets one (``call_<index>``): the history must pair it with its result."""
    calls: dict[int, dict[str, Any]] = {}
    for index, cid, name, args in pieces:
        c = calls.get(index)
        if c is None:
            c = calls[index] = {"id": "", "name": "", "args": []}
        if cid and not c["id"]:
            c["id"] = cid
        if name:
            c["name"] += name
        if args:
            c["args"].append(args)
    return [{"id": c["id"] or f"call_{i}", "type": "function",
             "function": {"name": c["name"], "arguments": "".join(c["args"])}}
            for i, c in sorted(calls.items())]


class AgentSpecError(ValueError):
    """A --tools or --response-format file that cannot be used; the message is one line."""


def _read_json(path: str, flag: str) -> Any:
    """A JSON file a flag names: a regular file of at most safejson.MAX_SPEC_BYTES, UTF-8,
    nested at most safejson.MAX_DEPTH levels; anything else one line."""
    try:
        text = safejson.read_file(path, flag, what="JSON file")
        return safejson.loads(text, f"{flag} {path}")
    except safejson.JsonLimitError as exc:
        raise AgentSpecError(str(exc)) from None
    except json.JSONDecodeError as exc:
        # file:line first, as a compiler says it: the line to open the file at
        raise AgentSpecError(f"{flag} {path}:{exc.lineno}: not JSON ({exc.msg} at column "
                             f"{exc.colno}); give a JSON file") from None
    except ValueError as exc:
        raise AgentSpecError(f"{flag} {path}: not JSON ({exc}); give a JSON file") from None


def load_tools(path: str, flag: str = "--tools") -> list[dict[str, Any]]:
    """A JSON list of OpenAI tool definitions, in chat's form ({"type": "function", "function":
    {"name", "description", "parameters"}}) or the Responses API's flat form; kept as chat's."""
    raw = _read_json(path, flag)
    if isinstance(raw, dict) and isinstance(raw.get("tools"), list):
        raw = raw["tools"]
    if not isinstance(raw, list) or not raw:
        raise AgentSpecError(f"{flag} {path}: expected a JSON list of tool definitions")
    tools = []
    for i, t in enumerate(raw):
        fn = t.get("function") if isinstance(t, dict) and isinstance(t.get("function"), dict) else t
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise AgentSpecError(f"{flag} {path}: tool {i + 1} has no name; each tool is "
                                 '{"type": "function", "function": {"name": ..., "parameters": {...}}}')
        params = fn.get("parameters", {"type": "object", "properties": {}})
        if not isinstance(params, dict):
            raise AgentSpecError(f"{flag} {path}: tool {fn['name']!r}: parameters must be a JSON schema object")
        problem = schema_problem(params)
        if problem:
            raise AgentSpecError(f"{flag} {path}: tool {fn['name'][:40]!r}'s parameters: "
                                 f"{problem}")
        out = {"name": fn["name"], "parameters": params}
        if isinstance(fn.get("description"), str):
            out["description"] = fn["description"]
        tools.append({"type": "function", "function": out})
    return tools


def load_schema(path: str, flag: str = "--response-format") -> dict[str, Any]:
    """A JSON schema, or OpenAI's {"type": "json_schema", "json_schema": {"name", "schema"}}
    wrapper of one; returns the schema itself."""
    raw = _read_json(path, flag)
    if isinstance(raw, dict) and raw.get("type") == "json_schema":
        wrapper = raw.get("json_schema")
        raw = (wrapper.get("schema", raw.get("schema")) if isinstance(wrapper, dict)
               else raw.get("schema"))
    if not isinstance(raw, dict):
        raise AgentSpecError(f"{flag} {path}: expected a JSON schema object")
    problem = schema_problem(raw)
    if problem:
        raise AgentSpecError(f"{flag} {path}: {problem}; fix the schema")
    return raw


def request_fields(api: str, tools: list[dict[str, Any]] | None, tool_choice: str | None,
                   schema: dict[str, Any] | None, name: str = "reply") -> dict[str, Any]:
    """The body fields for ``api``: chat's tools / tool_choice / response_format, the Responses
    API's flat tools and text.format, the Messages API's tools (input_schema) and tool_choice
    object. Other APIs take none (the plan refuses them)."""
    out: dict[str, Any] = {}
    if api == "anthropic":
        from llmbench.wire.anthropic import tools_fields
        return tools_fields(tools, tool_choice)
    if api not in ("responses", "openai-chat"):
        return out
    if tools:       # the Responses API's are flat: {"type": "function", "name", ...}
        out["tools"] = tools if api == "openai-chat" else [{"type": "function", **t["function"]}
                                                            for t in tools]
    if tool_choice:
        out["tool_choice"] = tool_choice
    if schema is not None and api == "responses":
        out["text"] = {"format": {"type": "json_schema", "name": name, "schema": schema,
                                  "strict": False}}
    elif schema is not None:
        out["response_format"] = {"type": "json_schema",
                                  "json_schema": {"name": name, "schema": schema, "strict": False}}
    return out


_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value: Any, kind: str) -> bool:
    if isinstance(value, bool):                 # a bool is an int in Python, not in JSON
        return kind == "boolean"
    if kind == "integer":
        return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float))
    t = _TYPES.get(kind)
    return t is not None and isinstance(value, t)


def validates(value: Any, schema: Any, depth: int = 0) -> bool:
    """Whether ``value`` satisfies ``schema`` (the keywords listed in the module docstring)."""
    if not isinstance(schema, dict) or depth > 32:
        return True
    if not _any_value_ok(value, schema, depth):
        return False
    if isinstance(value, dict):
        return _object_ok(value, schema, depth)
    if isinstance(value, list):
        return _array_ok(value, schema, depth)
    if isinstance(value, str):
        return _within(len(value), schema, "minLength", "maxLength")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number_ok(value, schema)
    return True


def _any_value_ok(value: Any, schema: dict[str, Any], depth: int) -> bool:
    """const, enum, type and the combinators, which apply to a value of any type."""
    if "const" in schema and value != schema["const"]:
        return False
    if isinstance(schema.get("enum"), list) and value not in schema["enum"]:
        return False
    kind = schema.get("type")
    if kind is not None:
        kinds = kind if isinstance(kind, list) else [kind]
        if not any(_is(value, k) for k in kinds):
            return False
    if isinstance(schema.get("allOf"), list) and \
            not all(validates(value, s, depth + 1) for s in schema["allOf"]):
        return False
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and \
                not any(validates(value, s, depth + 1) for s in schema[key]):
            return False
    return True


def _object_ok(value: dict[str, Any], schema: dict[str, Any], depth: int) -> bool:
    props = schema.get("properties") or {}
    for req in schema.get("required") or ():
        if req not in value:
            return False
    extra = schema.get("additionalProperties")
    for k, v in value.items():
        if k in props:
            if not validates(v, props[k], depth + 1):
                return False
        elif extra is False:
            return False
        elif isinstance(extra, dict) and not validates(v, extra, depth + 1):
            return False
    return True


def _array_ok(value: list[Any], schema: dict[str, Any], depth: int) -> bool:
    if not _within(len(value), schema, "minItems", "maxItems"):
        return False
    items = schema.get("items")
    return not (isinstance(items, dict) and not all(validates(v, items, depth + 1)
                                                    for v in value))


def _within(n: float, schema: dict[str, Any], lo: str, hi: str) -> bool:
    """``n`` is not under ``schema[lo]`` nor over ``schema[hi]`` (each when given)."""
    if lo in schema and n < schema[lo]:
        return False
    return not (hi in schema and n > schema[hi])


def _number_ok(value: float, schema: dict[str, Any]) -> bool:
    if not _within(value, schema, "minimum", "maximum"):
        return False
    low, high = schema.get("exclusiveMinimum"), schema.get("exclusiveMaximum")
    if "exclusiveMinimum" in schema and isinstance(low, (int, float)) and value <= low:
        return False
    return not ("exclusiveMaximum" in schema and isinstance(high, (int, float))
                and value >= high)


def check_reply(text: str, schema: dict[str, Any] | None) -> bool:
    """A structured reply: parses as JSON and (with a schema) validates. A reply nested too
    deeply to read does not validate; a schema the plan checked cannot raise here (the net
    below is for one that was not: it never ends the run)."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return False
    try:
        return validates(value, schema) if schema else True
    except (TypeError, AttributeError, KeyError, RecursionError):
        return False

"""What the mock generates for tools and structured output: a JSON value that validates against
a request's JSON schema (a tool's parameters, or response_format / text.format), and the token
pieces it streams in. Deterministic for a request id, like every reply of the mock.

Only the schema keywords a generator needs are read (type, properties, required, items, enum,
const, minimum/maximum, minItems/maxItems, anyOf/oneOf: the first branch); what a schema asks
beyond that is not checked here, the client's validator is the judge."""

from __future__ import annotations

import json
import random
import re
from typing import Any

_PIECE = re.compile(r"\s+|\w+|[^\w\s]")
_WORDS = ("alpha", "beta", "gamma", "delta", "river", "stone", "cloud", "ember", "north", "maple")


def pieces(text: str) -> list[str]:
    """Token-like pieces that join back to ``text`` exactly (whitespace kept)."""
    return _PIECE.findall(text)


# The most values one generated reply holds: a schema that needs more (minItems 10**9, or
# minItems 100 four arrays deep) is refused up front; building it hung the mock
MAX_VALUES = 10_000
# Beyond minItems, an array gets at most this many more items (maxItems 10**9 is an upper
# bound, not a request for a billion)
EXTRA_ITEMS = 10


def least_values(schema: Any, limit: int = MAX_VALUES, depth: int = 0) -> tuple[int, str]:
    """How many values (objects, arrays and scalars) ``value_for`` builds for ``schema`` at
    the least, and where the largest demand sits ("properties.a.items"): counting stops past
    ``limit``."""
    if not isinstance(schema, dict) or depth > 8 or "const" in schema \
            or (isinstance(schema.get("enum"), list) and schema["enum"]):
        return 1, ""
    for key in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            n, where = least_values(branches[0], limit, depth + 1)
            return n, f"{key}[0]" + (f".{where}" if where else "")
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        total, worst, at = 1, 0, ""
        for name, sub in (schema.get("properties") or {}).items():
            n, where = least_values(sub, limit, depth + 1)
            total += n
            if n > worst:
                worst, at = n, f"properties.{name}" + (f".{where}" if where else "")
            if total > limit:
                break
        return total, at
    if kind == "array":
        lo = max(int(schema.get("minItems", 1)), 0)
        if lo > limit:
            return lo + 1, ""
        n, where = least_values(schema.get("items") or {"type": "string"}, limit, depth + 1)
        return 1 + lo * n, ("items" + (f".{where}" if where else "")) if lo * n > lo else ""
    return 1, ""


def too_large(schema: Any) -> str | None:
    """Why the mock will not generate a reply for ``schema`` (over MAX_VALUES values), or None."""
    n, where = least_values(schema)
    if n <= MAX_VALUES:
        return None
    return (f"a reply to it holds at least {'%d' % n if n < 10**12 else f'{n:.1e}'} values "
            f"(minItems{' at ' + where if where else ''}); the mock generates at most "
            f"{MAX_VALUES:,}: lower minItems")


def value_for(schema: Any, rng: random.Random, depth: int = 0) -> Any:
    if not isinstance(schema, dict) or depth > 8:
        return None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return rng.choice(schema["enum"])
    for key in ("anyOf", "oneOf", "allOf"):
        branches = schema.get(key)
        if isinstance(branches, list) and branches:
            return value_for(branches[0], rng, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        return {name: value_for(sub, rng, depth + 1) for name, sub in props.items()}
    if kind == "array":
        lo = max(int(schema.get("minItems", 1)), 0)
        hi = min(int(schema.get("maxItems", max(lo, 3))), lo + EXTRA_ITEMS)
        return [value_for(schema.get("items") or {"type": "string"}, rng, depth + 1)
                for _ in range(rng.randint(lo, max(lo, hi)))]
    if kind == "integer":
        return rng.randint(int(schema.get("minimum", 0)), int(schema.get("maximum", 100)))
    if kind == "number":
        return round(rng.uniform(float(schema.get("minimum", 0)), float(schema.get("maximum", 100))), 2)
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "null":
        return None
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(1, 3)))


def reply_json(schema: Any, seed: str, invalid: bool = False) -> str:
    """A JSON text that validates against ``schema`` (any JSON object for ``{"type":
    "json_object"}`` or no schema); ``invalid``: the same text cut before its end, as a model
    that ran out of its format produces."""
    rng = random.Random(seed)
    value = value_for(schema, rng) if isinstance(schema, dict) and schema else \
        {"answer": " ".join(rng.choice(_WORDS) for _ in range(4))}
    text = json.dumps(value)
    if invalid:
        text = text[: max(1, len(text) - 2)]
    return text


def schema_of(body: dict[str, Any], route: str) -> dict[str, Any] | None:
    """The JSON schema a request asks its reply to follow ({} for plain JSON mode), or None."""
    fmt: Any = None
    if route == "responses":
        text = body.get("text")
        fmt = text.get("format") if isinstance(text, dict) else None
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            return fmt.get("schema") if isinstance(fmt.get("schema"), dict) else {}
    else:
        fmt = body.get("response_format")
        if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
            spec = fmt.get("json_schema")
            schema = spec.get("schema") if isinstance(spec, dict) else None
            return schema if isinstance(schema, dict) else {}
    if isinstance(fmt, dict) and fmt.get("type") == "json_object":
        return {}
    return None


def tools_of(body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(name, parameters schema) of each function tool a request offers (chat's nested
    ``function`` object, or the Responses API's flat one)."""
    out = []
    for tool in body.get("tools") or ():
        if not isinstance(tool, dict):
            continue
        fn = tool.get("function") if isinstance(tool.get("function"), dict) else tool
        name = fn.get("name")
        if isinstance(name, str):
            params = fn.get("parameters")
            out.append((name, params if isinstance(params, dict) else {}))
    return out


def images_in(messages: Any) -> list[str]:
    """The images of a message list: chat's image_url parts, the Responses API's input_image
    parts (as their URLs, data URIs included) and Ollama's images field (base64)."""
    found = []
    for m in messages if isinstance(messages, list) else ():
        if isinstance(m, dict) and isinstance(m.get("images"), list):     # Ollama's native chat
            found.extend(str(img) for img in m["images"])
        content = m.get("content") if isinstance(m, dict) else None
        for part in content if isinstance(content, list) else ():
            if not isinstance(part, dict):
                continue
            if part.get("type") == "image_url":
                url = part.get("image_url")
                found.append(url.get("url", "") if isinstance(url, dict) else str(url or ""))
            elif part.get("type") == "input_image":
                found.append(str(part.get("image_url") or ""))
    return found

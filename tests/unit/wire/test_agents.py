"""--tools and --response-format: the files, the fields each API takes them in, and the schema
check that says whether a structured reply is valid (checked against jsonschema itself)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from llmbench.wire.agents import AgentSpecError, check_reply, load_schema, load_tools, request_fields, validates

SCHEMA = {"type": "object", "additionalProperties": False, "required": ["city", "days"],
          "properties": {"city": {"type": "string", "minLength": 2},
                         "days": {"type": "integer", "minimum": 1, "maximum": 7},
                         "units": {"enum": ["metric", "imperial"]},
                         "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 2},
                         "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
                         "ratio": {"type": "number", "exclusiveMaximum": 1}}}
CASES = [
    {"city": "Oslo", "days": 3},
    {"city": "Oslo", "days": 3, "units": "metric", "tags": ["a", "b"], "note": None, "ratio": 0.5},
    {"city": "Oslo", "days": 3.0},
    {"city": "Oslo"},
    {"city": "O", "days": 3},
    {"city": "Oslo", "days": 0},
    {"city": "Oslo", "days": 8},
    {"city": "Oslo", "days": True},
    {"city": "Oslo", "days": "3"},
    {"city": "Oslo", "days": 3, "units": "kelvin"},
    {"city": "Oslo", "days": 3, "tags": ["a", "b", "c"]},
    {"city": "Oslo", "days": 3, "tags": [1]},
    {"city": "Oslo", "days": 3, "note": 5},
    {"city": "Oslo", "days": 3, "ratio": 1},
    {"city": "Oslo", "days": 3, "extra": 1},
    [],
    "Oslo",
]


@pytest.mark.parametrize("value", CASES)
def test_validates_agrees_with_jsonschema(value):
    want = jsonschema.Draft202012Validator(SCHEMA).is_valid(value)
    assert validates(value, SCHEMA) == want


def test_check_reply():
    assert check_reply('{"city": "Oslo", "days": 2}', SCHEMA)
    assert not check_reply('{"city": "Oslo", "days": 2', SCHEMA)          # cut: not JSON
    assert not check_reply('{"city": "Oslo"}', SCHEMA)                     # JSON, not valid
    assert check_reply('{"anything": 1}', None) and not check_reply("not json", None)


def test_files_and_fields(tmp_path):
    chat_form = [{"type": "function", "function": {"name": "get", "description": "d",
                                                   "parameters": SCHEMA}}]
    flat_form = [{"type": "function", "name": "get", "description": "d", "parameters": SCHEMA}]
    for i, form in enumerate((chat_form, flat_form, {"tools": chat_form})):
        f = tmp_path / f"t{i}.json"
        f.write_text(json.dumps(form))
        assert load_tools(str(f)) == chat_form
    s = tmp_path / "s.json"
    s.write_text(json.dumps({"type": "json_schema", "json_schema": {"name": "x", "schema": SCHEMA}}))
    assert load_schema(str(s)) == SCHEMA
    s.write_text(json.dumps(SCHEMA))
    assert load_schema(str(s)) == SCHEMA
    chat = request_fields("openai-chat", chat_form, "required", SCHEMA)
    assert chat["tools"] == chat_form and chat["tool_choice"] == "required"
    assert chat["response_format"]["json_schema"]["schema"] == SCHEMA
    resp = request_fields("responses", chat_form, "auto", SCHEMA)
    assert resp["tools"] == flat_form and resp["text"]["format"]["schema"] == SCHEMA
    assert request_fields("ollama", chat_form, None, SCHEMA) == {}


@pytest.mark.parametrize("content, needle", [
    ("not json", "not JSON"), ("{}", "a JSON list"), ("[{\"type\": \"function\"}]", "no name"),
    ('[{"name": "x", "parameters": 3}]', "parameters must be"),
])
def test_bad_tool_files_are_one_line(tmp_path, content, needle):
    f = tmp_path / "tools.json"
    f.write_text(content)
    with pytest.raises(AgentSpecError) as e:
        load_tools(str(f))
    assert needle in str(e.value) and "--tools" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(AgentSpecError):
        load_tools(str(tmp_path / "missing.json"))

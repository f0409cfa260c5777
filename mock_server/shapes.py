"""Each API's stream shape: how its stream opens, carries a token, finishes and ends, and its
whole (non-streamed) reply. One class per wire format; routes.py picks one per request."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

_dumps = json.dumps


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


class Shape:
    """Bytes of one API's stream: how it opens, carries a token, finishes and ends."""

    content_type = "text/event-stream"

    def __init__(self, model: str, rid: str) -> None:
        self.model = model
        self.rid = rid
        self.created = int(time.time())

    def open(self) -> bytes | None:
        return None

    # the field a reasoning model streams its reasoning in (None: the API has none)
    reasoning_field: str | None = None
    reasoning_text = ""            # a whole (non-streamed) reply's reasoning

    def token(self, text: str, usage: dict[str, Any] | None, finish: str | None,
              reasoning: bool = False) -> bytes:
        raise NotImplementedError

    def close(self, finish: str, usage: dict[str, Any], timing: dict[str, int],
              include_usage: bool) -> bytes:
        raise NotImplementedError

    def error_event(self, message: str) -> bytes:
        return b"data: " + _dumps({"error": {"message": message, "type": "InternalServerError",
                                              "param": None, "code": 500}}).encode() + b"\n\n"

    def malformed(self) -> bytes:
        return b'data: {"id": "' + self.rid.encode() + b'", "choices": [{"delta": {"content": "br\n\n'

    def whole(self, text: str, finish: str, usage: dict[str, Any], timing: dict[str, int]
              ) -> dict[str, Any]:
        raise NotImplementedError


class ChatShape(Shape):
    def __init__(self, model: str, rid: str, reasoning_field: str = "reasoning_content") -> None:
        super().__init__(model, rid)
        self.reasoning_field = reasoning_field     # vLLM, SGLang, llama.cpp; Ollama's /v1: reasoning
        self._head = ('data: {"id":"chatcmpl-%s","object":"chat.completion.chunk","created":%d,'
                      '"model":%s,"choices":[' % (rid, self.created, _dumps(model)))

    def open(self) -> bytes:
        return (self._head + '{"index":0,"delta":{"role":"assistant","content":""},'
                '"logprobs":null,"finish_reason":null}]}\n\n').encode()

    def token(self, text: str, usage: dict[str, Any] | None, finish: str | None,
              reasoning: bool = False) -> bytes:
        tail = "]" if usage is None else '],"usage":' + _dumps(usage)
        field = self.reasoning_field if reasoning else "content"
        return (self._head + '{"index":0,"delta":{"%s":%s},"logprobs":null,'
                '"finish_reason":null}%s}\n\n' % (field, _dumps(text), tail)).encode()

    def close(self, finish: str, usage: dict[str, Any], timing: dict[str, int],
              include_usage: bool) -> bytes:
        out = self._head + ('{"index":0,"delta":{},"logprobs":null,"finish_reason":%s,'
                            '"stop_reason":null}]}\n\n' % _dumps(finish))
        if include_usage:
            out += self._head + '],"usage":%s}\n\n' % _dumps(usage)
        return (out + "data: [DONE]\n\n").encode()

    def whole(self, text: str, finish: str, usage: dict[str, Any], timing: dict[str, int]
              ) -> dict[str, Any]:
        return {"id": f"chatcmpl-{self.rid}", "object": "chat.completion", "created": self.created,
                "model": self.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text,
                                                     "tool_calls": [],
                                                     **({self.reasoning_field: self.reasoning_text}
                                                        if self.reasoning_text else {})},
                             "logprobs": None, "finish_reason": finish, "stop_reason": None}],
                "usage": usage}


class CompletionShape(Shape):
    def __init__(self, model: str, rid: str) -> None:
        super().__init__(model, rid)
        self._head = ('data: {"id":"cmpl-%s","object":"text_completion","created":%d,'
                      '"model":%s,"choices":[' % (rid, self.created, _dumps(model)))

    def token(self, text: str, usage: dict[str, Any] | None, finish: str | None,
              reasoning: bool = False) -> bytes:
        tail = "]" if usage is None else '],"usage":' + _dumps(usage)
        return (self._head + '{"index":0,"text":%s,"logprobs":null,"finish_reason":%s,'
                '"stop_reason":null}%s}\n\n' % (_dumps(text), _dumps(finish), tail)).encode()

    def close(self, finish: str, usage: dict[str, Any], timing: dict[str, int],
              include_usage: bool) -> bytes:
        out = ""
        if include_usage:
            out = self._head + '],"usage":%s}\n\n' % _dumps(usage)
        return (out + "data: [DONE]\n\n").encode()

    def whole(self, text: str, finish: str, usage: dict[str, Any], timing: dict[str, int]
              ) -> dict[str, Any]:
        return {"id": f"cmpl-{self.rid}", "object": "text_completion", "created": self.created,
                "model": self.model,
                "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish,
                             "stop_reason": None}],
                "usage": usage}


class OllamaShape(Shape):
    content_type = "application/x-ndjson"

    def __init__(self, model: str, rid: str, generate: bool) -> None:
        super().__init__(model, rid)
        self.generate = generate
        self._created_at = _now_iso()

    reasoning_field = "thinking"

    def _obj(self, text: str, done: bool, reasoning: bool = False) -> dict[str, Any]:
        obj: dict[str, Any] = {"model": self.model, "created_at": self._created_at}
        answer, thinking = ("", text) if reasoning else (text, self.reasoning_text if done else "")
        if self.generate:
            obj["response"] = answer
            if thinking:
                obj["thinking"] = thinking
        else:
            obj["message"] = {"role": "assistant", "content": answer}
            if thinking:
                obj["message"]["thinking"] = thinking
        obj["done"] = done
        return obj

    def token(self, text: str, usage: dict[str, Any] | None, finish: str | None,
              reasoning: bool = False) -> bytes:
        return (_dumps(self._obj(text, False, reasoning)) + "\n").encode()

    def close(self, finish: str, usage: dict[str, Any], timing: dict[str, int],
              include_usage: bool) -> bytes:
        obj = self._obj("", True)
        obj["done_reason"] = finish
        obj.update(timing)
        return (_dumps(obj) + "\n").encode()

    def error_event(self, message: str) -> bytes:
        return (_dumps({"error": message}) + "\n").encode()

    def malformed(self) -> bytes:
        return b'{"model": "' + self.model.encode() + b'", "message": {"content": "br\n'

    def whole(self, text: str, finish: str, usage: dict[str, Any], timing: dict[str, int]
              ) -> dict[str, Any]:
        obj = self._obj(text, True)
        obj["done_reason"] = finish
        obj.update(timing)
        return obj

"""Each API's stream shape: how its stream opens, carries a token, finishes and ends, and its
whole (non-streamed) reply. One class per wire format; each API's handler (apis/) names its own."""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from typing import Any

_dumps = json.dumps


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat().replace("+00:00", "Z")


class Shape:
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
    reasoning_count = 0            # reasoning tokens of the reply (the Responses usage says it)
    ends_with_done = True          # an error event is followed by [DONE] (OpenAI chat/completions)
    tool: tuple[str, str] | None = None   # (call id, function name): the reply is a tool call
    # the prompt's tokens and how many of them were cached: set before the stream opens (the
    # Messages API's message_start says them)
    n_prompt = 0
    cached = 0

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
        self._tool_opened = False
        self._head = ('data: {"id":"chatcmpl-%s","object":"chat.completion.chunk","created":%d,'
                      '"model":%s,"choices":[' % (rid, self.created, _dumps(model)))

    def open(self) -> bytes:
        return (self._head + '{"index":0,"delta":{"role":"assistant","content":""},'
                '"logprobs":null,"finish_reason":null}]}\n\n').encode()

    def token(self, text: str, usage: dict[str, Any] | None, finish: str | None,
              reasoning: bool = False) -> bytes:
        tail = "]" if usage is None else '],"usage":' + _dumps(usage)
        if self.tool is not None and not reasoning:
            call: dict[str, Any] = {"index": 0, "function": {"arguments": text}}
            if not self._tool_opened:
                self._tool_opened = True
                call = {"index": 0, "id": self.tool[0], "type": "function",
                        "function": {"name": self.tool[1], "arguments": text}}
            return (self._head + '{"index":0,"delta":{"tool_calls":[%s]},"logprobs":null,'
                    '"finish_reason":null}%s}\n\n' % (_dumps(call), tail)).encode()
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
        calls = [] if self.tool is None else [
            {"id": self.tool[0], "type": "function",
             "function": {"name": self.tool[1], "arguments": text}}]
        return {"id": f"chatcmpl-{self.rid}", "object": "chat.completion", "created": self.created,
                "model": self.model,
                "choices": [{"index": 0, "message": {"role": "assistant",
                                                     "content": None if calls else text,
                                                     "tool_calls": calls,
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
    ends_with_done = False

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
        return (_dumps(self.whole("", finish, usage, timing)) + "\n").encode()

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


class ResponsesShape(Shape):
    """OpenAI's Responses API: typed events (``event:`` line + JSON with the same ``type``),
    reasoning as a ``reasoning`` output item before the ``message`` item, usage in
    ``response.completed`` (``response.incomplete`` when the output budget ran out), no [DONE]."""

    reasoning_field = "reasoning_text"
    ends_with_done = False

    def __init__(self, model: str, rid: str) -> None:
        super().__init__(model, rid)
        self.id = f"resp_{rid}"
        self._seq = 0
        self._phase: str | None = None        # None, "reasoning" or "text"
        self._reasoning: list[str] = []
        self._text: list[str] = []

    def _event(self, kind: str, **fields: Any) -> str:
        data = _dumps({"type": kind, "sequence_number": self._seq, **fields})
        self._seq += 1
        return f"event: {kind}\ndata: {data}\n\n"

    def _response(self, status: str, output: list[dict[str, Any]],
                  usage: dict[str, Any] | None) -> dict[str, Any]:
        return {"id": self.id, "object": "response", "created_at": self.created,
                "status": status, "model": self.model, "output": output,
                "incomplete_details": ({"reason": "max_output_tokens"} if status == "incomplete"
                                       else None),
                "error": None, "usage": usage}

    def _usage(self, usage: dict[str, Any]) -> dict[str, Any]:
        return {"input_tokens": usage["prompt_tokens"],
                "input_tokens_details": {"cached_tokens": (usage.get("prompt_tokens_details")
                                                           or {}).get("cached_tokens", 0)},
                "output_tokens": usage["completion_tokens"],
                "output_tokens_details": {"reasoning_tokens": self.reasoning_count},
                "total_tokens": usage["total_tokens"]}

    def _items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if self._reasoning:
            items.append({"id": f"rs_{self.rid}", "type": "reasoning", "summary": [],
                          "content": [{"type": "reasoning_text", "text": "".join(self._reasoning)}]})
        if self.tool is not None:
            items.append(self._tool_item("completed"))
            return items
        items.append({"id": f"msg_{self.rid}", "type": "message", "status": "completed",
                      "role": "assistant",
                      "content": [{"type": "output_text", "text": "".join(self._text),
                                   "annotations": []}]})
        return items

    def open(self) -> bytes:
        resp = self._response("in_progress", [], None)
        return (self._event("response.created", response=resp)
                + self._event("response.in_progress", response=resp)).encode()

    def _close_reasoning(self) -> str:
        item = self._items()[0]
        return (self._event("response.reasoning_text.done", item_id=item["id"], output_index=0,
                            content_index=0, text="".join(self._reasoning))
                + self._event("response.output_item.done", output_index=0, item=item))

    def _tool_item(self, status: str) -> dict[str, Any]:
        assert self.tool is not None
        return {"id": f"fc_{self.rid}", "type": "function_call", "status": status,
                "call_id": self.tool[0], "name": self.tool[1], "arguments": "".join(self._text)}

    def token(self, text: str, usage: dict[str, Any] | None, finish: str | None,
              reasoning: bool = False) -> bytes:
        out = ""
        if reasoning:
            if self._phase is None:
                self._phase = "reasoning"
                out += self._event("response.output_item.added", output_index=0,
                                   item={"id": f"rs_{self.rid}", "type": "reasoning",
                                         "summary": [], "content": []})
            self._reasoning.append(text)
            out += self._event("response.reasoning_text.delta", item_id=f"rs_{self.rid}",
                               output_index=0, content_index=0, delta=text)
            return out.encode()
        index = 1 if self._reasoning else 0
        if self._phase != "text":
            if self._phase == "reasoning":
                out += self._close_reasoning()
            self._phase = "text"
            if self.tool is not None:
                out += self._event("response.output_item.added", output_index=index,
                                   item=self._tool_item("in_progress"))
            else:
                out += self._event("response.output_item.added", output_index=index,
                                   item={"id": f"msg_{self.rid}", "type": "message",
                                         "status": "in_progress", "role": "assistant",
                                         "content": []})
                out += self._event("response.content_part.added", item_id=f"msg_{self.rid}",
                                   output_index=index, content_index=0,
                                   part={"type": "output_text", "text": "", "annotations": []})
        self._text.append(text)
        if self.tool is not None:
            out += self._event("response.function_call_arguments.delta",
                               item_id=f"fc_{self.rid}", output_index=index, delta=text)
        else:
            out += self._event("response.output_text.delta", item_id=f"msg_{self.rid}",
                               output_index=index, content_index=0, delta=text, logprobs=[])
        return out.encode()

    def close(self, finish: str, usage: dict[str, Any], timing: dict[str, int],
              include_usage: bool) -> bytes:
        items = self._items()
        message = items[-1]
        index = len(items) - 1
        status = "incomplete" if finish == "length" else "completed"
        if self.tool is not None:
            out = self._event("response.function_call_arguments.done", item_id=message["id"],
                              output_index=index, arguments=message["arguments"])
        else:
            out = (self._event("response.output_text.done", item_id=message["id"],
                               output_index=index, content_index=0, text="".join(self._text))
                   + self._event("response.content_part.done", item_id=message["id"],
                                 output_index=index, content_index=0, part=message["content"][0]))
        out += self._event("response.output_item.done", output_index=index, item=message)
        out += self._event(f"response.{status}",
                           response=self._response(status, items, self._usage(usage)))
        return out.encode()

    def error_event(self, message: str) -> bytes:
        return self._event("error", code="server_error", message=message, param=None).encode()

    def whole(self, text: str, finish: str, usage: dict[str, Any], timing: dict[str, int]
              ) -> dict[str, Any]:
        self._text = [text]
        self._reasoning = [self.reasoning_text] if self.reasoning_text else []
        status = "incomplete" if finish == "length" else "completed"
        return self._response(status, self._items(), self._usage(usage))


class MessagesShape(Shape):
    """Anthropic's Messages API: ``event:`` + JSON typed events. message_start (the prompt's
    usage: input_tokens uncached, cache_read_input_tokens), a ping, one content block per kind
    (thinking, text, or a tool_use whose arguments stream as input_json_delta), message_delta
    with the stop reason and output_tokens, message_stop. No [DONE]."""

    reasoning_field = "thinking"
    ends_with_done = False
    STOP = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}

    def __init__(self, model: str, rid: str) -> None:
        super().__init__(model, rid)
        self.id = f"msg_{rid}"
        self._block = -1               # the open content block's index
        self._kind: str | None = None  # its type: thinking, text, tool_use
        self._thinking: list[str] = []

    @staticmethod
    def _event(kind: str, **fields: Any) -> str:
        return f"event: {kind}\ndata: {_dumps({'type': kind, **fields})}\n\n"

    def usage(self, output_tokens: int) -> dict[str, Any]:
        return {"input_tokens": self.n_prompt - self.cached, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": self.cached, "output_tokens": output_tokens}

    def open(self) -> bytes:
        message = {"id": self.id, "type": "message", "role": "assistant", "model": self.model,
                   "content": [], "stop_reason": None, "stop_sequence": None,
                   "usage": self.usage(0)}
        return (self._event("message_start", message=message) + self._event("ping")).encode()

    def _close_block(self) -> str:
        if self._kind is None:
            return ""
        out = ""
        if self._kind == "thinking":
            out += self._event("content_block_delta", index=self._block,
                               delta={"type": "signature_delta", "signature": ""})
        out += self._event("content_block_stop", index=self._block)
        self._kind = None
        return out

    def _start(self, kind: str) -> str:
        out = self._close_block()
        self._block += 1
        self._kind = kind
        if kind == "tool_use":
            assert self.tool is not None
            block: dict[str, Any] = {"type": "tool_use", "id": self.tool[0],
                                     "name": self.tool[1], "input": {}}
        else:
            block = {"type": kind, kind: ""}
        return out + self._event("content_block_start", index=self._block, content_block=block)

    def token(self, text: str, usage: dict[str, Any] | None, finish: str | None,
              reasoning: bool = False) -> bytes:
        kind = "thinking" if reasoning else ("tool_use" if self.tool is not None else "text")
        out = self._start(kind) if self._kind != kind else ""
        if kind == "thinking":
            self._thinking.append(text)
            delta = {"type": "thinking_delta", "thinking": text}
        elif kind == "tool_use":
            delta = {"type": "input_json_delta", "partial_json": text}
        else:
            delta = {"type": "text_delta", "text": text}
        return (out + self._event("content_block_delta", index=self._block, delta=delta)).encode()

    def close(self, finish: str, usage: dict[str, Any], timing: dict[str, int],
              include_usage: bool) -> bytes:
        out = self._close_block()
        out += self._event("message_delta",
                           delta={"stop_reason": self.STOP.get(finish, finish),
                                  "stop_sequence": None},
                           usage={"output_tokens": usage["completion_tokens"]})
        return (out + self._event("message_stop")).encode()

    def error_event(self, message: str) -> bytes:
        return self._event("error", error={"type": "api_error", "message": message}).encode()

    def malformed(self) -> bytes:
        return (b'event: content_block_delta\ndata: {"type": "content_block_delta", "index": 0, '
                b'"delta": {"type": "text_delta", "text": "br\n\n')

    def whole(self, text: str, finish: str, usage: dict[str, Any], timing: dict[str, int]
              ) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if self.reasoning_text:
            content.append({"type": "thinking", "thinking": self.reasoning_text, "signature": ""})
        if self.tool is not None:
            try:
                args = json.loads(text)
            except ValueError:
                args = {}
            content.append({"type": "tool_use", "id": self.tool[0], "name": self.tool[1],
                            "input": args if isinstance(args, dict) else {}})
        else:
            content.append({"type": "text", "text": text})
        return {"id": self.id, "type": "message", "role": "assistant", "model": self.model,
                "content": content, "stop_reason": self.STOP.get(finish, finish),
                "stop_sequence": None, "usage": self.usage(usage["completion_tokens"])}

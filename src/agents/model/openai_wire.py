"""The chat-completions wire format: the request body we send, and the answer we rebuild.

Kept apart from the client (`openai_chat`) because this is where the habits of real servers
are absorbed (issue 11), each with a test on the scripted server's quirks mode:

- The body is built once, ready to send: the `openai` SDK's `create()` would re-walk the whole
  message list to transform it on every call (most of a long run's CPU), so the client posts
  this body as is through the SDK's low-level `post`.
- Assistant messages never carry `"content": null` (llama-cpp-python answers HTTP 500): they
  are sent with `""`.
- `max_tokens` is always bounded (agent, then profile, then `llm.max_output_tokens`), so a
  weak model cannot generate forever; `tool_choice` is sent only with tools (OpenAI refuses it
  alone), from the agent or the profile, else `auto` (`DEFAULT_TOOL_CHOICE`).
- A tool call's name repeated in every delta (llama-cpp-python) is not appended again.
- A stream that ends without a `finish_reason` (empty, or cut off by a failing server) is not
  an answer: `Assembly.response` raises a retryable error instead of returning "done".
"""

from __future__ import annotations

import random
from typing import Any

from ...errors import RetryableLLMError
from ...settings import LLMSettings
from ...shapes import ChatMessage, RawToolCall
from .base import ModelRequest, ModelResponse, Usage

# The default bound takes at most this share of a declared context window: with
# `context.compact_at` at its default (0.8), a prompt at the compaction threshold plus a full
# answer still fit, so servers that refuse prompt + max_tokens > window (OpenAI, vLLM) accept it.
DEFAULT_OUTPUT_SHARE = 0.2

# Sent with tools unless the agent or profile says otherwise: OpenAI's own default, so it
# changes nothing there, and llama-cpp-python drops the tools of a request without it (the
# model then never calls one). A profile's `tool_choice: omit` sends no key (a server that
# refuses it).
DEFAULT_TOOL_CHOICE = "auto"
OMIT_TOOL_CHOICE = "omit"

# Keys that are only valid next to `tools`: dropped from a request that offers none (a
# summary call of an agent whose profile sets them), since OpenAI refuses them there.
_TOOLS_ONLY = ("tool_choice", "parallel_tool_calls")


def output_limit(request: ModelRequest, settings: LLMSettings) -> tuple[str, int | None]:
    """(body key, value) of the output bound: the agent's `max_output_tokens`, the profile's,
    a `max_tokens`/`max_completion_tokens` in the profile's `params`, else the setting
    `llm.max_output_tokens` (None: unbounded), which is cut to a fifth of the profile's
    `context_window` when one is declared. The key is `max_completion_tokens` when the
    profile's params use it (OpenAI reasoning models), else `max_tokens` (every server)."""
    target = request.target
    key = "max_completion_tokens" if "max_completion_tokens" in target.params else "max_tokens"
    for value in (request.max_output_tokens, target.max_output_tokens, target.params.get(key)):
        if value is not None:
            return key, int(value)
    limit = settings.max_output_tokens
    if limit is not None and target.context_window:
        limit = max(1, min(limit, int(target.context_window * DEFAULT_OUTPUT_SHARE)))
    return key, limit


def wire_messages(messages: list[ChatMessage]) -> list[ChatMessage]:
    """`messages` with `"content": null` on assistant turns replaced by `""`; copies only
    what it changes (the list is shared with the caller's memory)."""
    out = messages
    for index, message in enumerate(messages):
        if message.get("role") == "assistant" and message.get("content", "") is None:
            if out is messages:
                out = list(messages)
            out[index] = {**message, "content": ""}
    return out


def request_body(request: ModelRequest, settings: LLMSettings, *, stream: bool) -> dict[str, Any]:
    """The JSON body of one chat-completions request (the profile's `params` first, then what
    we set: model, messages, bounds, tools)."""
    target = request.target
    body: dict[str, Any] = dict(target.params)
    body["model"] = target.model
    body["messages"] = wire_messages(request.messages)
    if settings.temperature is not None:
        body.setdefault("temperature", settings.temperature)
    key, limit = output_limit(request, settings)
    if limit is not None:
        body[key] = limit
    if request.tools:
        body["tools"] = request.tools
        choice = request.tool_choice if request.tool_choice is not None else target.tool_choice
        if choice is None:
            choice = DEFAULT_TOOL_CHOICE
        if choice != OMIT_TOOL_CHOICE:
            body["tool_choice"] = choice
    else:
        for name in _TOOLS_ONLY:
            body.pop(name, None)
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    else:
        body.pop("stream", None)
        body.pop("stream_options", None)
    return body


class Assembly:
    """Rebuilds one answer from streamed chunks (or from a whole, non-streamed completion)."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.content: list[str] = []
        self.calls: dict[int, dict[str, Any]] = {}
        self.usage: Usage | None = None
        self.finish_reason: str | None = None
        self.chunks = 0

    def add_chunk(self, chunk: Any) -> str:
        """Fold in one `ChatCompletionChunk`; return its new text (may be "")."""
        self.chunks += 1
        if chunk.model:
            self.model = chunk.model
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage)
        text = ""
        for choice in chunk.choices or ():
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
            delta = choice.delta
            if delta is None:
                continue
            if delta.content:
                text += delta.content
            for part in delta.tool_calls or []:
                self._add_call_part(part)
        if text:
            self.content.append(text)
        return text

    def add_dict(self, chunk: dict[str, Any]) -> str:
        """Fold in one chunk as the plain dict the stream parsed (`openai_http.sse_chunks`);
        the same rules as `add_chunk`. Return its new text (may be "")."""
        self.chunks += 1
        model = chunk.get("model")
        if model:
            self.model = model
        usage = chunk.get("usage")
        if usage is not None:
            self.usage = _usage_dict(usage)
        text = ""
        for choice in chunk.get("choices") or ():
            finish = choice.get("finish_reason")
            if finish:
                self.finish_reason = finish
            delta = choice.get("delta")
            if delta is None:
                continue
            content = delta.get("content")
            if content:
                text += content
            for part in delta.get("tool_calls") or ():
                self._add_call_fields(part.get("index"), part.get("id"), part.get("function"))
        if text:
            self.content.append(text)
        return text

    def _add_call_fields(self, index: int | None, call_id: str | None, function: Any) -> None:
        slot = self.calls.setdefault(index or 0, {"id": None, "name": "", "arguments": ""})
        if call_id:
            slot["id"] = call_id
        if not function:
            return
        name, arguments = function.get("name"), function.get("arguments")
        if name and name != slot["name"]:  # a repeated whole name (see `_add_call_part`)
            slot["name"] += name
        if arguments:
            slot["arguments"] += arguments

    def _add_call_part(self, part: Any) -> None:
        slot = self.calls.setdefault(part.index or 0, {"id": None, "name": "", "arguments": ""})
        if part.id:
            slot["id"] = part.id
        function = part.function
        if function is None:
            return
        # llama-cpp-python repeats the whole name in every delta: a name equal to what we
        # already have is a repeat, not a fragment to append.
        if function.name and function.name != slot["name"]:
            slot["name"] += function.name
        if function.arguments:
            slot["arguments"] += function.arguments

    def add_completion(self, completion: Any) -> str:
        """Take a whole `ChatCompletion`; return its text."""
        if completion.model:
            self.model = completion.model
        if completion.usage is not None:
            self.usage = _usage(completion.usage)
        if not completion.choices:
            raise RetryableLLMError("the server answered with no choices (an empty completion)")
        choice = completion.choices[0]
        self.finish_reason = choice.finish_reason or "stop"
        message = choice.message
        text = message.content or ""
        if text:
            self.content.append(text)
        for index, call in enumerate(message.tool_calls or []):
            function = getattr(call, "function", None)
            self.calls[index] = {
                "id": call.id,
                "name": function.name if function else "",
                "arguments": (function.arguments if function else "") or "",
            }
        return text

    def response(self, *, offered_tools: bool) -> ModelResponse:
        """The finished answer; raise `RetryableLLMError` for a stream that never finished."""
        if self.finish_reason is None:
            what = "an empty stream" if not self.content and not self.calls else "a stream cut short"
            hint = (
                "; if this server cannot stream tool calls (llama-cpp-python), set "
                "`stream_tools: false` in its model profile"
                if offered_tools and not self.content and not self.calls
                else ""
            )
            raise RetryableLLMError(
                f"the server sent {what} ({self.chunks} chunks, no finish_reason): the answer "
                f"is incomplete, not done{hint}"
            )
        tool_calls: list[RawToolCall] = [
            {
                "id": call["id"] or f"call_{index}_{random.getrandbits(32):08x}",
                "name": call["name"],
                "arguments": call["arguments"],
            }
            for index, call in sorted(self.calls.items())
        ]
        return ModelResponse(
            content="".join(self.content),
            tool_calls=tool_calls,
            model=self.model,
            usage=self.usage,
            finish_reason=self.finish_reason,
        )


def _usage_dict(raw: dict[str, Any]) -> Usage | None:
    prompt, completion = raw.get("prompt_tokens"), raw.get("completion_tokens")
    if prompt is None and completion is None:
        return None
    return Usage(prompt or 0, completion or 0)


def _usage(raw: Any) -> Usage | None:
    prompt, completion = raw.prompt_tokens, raw.completion_tokens
    if prompt is None and completion is None:
        return None
    return Usage(prompt or 0, completion or 0)

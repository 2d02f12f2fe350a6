"""`ScriptedModel`: an in-process model for tests, with no sockets and no threads.

Give it replies in order (`ScriptedModel("hi", Reply(tool_calls=[ToolCall("add", {...})]))`)
and/or a function of the request that picks the reply (return `None` to fall back to the
queue). A reply's text is streamed to `on_delta` in chunks, its usage is reported (an estimate
from character counts unless given; `usage=None` plays a provider that sends none), and an
exception (or exception class) in the script is raised in place of a reply, so each
`LLMError` kind can be exercised. Every request is recorded in `requests`.

Install it for a whole process with `services.use_model(model)` (or
`controller.services.use_model(model)`): every agent is then served by it, and no API key
is needed.
"""

from __future__ import annotations

import inspect
import itertools
import json
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ...errors import FatalLLMError
from ...shapes import RawToolCall
from .base import DeltaCallback, ModelRequest, ModelResponse, Usage, send_delta

_AUTO: Literal["auto"] = "auto"


@dataclass
class ToolCall:
    """One tool call in a scripted reply. A `str` `arguments` is passed verbatim (it may be
    malformed JSON, to test how the tool node reports it); `id` defaults to `call_<n>`."""

    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str | None = None


@dataclass
class Reply:
    """One scripted completion. `finish_reason` defaults to "tool_calls" or "stop"."""

    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: Usage | None | Literal["auto"] = _AUTO
    finish_reason: str | None = None
    model: str | None = None


ScriptItem = Reply | str | BaseException | type[BaseException]
Responder = Callable[[ModelRequest], "ScriptItem | None | Awaitable[ScriptItem | None]"]


class ScriptedModel:
    """A `Model` that answers from a script. Not thread-safe; one event loop."""

    api = "scripted"

    def __init__(
        self,
        *replies: ScriptItem,
        function: Responder | None = None,
        chunk_size: int = 8,
        model_name: str = "scripted",
    ) -> None:
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        self.function = function
        self.chunk_size = chunk_size
        self.model_name = model_name
        self.requests: list[ModelRequest] = []
        self._queue: deque[ScriptItem] = deque(replies)
        self._ids = itertools.count()

    def script(self, *replies: ScriptItem) -> ScriptedModel:
        """Append replies to the queue; returns the model, for chaining."""
        self._queue.extend(replies)
        return self

    @property
    def remaining(self) -> int:
        """Replies still queued (a finished test usually expects 0)."""
        return len(self._queue)

    async def aclose(self) -> None:
        return None

    async def complete(
        self, request: ModelRequest, on_delta: DeltaCallback | None = None
    ) -> ModelResponse:
        self.requests.append(request)
        item = await self._next(request)
        if isinstance(item, type) and issubclass(item, BaseException):
            item = item(f"ScriptedModel: scripted {item.__name__}")
        if isinstance(item, BaseException):
            raise item
        reply = Reply(item) if isinstance(item, str) else item
        for start in range(0, len(reply.content), self.chunk_size):
            await send_delta(on_delta, reply.content[start : start + self.chunk_size])
        calls: list[RawToolCall] = [
            {
                "id": call.id or f"call_{next(self._ids)}",
                "name": call.name,
                "arguments": (
                    call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments)
                ),
            }
            for call in reply.tool_calls
        ]
        usage = _estimate(request, reply.content, calls) if reply.usage == _AUTO else reply.usage
        return ModelResponse(
            content=reply.content,
            tool_calls=calls,
            model=reply.model or self.model_name,
            usage=usage,
            finish_reason=reply.finish_reason or ("tool_calls" if calls else "stop"),
        )

    async def _next(self, request: ModelRequest) -> ScriptItem:
        if self.function is not None:
            answer = self.function(request)
            if inspect.isawaitable(answer):
                answer = await answer
            if answer is not None:
                return answer  # type: ignore[return-value]
        if self._queue:
            return self._queue.popleft()
        raise FatalLLMError(
            f"ScriptedModel has no reply left for request {len(self.requests)} "
            f"(agent {request.agent or '?'}): script more replies or pass a function",
            agent=request.agent,
        )


def _estimate(request: ModelRequest, text: str, calls: list[RawToolCall]) -> Usage:
    """Deterministic usage: characters // 4, at least 1 (roughly a tokenizer's count)."""
    prompt = sum(len(str(m.get("content") or "")) for m in request.messages)
    completion = len(text) + sum(len(c["arguments"]) for c in calls)
    return Usage(max(1, prompt // 4), max(1, completion // 4))

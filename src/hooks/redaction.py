"""A hook that removes secrets by regex before anything can record or send them.

It acts at the three doors through which text enters a run: the user's message
(`before_run`, before it is stored), every request to the model (`before_model_request`:
system prompt, history, artifacts, tool results, tool-call arguments), and every tool
result (`after_tool_call`, before the model, the ledger and the event log see it). The
model's own answers are scrubbed too (`after_model_request`), so a secret it echoes or
builds never reaches a tool call, an event or the next request.

All patterns are joined into one compiled alternation: one pass per string. The agent
nodes rebuild the request from the same history at every step, so results are cached per
string (a dict hit instead of a regex pass over the whole history each step).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from ..tools.base import ToolResult
from .base import Hooks
from .types import AgentStep, ChatMessage, ModelRequest, ModelResponse, RunInfo, ToolCall


class RedactionHooks(Hooks):
    name = "redaction"

    def __init__(self, patterns: Iterable[str], replacement: str = "[REDACTED]") -> None:
        patterns = list(patterns)
        if not patterns:
            raise ValueError("RedactionHooks needs at least one pattern")
        self.pattern = re.compile("|".join(f"(?:{p})" for p in patterns))
        self.replacement = replacement
        self._cached = lru_cache(maxsize=4096)(self._sub)

    def _sub(self, value: str) -> str:
        return self.pattern.sub(self.replacement, value)

    def text(self, value: str) -> str:
        return self._cached(value) if len(value) >= 64 else self._sub(value)

    def value(self, value: Any) -> Any:
        """Redact every string inside JSON-like data (dict keys included)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.value(v) for v in value)
        if isinstance(value, dict):
            return {self.value(k): self.value(v) for k, v in value.items()}
        return value

    def message(self, message: ChatMessage) -> ChatMessage:
        """The message itself when nothing in it matched, else a redacted copy."""
        content, calls = message.get("content"), message.get("tool_calls")
        new_content = self.value(content) if content is not None else None
        new_calls = self.value(calls) if calls else calls
        if new_content == content and new_calls == calls:
            return message
        out: dict[str, Any] = dict(message)
        if content is not None:
            out["content"] = new_content
        if calls:
            out["tool_calls"] = new_calls
        return out  # type: ignore[return-value]

    async def before_run(self, run: RunInfo, content: str) -> str | None:
        redacted = self.text(content)
        return redacted if redacted != content else None

    async def before_model_request(
        self, run: RunInfo, agent: AgentStep, request: ModelRequest
    ) -> ModelRequest | None:
        messages = [self.message(m) for m in request.messages]
        changed = any(new is not old and new != old for new, old in zip(messages, request.messages, strict=True))
        return request.with_messages(messages) if changed else None

    async def after_model_request(
        self, run: RunInfo, agent: AgentStep, request: ModelRequest, response: ModelResponse
    ) -> ModelResponse | None:
        content = self.text(response.content)
        calls = self.value(response.tool_calls)
        if content == response.content and calls == response.tool_calls:
            return None
        return dataclasses.replace(response, content=content, tool_calls=calls)

    async def after_tool_call(self, run: RunInfo, call: ToolCall, result: ToolResult) -> ToolResult | None:
        data = self.value(result.data)
        error = self.text(result.error) if result.error else result.error
        if data == result.data and error == result.error:
            return None
        return dataclasses.replace(result, data=data, error=error, metadata={**result.metadata, "redacted": True})

"""Plain-data shapes every layer passes around: JSON objects and OpenAI-format chat messages.

A leaf module (typing only). These are `TypedDict`s, so at run time they are the plain dicts
that graph state, checkpoints, the event log and the wire hold; the types only tell readers
(and pyright) which keys there are.
"""

from __future__ import annotations

from typing import Any, Literal, Required, TypedDict

JsonObject = dict[str, Any]
"""A JSON object whose keys are open: tool arguments, JSON Schema, tool metadata."""


class FunctionCall(TypedDict):
    name: str
    arguments: str  # the raw JSON text the model produced


class WireToolCall(TypedDict):
    """A tool call inside an assistant message, as the OpenAI chat format writes it."""

    id: str
    type: Literal["function"]
    function: FunctionCall


class ChatMessage(TypedDict, total=False):
    """One message in the OpenAI chat format (`role` is always present)."""

    role: Required[Literal["system", "user", "assistant", "tool"]]
    content: str | list[JsonObject] | None
    tool_calls: list[WireToolCall]
    tool_call_id: str
    name: str


class RawToolCall(TypedDict):
    """A tool call as the model produced it (the model seam's `tool_calls`); `arguments` is
    the raw JSON text."""

    id: str
    name: str
    arguments: str

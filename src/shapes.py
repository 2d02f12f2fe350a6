"""Plain-data shapes every layer passes around: JSON objects and OpenAI-format chat messages.

A leaf module (typing only). These are `TypedDict`s, so at run time they are the plain dicts
that graph state, checkpoints, the event log and the wire hold; the types only tell readers
(and pyright) which keys there are.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Required, TypedDict

JsonObject = dict[str, Any]
"""A JSON object whose keys are open: tool arguments, JSON Schema, tool metadata."""


Role = Literal["system", "user", "assistant", "tool"]


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

    role: Required[Role]
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


class PendingToolCall(TypedDict):
    """One call of the current tool round (graph state `pending_tool_calls`): who made it,
    and whether a person decides before it runs."""

    id: str
    name: str
    arguments: str  # raw JSON text
    agent: str
    invocation: str
    needs_approval: bool
    round: int
    refused: NotRequired[str]  # a hook refused it when the model made it: it never runs
    refused_by: NotRequired[str | None]


class Refusal(TypedDict):
    """A `before_tool_call` hook's refusal, recorded on the refused `PendingToolCall`."""

    refused: str
    refused_by: str | None

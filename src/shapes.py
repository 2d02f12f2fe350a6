"""Plain-data shapes every layer passes around: JSON objects and OpenAI-format chat messages.

A leaf module (typing only). These are `TypedDict`s, so at run time they are the plain dicts
that graph state, checkpoints, the event log and the wire hold; the types only tell readers
(and pyright) which keys there are.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, Required, TypedDict

JsonValue = Any
"""Anything `json.loads` returns."""

JsonObject = dict[str, JsonValue]
"""A JSON object whose keys are open (or owned by whoever wrote it): tool arguments, JSON
Schema, tool metadata, decoded JSON columns."""


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


class AskedCall(TypedDict):
    """A paused tool call a person decides on: a `permission_request` event's `calls`, a
    waiting message's `waiting_for["calls"]`."""

    tool_call_id: str
    tool: str
    arguments: Any  # parsed arguments (the raw text when they were not JSON)
    agent: NotRequired[str | None]
    invocation: NotRequired[str | None]
    interrupted: NotRequired[bool]  # approved and started before the process died
    note: NotRequired[str]


DecisionActionName = Literal["approve", "deny", "edit", "always"]


class Decision(TypedDict):
    """A validated decision on one paused call (`normalize_decisions`)."""

    action: DecisionActionName
    reason: str | None
    arguments: NotRequired[JsonObject]  # an edit's new arguments


class DecisionInput(TypedDict, total=False):
    """One call's decision as a caller gives it (before `normalize_decisions`)."""

    action: Required[str]
    reason: str | None
    arguments: JsonObject  # with action "edit"


class RecordedDecision(TypedDict):
    """A decision as a `permission_result` event records it."""

    tool_call_id: str
    tool: str
    action: DecisionActionName
    reason: NotRequired[str | None]
    arguments: NotRequired[Any]  # an edit's new arguments


class ToolResultDict(TypedDict):
    """`ToolResult.to_dict()`: a tool call's outcome as events, the ledger and sessions hold it."""

    success: bool
    data: Any
    error: str | None
    metadata: JsonObject  # open flags: denied, interrupted, truncated, …


class PauseRecord(TypedDict):
    """What a paused run waits on: a waiting message's `waiting_for`, and (without `trace`)
    its `permission_request` event's data."""

    interrupt_id: str
    kind: str | None  # "permission"
    calls: list[AskedCall]
    interrupt_ids: NotRequired[list[str]]  # every pause answered together, when several
    trace: NotRequired[JsonObject]  # the open trace's context (hooks), so a resume continues it


class AcceptedDecisions(TypedDict):
    """A resume's decisions as the claim stores them on the message (`messages.decisions`), so
    a run recovered after a crash resumes the same pause with them instead of asking again."""

    waiting: PauseRecord  # the pause they answer
    decided: dict[str, Decision]  # by tool call id
    results: list[RecordedDecision]  # as the `permission_result` event records them

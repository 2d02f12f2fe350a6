"""The shapes a recorded run is made of: what `af_model_calls` rows and session files hold.

TypedDicts, so at run time they stay the plain dicts that are packed into the store and
written as JSON lines (the wire format does not change); the types say which keys there are.
"""

from __future__ import annotations

from typing import Any, Literal, NotRequired, TypedDict

from ..shapes import JsonObject, RawToolCall


class TargetInfo(TypedDict, total=False):
    """The model a request was for, without credentials or endpoints (all three keys are
    written; a session file from before targets were recorded has `{}`)."""

    profile: str | None
    model: str | None
    api: str | None


class TargetError(TypedDict):
    error: str  # the agent's model could not be resolved


class UsageRecord(TypedDict):
    prompt_tokens: int
    completion_tokens: int


class ResponseRecord(TypedDict):
    """A model response as recorded (`recording.response_dict`)."""

    content: str
    tool_calls: list[RawToolCall]
    model: str | None
    usage: UsageRecord | None
    finish_reason: str | None
    attempts: int


class ErrorRecord(TypedDict):
    """A failed model request: the exception's class name and text."""

    kind: str
    message: str


class ToolInfo(TypedDict):
    source: str
    permission: str
    timeout: float | None
    description: str
    schema: JsonObject  # the tool's JSON Schema


class ConfigSnapshot(TypedDict):
    """The configuration a run ran under (`recording.config_snapshot`)."""

    agents: dict[str, JsonObject]  # each agent's front matter and prompt, as dumped
    models: dict[str, TargetInfo | TargetError]
    tools: dict[str, ToolInfo]
    settings: JsonObject  # the settings sections that matter, as dumped


class CallData(TypedDict):
    """The payload of an `af_model_calls` row of kind `call`: one request as a prefix delta
    (`delta.py`) and its outcome."""

    agent: str | None
    target: TargetInfo
    base: int | None
    keep: int
    append: list[Any]  # the new messages
    duration_ms: float
    same_tools: NotRequired[bool]  # the base row's tool specs
    tools: NotRequired[list[JsonObject] | None]  # OpenAI function specs
    response: NotRequired[ResponseRecord]
    error: NotRequired[ErrorRecord]
    # As stored only (`store.rows` resolves and removes it): tool messages of `append` whose
    # content is the result of a stored `tool_complete` event, as [index, event_id]
    # (`result_refs.py`); those messages are stored with `content: None`.
    results: NotRequired[list[list[int]]]


class ModelCallRow(TypedDict):
    """An `af_model_calls` row with its payload unpacked."""

    message_id: str
    seq: int
    kind: Literal["call", "config"]
    agent: str | None
    created_at: float
    data: Any  # CallData (kind call) or ConfigSnapshot (kind config)


class HistoryEntry(TypedDict):
    """A message on the conversation path before the run (the history it saw)."""

    id: str
    content: str
    response: str | None
    status: str


class ArtifactVersionRecord(TypedDict):
    version: int
    title: str
    content: str
    change: str


class ArtifactRecord(TypedDict):
    """An artifact's versions written before the run started."""

    artifact_id: str
    content_type: str
    versions: list[ArtifactVersionRecord]


class HistorySummaryRecord(TypedDict):
    """A stored history summary of a message on the path (`af_history_summaries` without its
    conversation id)."""

    message_id: str
    covers: int
    summary: str
    model: str | None
    created_at: float

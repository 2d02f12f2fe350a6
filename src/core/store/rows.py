"""The shapes of the rows the app store hands out and takes in, one TypedDict per table.

Rows stay plain dicts (callers spread them into API responses, JSON exports and checkpointed
state), but each key has its column's real type here, so a misspelt key or a `None` that was
not expected is a type error rather than a surprise at run time. JSON columns are decoded on
the way out: their shape is owned by whoever writes them (the run engine, workflows), so the
store types them as `JsonObject` or `JsonValue` and no further.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, TypedDict

from ...shapes import JsonObject, JsonValue

if TYPE_CHECKING:
    from ...shapes import AcceptedDecisions, PauseRecord
    from ..metrics import RunMetrics



class ConversationRow(TypedDict):
    id: str
    user_id: str | None
    title: str | None
    active_message_id: str | None  # the tip of the branch the user is on
    created_at: float
    updated_at: float
    project: str | None  # the project its runs recall memories from (None: none)


class MessageRow(TypedDict):
    id: str
    conversation_id: str
    parent_id: str | None
    thread_id: str  # the run's checkpoint thread
    content: str
    response: str | None
    status: str  # running | paused | completed | failed | cancelled | …
    outcome: str | None
    error: str | None
    waiting_for: PauseRecord | None  # a paused run's interrupt id and pending calls
    metrics: RunMetrics | None
    run_token: str | None  # the run that owns the message
    lease_expires_at: float | None
    checkpoints_deleted: bool
    created_at: float
    updated_at: float
    cancel_requested_at: float | None  # a cancel was accepted while it ran: its owner stops
    decisions: AcceptedDecisions | None  # a resume's accepted decisions, until past the pause


class EventRow(TypedDict):
    message_id: str
    event_id: int  # 1, 2, … within the message
    type: str
    agent: str | None
    timestamp: float
    data: JsonObject


class StoredEventRow(TypedDict):
    """An `af_events` row as written: the data as JSON text, or zlib-packed when large."""

    message_id: str
    event_id: int
    type: str
    agent: str | None
    timestamp: float
    data: str  # JSON, or "" when `data_z` holds it
    data_z: bytes | None


class ArtifactRow(TypedDict):
    conversation_id: str
    artifact_id: str
    title: str
    content_type: str
    content: str
    version: int  # the current version, bumped by every write
    created_at: float
    updated_at: float


class ArtifactVersionRow(TypedDict):
    conversation_id: str
    artifact_id: str
    version: int
    title: str
    content: str
    change: str  # create | update | rewrite | …
    agent: str | None
    message_id: str | None
    created_at: float


class LedgerRow(TypedDict):
    """One tool call in the exactly-once ledger of a message."""

    message_id: str
    tool_call_id: str
    status: Literal["started", "finished"]
    result: JsonObject | None  # the tool's result, once finished
    updated_at: float


class NewWorkflowRun(TypedDict):
    message_id: str
    conversation_id: str
    workflow: str
    digest: str  # of the definition's text
    definition: str  # the file's text: a resume runs this one
    input: JsonValue


class WorkflowRunRow(NewWorkflowRun):
    created_at: float


class WorkflowRunSummary(TypedDict):
    """A workflow run joined with its message's status (for listings)."""

    message_id: str
    conversation_id: str
    workflow: str
    input: JsonValue
    created_at: float
    status: str
    outcome: str | None


class LineageRow(TypedDict):
    """One node execution of a workflow run."""

    message_id: str
    execution_id: str
    node_id: str
    role: str
    kind: str | None
    iteration: int
    group_id: str | None
    item_index: int | None
    parents: list[str]  # execution ids
    status: str
    input: JsonValue
    output: JsonValue
    error: str | None
    started_at: float
    finished_at: float | None

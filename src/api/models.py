"""Wire formats of the HTTP API: pydantic request and response models.

Responses that mirror store records are declared field by field, so the OpenAPI schema says
what a client gets (and schemathesis can check it); `extra="allow"` keeps new store fields from
breaking older servers' clients.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from ..events.envelope import Event
from ..settings.projects import PROJECT_NAME_PATTERN


def _storable(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain NUL (U+0000), which cannot be stored")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must not contain a lone UTF-16 surrogate (not valid Unicode)") from None
    return value


# A string a database can store: no NUL (the schema says so too, a pattern, so clients and
# fuzzers know) and no lone surrogate (JSON can carry "\ud800"; UTF-8 cannot).
StorableText = Annotated[str, AfterValidator(_storable), Field(json_schema_extra={"pattern": r"^[^\x00]*$"})]
PLAIN_DECISIONS = ["approve", "deny", "always"]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


# --- errors ------------------------------------------------------------------------------------


class ErrorDetail(BaseModel):
    code: str = Field(description="Stable machine-readable code, e.g. not_found, conflict")
    message: str = Field(description="What happened and how to fix it")


class ErrorBody(BaseModel):
    error: ErrorDetail


# --- chat --------------------------------------------------------------------------------------


class ChatRequest(BaseModel):
    """A new user message. Leave `parent_message_id` out to continue the active branch; set it
    to a message id to fork after that message, or to `null` to start a new root."""

    model_config = ConfigDict(extra="forbid")

    content: str = Field(
        min_length=1,
        description="The user's message (not blank, no NUL)",
        # Documents the validator below for clients and fuzzers: no NUL anywhere, and at
        # least one character that Python's str.strip() keeps.
        json_schema_extra={"pattern": r"^[^\x00]*[^\s\x00\x1c-\x1f][^\x00]*$"},
    )
    conversation_id: StorableText | None = Field(
        None, description="Continue this conversation; omitted: a new one (or the parent's)"
    )
    parent_message_id: StorableText | None = Field(
        None, description="Omitted: the active branch; a message id: fork; null: new root"
    )
    project: str | None = Field(
        None,
        pattern=PROJECT_NAME_PATTERN,
        description=(
            "The project a new conversation belongs to (its runs recall the project's memories); "
            "omitted: the server's default (ARTIFACTFLOW_PROJECT). An existing conversation "
            "keeps its own project"
        ),
    )

    assistant: StorableText | None = Field(
        None,
        description=(
            "A saved assistant (POST /assistants) whose configuration the run uses: its model, "
            "prompt addition, tools and permissions; omitted: the agent files as they are"
        ),
    )

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("content must not be blank")
        return _storable(value)


class ChatAccepted(BaseModel):
    conversation_id: str
    message_id: str
    thread_id: str
    stream_url: str = Field(description="GET this for the run's server-sent events")


class ResumeRequest(BaseModel):
    """Answers to a paused message's pending tool calls (see `artifactflow.core.permissions`):
    `"approve" | "deny" | "always"` for all calls, or `{tool_call_id: {"action": "approve" |
    "deny" | "edit" | "always", "reason": "...", "arguments": {...}}}`."""

    model_config = ConfigDict(extra="forbid")

    decisions: (
        Annotated[str, Field(json_schema_extra={"enum": [*PLAIN_DECISIONS]})] | dict[str, Any]
    ) = Field(description="One decision for all calls, or one per call id")


class ResumeAccepted(BaseModel):
    message_id: str
    stream_url: str


class CancelResult(BaseModel):
    message_id: str
    cancelled: bool = Field(description="False when the message was not running or paused here")
    status: str


# --- messages and events -----------------------------------------------------------------------


class MessageInfo(_Open):
    id: str
    conversation_id: str
    parent_id: str | None = None
    thread_id: str
    content: str
    status: str
    response: str | None = None
    outcome: str | None = None
    error: str | None = None
    waiting_for: dict[str, Any] | None = Field(
        None, description="While paused: the interrupt id and the pending tool calls"
    )
    metrics: dict[str, Any] | None = None
    created_at: float
    updated_at: float


class EventList(BaseModel):
    message_id: str
    events: list[Event]


# --- conversations -----------------------------------------------------------------------------


class ConversationInfo(_Open):
    id: str
    title: str | None = None
    active_message_id: str | None = None
    created_at: float
    updated_at: float
    project: str | None = Field(None, description="The project it belongs to (None: none)")


class ConversationPage(BaseModel):
    items: list[ConversationInfo]
    total: int
    limit: int
    offset: int


class TreeNode(_Open):
    id: str
    parent_id: str | None = None
    content: str
    response: str | None = None
    status: str
    created_at: float
    children: list[str]
    active: bool
    tokens: int = Field(0, description="Prompt plus completion tokens of this message's run")
    cost_usd: float | None = Field(None, description="Its cost, when the models have prices")


class ConversationUsage(BaseModel):
    messages: int
    tokens: dict[str, int] = Field(description="prompt, completion and total over all messages")
    cost_usd: float | None = Field(None, description="None when no call was priced")
    cost_complete: bool = Field(description="False when some calls had no prices")


class ConversationTree(ConversationInfo):
    messages: list[TreeNode]
    roots: list[str]
    usage: ConversationUsage | None = Field(None, description="Tokens and cost of the whole conversation")


class BranchPage(BaseModel):
    messages: list[MessageInfo] = Field(description="Messages of the active branch, newest first")
    before: str | None = Field(
        None, description="Pass as `before` for the next, older page; null at the branch's root"
    )


# --- artifacts ---------------------------------------------------------------------------------


class ArtifactSummary(_Open):
    artifact_id: str
    title: str
    content_type: str
    version: int = Field(description="The current version")
    size: int = Field(description="Characters of the current content")
    created_at: float
    updated_at: float


class ArtifactList(BaseModel):
    conversation_id: str
    artifacts: list[ArtifactSummary]


class ArtifactDetail(_Open):
    artifact_id: str
    conversation_id: str
    title: str
    content_type: str
    content: str
    version: int = Field(description="The version shown")
    current_version: int
    size: int
    created_at: float
    updated_at: float = Field(description="When the version shown was written")
    change: str | None = None
    agent: str | None = None
    message_id: str | None = None


class ArtifactVersion(_Open):
    version: int
    title: str | None = None
    change: str | None = None
    agent: str | None = None
    message_id: str | None = None
    size: int
    created_at: float


class ArtifactVersions(BaseModel):
    artifact_id: str
    versions: list[ArtifactVersion]


class ArtifactDiff(BaseModel):
    artifact_id: str
    from_version: int
    to_version: int
    diff: str = Field(description="Unified diff from `from_version` to `to_version`")

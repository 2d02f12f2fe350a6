"""What a hook receives: small frozen records with the run's ids, the agent, the request.

Hooks see typed objects, never dicts whose keys they must guess. Records are frozen: an
interceptor that changes something returns a new record (`dataclasses.replace`, or the
`with_*` helpers), so what each hook received stays what it received, and the runner can
apply several rewrites in order. Chat messages stay in the OpenAI chat format (the format
the model seam sends on the wire), typed as `ChatMessage`.

Every point gets `run: RunInfo` first; points inside an agent step get `agent: AgentStep`
next; tool points get a `ToolCall`, which carries its agent.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any, Literal

from ..shapes import ChatMessage as ChatMessage  # defined once there; part of the hook API
from ..shapes import JsonObject
from ..shapes import RawToolCall as RawToolCall
from ..tools.base import ToolResult

LEAD_INVOCATION = "lead"  # the invocation id of the lead agent; the one definition (core: `LEAD`)


@dataclass(frozen=True)
class RunInfo:
    """One run segment: a new message, a resume after a pause, or a crash recovery.

    `content` is the user's message after `before_run`. `trace_context` is the W3C trace
    context stored with the paused message (None for a fresh run, unless the caller passed
    a `traceparent` to join its own trace).
    """

    conversation_id: str
    message_id: str
    thread_id: str
    lead_agent: str
    content: str
    resumed: bool = False
    recovered: bool = False
    user_id: str | None = None
    trace_context: JsonObject | None = None

    @property
    def segment(self) -> Literal["new", "resumed", "recovered"]:
        return "recovered" if self.recovered else "resumed" if self.resumed else "new"


@dataclass(frozen=True)
class RunEnd:
    """How a run segment ended. `waiting`: paused for permission (it will resume)."""

    status: Literal["completed", "waiting", "failed", "cancelled"]
    response: str | None = None
    outcome: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class AgentStep:
    """One step of one agent invocation: one model call, then maybe a tool round.

    `invocation` is `"lead"` or a subagent invocation id (`"researcher:ab12cd"`); `round`
    counts steps within the invocation from 1. `instruction` and `tool_call_id` describe a
    subagent invocation (what the lead asked, through which `call_subagent` call).
    """

    name: str
    invocation: str
    round: int
    model: str | None = None
    provider: str | None = None
    instruction: str | None = None
    tool_call_id: str | None = None

    @property
    def is_lead(self) -> bool:
        return self.invocation == LEAD_INVOCATION

    @property
    def parent_invocation(self) -> str | None:
        return None if self.is_lead else LEAD_INVOCATION


@dataclass(frozen=True)
class AgentStepEnd:
    """How a step ended. `outcome` None: the invocation goes on (a tool round follows);
    otherwise the invocation is over: `completed` / `done`, `failed`, `max_tool_rounds`."""

    content: str
    tool_calls: int
    outcome: str | None = None
    error: str | None = None

    @property
    def finishes_invocation(self) -> bool:
        return self.outcome is not None


@dataclass(frozen=True)
class ModelRequest:
    """What is about to be sent to the model. Interceptors may change `messages`, `tools`
    (OpenAI function specs) and `tool_choice` (sent with the tools: "auto", "required",
    "none" or `{"type": "function", "function": {"name": ...}}`; it starts as the agent's or
    its profile's, None when neither sets one); `model` is informative."""

    messages: list[ChatMessage]
    tools: list[JsonObject]
    model: str
    tool_choice: str | JsonObject | None = None

    def with_messages(self, messages: list[ChatMessage]) -> ModelRequest:
        return dataclasses.replace(self, messages=messages)


@dataclass(frozen=True)
class ModelResponse:
    """What the model answered (after retries). Interceptors may change `content` and
    `tool_calls`; the rest describes the call."""

    content: str
    tool_calls: list[RawToolCall]
    model: str
    input_tokens: int = 0
    output_tokens: int = 0
    finish_reason: str | None = None
    duration_ms: float = 0.0
    attempts: int = 1


@dataclass(frozen=True)
class ToolCall:
    """One tool call of a round, with the agent that made it.

    `arguments` is the parsed JSON object; when the model sent something that is not a
    JSON object, `arguments` is empty and `raw_arguments` keeps the text (the tool node
    reports it to the model). `key` is the call's exactly-once key, the same string the
    tool ledger uses: `{invocation}/{round}/{id}`.
    """

    id: str
    name: str
    arguments: JsonObject
    agent: str
    invocation: str
    round: int
    raw_arguments: str | None = None
    needs_approval: bool = False

    @property
    def key(self) -> str:
        return f"{self.invocation}/{self.round}/{self.id}"

    def with_arguments(self, arguments: JsonObject) -> ToolCall:
        return dataclasses.replace(self, arguments=dict(arguments), raw_arguments=None)

    def arguments_json(self) -> str:
        if self.raw_arguments is not None:
            return self.raw_arguments
        return json.dumps(self.arguments, ensure_ascii=False, default=str)

    @classmethod
    def from_raw(
        cls, raw: RawToolCall | JsonObject, *, agent: str, invocation: str, round: int
    ) -> ToolCall:
        """Build from a model tool call (`arguments` as JSON text or an object)."""
        value = raw.get("arguments")
        parsed: Any
        if isinstance(value, dict):
            parsed, text = value, None
        else:
            text = value if isinstance(value, str) else None
            try:
                parsed = json.loads(text) if text else {}
            except json.JSONDecodeError:
                parsed = None
            if isinstance(parsed, dict):
                text = None
        if not isinstance(parsed, dict):
            parsed = {}
        return cls(
            id=str(raw["id"]), name=str(raw["name"]), arguments=parsed, agent=agent,
            invocation=invocation, round=round, raw_arguments=text,
        )


@dataclass(frozen=True)
class Refuse:
    """Returned by `before_tool_call` to refuse a call. The tool never runs, nobody is
    asked for permission, and the model reads `reason` as the call's error result."""

    reason: str
    hook: str | None = None  # filled in by the runner: which hook refused

    def result(self) -> ToolResult:
        """The error result the model reads for the refused call."""
        return ToolResult.fail(f"refused: {self.reason}", refused=True, refused_by=self.hook)


@dataclass(frozen=True)
class ToolOutcome:
    """A finished call: its (final) result and how long the tool ran."""

    call: ToolCall
    result: ToolResult
    duration_ms: float = 0.0
    denied: bool = False
    refused: bool = False


@dataclass(frozen=True)
class ToolRound:
    """The calls one agent invocation made in one round (several may run in parallel).
    `outcomes` is empty before the round and filled after it."""

    agent: str
    invocation: str
    round: int
    calls: tuple[ToolCall, ...]
    outcomes: tuple[ToolOutcome, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.invocation}/{self.round}/*"


@dataclass(frozen=True)
class PermissionDecision:
    tool_call_id: str
    tool: str
    action: Literal["approve", "edit", "always", "deny"]
    reason: str | None = None
    arguments: JsonObject | None = None


@dataclass(frozen=True)
class PermissionRequest:
    """The run paused: these calls wait for a person's decision."""

    interrupt_id: str
    calls: tuple[ToolCall, ...]


@dataclass(frozen=True)
class PermissionResult:
    """The person answered; the run is about to continue."""

    decisions: tuple[PermissionDecision, ...]


@dataclass(frozen=True)
class Failure:
    """Something failed. `scope` says what: the whole run (`fatal`), one agent invocation
    (a subagent's failure is its call's error result, the run goes on), or one model call.
    A failed tool is not a Failure: it is a `ToolResult` with `success=False`."""

    scope: Literal["run", "agent", "model"]
    message: str
    error: BaseException | None = None
    fatal: bool = False
    agent: AgentStep | None = None
    kind: str | None = None


@dataclass(frozen=True)
class Compaction:
    """An agent's working memory was summarized to fit the model's window."""

    tokens_before: int
    tokens_after: int
    rounds_summarized: int
    summary_model: str | None = None
    extra: JsonObject = field(default_factory=dict)


@dataclass(frozen=True)
class MemoryRecall:
    """What recall put before an agent's first model call of a message (`memory.recall`):
    the ids in injection order, the profile and the search mode that ran, the estimated
    tokens of the injected section (within `budget`), and the section's text."""

    ids: list[str]
    profile: str
    mode: str
    tokens: int
    budget: int | None = None
    text: str = ""
    namespaces: list[list[str]] = field(default_factory=list)


# What hooks receive, re-exported as they are by `artifactflow.hooks`.
__all__ = [
    "AgentStep",
    "AgentStepEnd",
    "ChatMessage",
    "Compaction",
    "Failure",
    "MemoryRecall",
    "ModelRequest",
    "ModelResponse",
    "PermissionDecision",
    "PermissionRequest",
    "PermissionResult",
    "RawToolCall",
    "Refuse",
    "RunEnd",
    "RunInfo",
    "ToolCall",
    "ToolOutcome",
    "ToolRound",
]

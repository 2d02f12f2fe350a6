"""What `client.runs.start` takes: one typed request per way to start something that runs.

A plain string is a `Task`. Every request starts a run segment and returns a `Run` handle:
`Task` a new message, `Resume` the answer to a paused message (from any process), `Retry` a
new sibling of a failed or cancelled message, `WorkflowTask` a run of a workflow file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..core.conversations import ACTIVE_BRANCH
from ..shapes import DecisionInput

Decision = str | DecisionInput
Decisions = str | Mapping[str, Decision]
"""`"approve"` / `"deny"` / `"always"` for every pending call, or a mapping of tool-call id to
an action or `{"action": ..., "reason": ..., "arguments": ...}` (see `core/permissions.py`)."""


@dataclass(frozen=True)
class Task:
    """A new message. `parent_message_id`: the message it answers after (default: the tip of
    the conversation's active branch; a message id forks there; None starts at the root).
    `project`: the project a new conversation belongs to (default: the `project` setting);
    its runs recall that project's memories. `assistant`: a saved assistant (`client.assistants`)
    whose configuration the run uses; `config`: `AgentConfig` keys (model, system_prompt, tools,
    permissions, ...) over the assistant's, for this run only (`client/agent_config.py`).
    `message_id`: the new message's id (default: a new one); a start whose id is taken is
    refused (`ResumeConflictError`) and changes nothing, so a starter that may have died after
    starting can start again safely (the Agent Protocol's queued runs do)."""

    content: str
    conversation_id: str | None = None
    parent_message_id: Any = ACTIVE_BRANCH
    project: str | None = None
    assistant: str | None = None
    config: Mapping[str, Any] | None = None
    message_id: str | None = None


@dataclass(frozen=True)
class Resume:
    """Decisions for a paused message's pending tool calls; continues its run. A running
    message whose owner died is recovered instead (the decisions are then not needed)."""

    message_id: str
    decisions: Decisions


@dataclass(frozen=True)
class Retry:
    """Run a failed or cancelled message again as a new sibling (same conversation, parent
    and content)."""

    message_id: str


@dataclass(frozen=True)
class WorkflowTask:
    """A run of the workflow `name` (config/workflows/NAME.yaml) with `input`."""

    name: str
    input: Mapping[str, Any] | None = None
    conversation_id: str | None = None


Request = Task | Resume | Retry | WorkflowTask

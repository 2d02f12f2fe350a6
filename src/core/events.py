"""Typed execution events.

Event names are forever: a UI or a script keys on them. Every event carries the ids that place
it (conversation, message, thread) and an `event_id` that is monotonic and gap-free per
message, so a reader can replay from any point. `llm_chunk` carries a delta and is streamed
only, never stored.
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, Field

EventType = Literal[
    "metadata",
    "agent_start",
    "llm_chunk",
    "llm_complete",
    "agent_complete",
    "tool_start",
    "tool_complete",
    "permission_request",
    "permission_result",
    "subagent_start",
    "subagent_complete",
    "artifact_created",
    "artifact_updated",
    "workflow_node_start", "workflow_node_complete", "handoff",  # workflows (artifactflow.workflows)
    "complete",
    "cancelled",
    "error",
]

EPHEMERAL_TYPES = frozenset({"llm_chunk"})
# Events after which a message's stream ends (for now or for good).
FINAL_TYPES = frozenset({"complete", "error", "cancelled", "permission_request"})


class Event(BaseModel):
    type: EventType
    event_id: int = Field(description="Monotonic, gap-free per message; 0 for llm_chunk")
    timestamp: float = Field(default_factory=time.time)
    agent: str | None = None
    conversation_id: str
    message_id: str
    thread_id: str
    data: dict[str, Any] = Field(default_factory=dict)

    @property
    def is_final(self) -> bool:
        return self.type in FINAL_TYPES

    def to_json_line(self) -> str:
        return self.model_dump_json()

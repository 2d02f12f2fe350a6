"""The typed vocabulary of a run: event types, their payload classes, statuses and outcomes.

A leaf package (it imports nothing else of artifactflow), so every layer names the same values:
the engine emits these payloads, tools (the artifact tools) build them, the adapters and the
replay read them, and a user matches on them (`case CompleteData(response=text): ...`).
`envelope` is the `Event` a reader gets (type, ids, timestamp, data); `payloads` has one
pydantic class per event type; `status` the enums; `docs` renders docs/events.md.

`envelope` and `payloads` (pydantic classes, tens of milliseconds to build) are imported on first
use (PEP 562), so a reader of statuses alone (the store, the command line) does not pay for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports
from .status import (
    FINAL_STATUSES,
    DecisionAction,
    EventType,
    ExecutionPhase,
    MessageStatus,
    Outcome,
    SubagentStatus,
    WorkflowNodeStatus,
)

if TYPE_CHECKING:
    from .envelope import EPHEMERAL_TYPES, FINAL_TYPES, Emitted, Event, TypedEvent
    from .payloads import (
        PAYLOADS,
        AgentCompleteData,
        AgentEventData,
        AgentStartData,
        ArtifactCreatedData,
        ArtifactUpdatedData,
        CancelledData,
        CompleteData,
        ContextCompactedData,
        DecisionRecord,
        ErrorData,
        EventData,
        HandoffData,
        LLMChunkData,
        LLMCompleteData,
        MemoryRecalledData,
        MetadataData,
        PendingCall,
        PermissionRequestData,
        PermissionResultData,
        SubagentCompleteData,
        SubagentStartData,
        ToolCallRequest,
        ToolCompleteData,
        ToolResultData,
        ToolStartData,
        Usage,
        WorkflowNodeCompleteData,
        WorkflowNodeStartData,
    )

_ENVELOPE = frozenset({"EPHEMERAL_TYPES", "FINAL_TYPES", "Emitted", "Event", "TypedEvent"})


__all__ = [
    "AgentCompleteData",
    "AgentEventData",
    "AgentStartData",
    "ArtifactCreatedData",
    "ArtifactUpdatedData",
    "CancelledData",
    "CompleteData",
    "ContextCompactedData",
    "DecisionAction",
    "DecisionRecord",
    "EPHEMERAL_TYPES",
    "Emitted",
    "ErrorData",
    "Event",
    "EventData",
    "EventType",
    "ExecutionPhase",
    "FINAL_STATUSES",
    "FINAL_TYPES",
    "HandoffData",
    "LLMChunkData",
    "LLMCompleteData",
    "MemoryRecalledData",
    "MessageStatus",
    "MetadataData",
    "Outcome",
    "PAYLOADS",
    "PendingCall",
    "PermissionRequestData",
    "PermissionResultData",
    "SubagentCompleteData",
    "SubagentStartData",
    "SubagentStatus",
    "ToolCallRequest",
    "ToolCompleteData",
    "ToolResultData",
    "ToolStartData",
    "TypedEvent",
    "Usage",
    "WorkflowNodeCompleteData",
    "WorkflowNodeStartData",
    "WorkflowNodeStatus",
]
__getattr__ = lazy_exports(
    __name__,
    {name: ".envelope" if name in _ENVELOPE else ".payloads" for name in __all__ if name not in globals()},
)

"""Every status, outcome and phase of a run, defined once.

A leaf module (it imports nothing of the package), so the engine, the event payloads, the
stores, workflows, replay and the adapters all name the same values. They are `StrEnum`s:
a member is a `str` equal to its value, so values read back from the store, the event log
or a checkpoint (plain strings) compare equal to the members.

Graph state holds the *values* (`ExecutionPhase.COMPLETED.value`): LangGraph's checkpoint
serializer would store an enum member as a reference to this class, which strict
deserialization refuses (DESIGN "State": checkpoints hold plain data only).
"""

from __future__ import annotations

import enum


class EventType(enum.StrEnum):
    """Every event type's name (names are forever: UIs and scripts key on them)."""

    METADATA = "metadata"
    AGENT_START = "agent_start"
    LLM_CHUNK = "llm_chunk"
    LLM_COMPLETE = "llm_complete"
    AGENT_COMPLETE = "agent_complete"
    TOOL_START = "tool_start"
    TOOL_COMPLETE = "tool_complete"
    PERMISSION_REQUEST = "permission_request"
    PERMISSION_RESULT = "permission_result"
    SUBAGENT_START = "subagent_start"
    SUBAGENT_COMPLETE = "subagent_complete"
    ARTIFACT_CREATED = "artifact_created"
    ARTIFACT_UPDATED = "artifact_updated"
    WORKFLOW_NODE_START = "workflow_node_start"
    WORKFLOW_NODE_COMPLETE = "workflow_node_complete"
    HANDOFF = "handoff"
    CONTEXT_COMPACTED = "context_compacted"
    MEMORY_RECALLED = "memory_recalled"
    COMPLETE = "complete"
    CANCELLED = "cancelled"
    ERROR = "error"


class MessageStatus(enum.StrEnum):
    """Where a message's run stands. `waiting` means paused for a person's decision."""

    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


FINAL_STATUSES = frozenset({MessageStatus.COMPLETED, MessageStatus.FAILED, MessageStatus.CANCELLED})


class Outcome(enum.StrEnum):
    """Why a completed run stopped."""

    COMPLETED = "completed"
    MAX_TOOL_ROUNDS = "max_tool_rounds"
    BUDGET_EXCEEDED = "budget_exceeded"
    LOOP_DETECTED = "loop_detected"  # the same failing tool call, again and again (loop guard)


class SubagentStatus(enum.StrEnum):
    """A subagent invocation's state; `done` and `failed` are final."""

    RUNNING = "running"  # takes a step in the next `subagents` node
    TOOLS = "tools"  # its tool calls wait for the tool node
    DONE = "done"
    FAILED = "failed"

    @property
    def final(self) -> bool:
        return self in (SubagentStatus.DONE, SubagentStatus.FAILED)


class WorkflowNodeStatus(enum.StrEnum):
    """How a workflow node execution ended."""

    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"  # an earlier node of its split item or branch path failed
    CANCELLED = "cancelled"  # another path of its branch finished first


class DecisionAction(enum.StrEnum):
    """A person's answer to one tool call awaiting permission."""

    APPROVE = "approve"
    DENY = "deny"
    EDIT = "edit"
    ALWAYS = "always"


class ExecutionPhase(enum.StrEnum):
    """What runs next; every node sets it and `graph.route` reads nothing else.

    A pause for permission is not a phase: the tool node's `interrupt()` stops the run while
    the phase stays TOOL_EXECUTING, and the resume re-enters that node.
    """

    LEAD_EXECUTING = "lead_executing"  # the lead takes a step
    SUBAGENT_EXECUTING = "subagent_executing"  # running subagent invocations take a step
    TOOL_EXECUTING = "tool_executing"  # the tool node runs `pending_tool_calls`
    COMPLETED = "completed"  # the lead answered (or was stopped): the run ends

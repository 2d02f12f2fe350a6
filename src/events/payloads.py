"""One typed definition per event type: the `data` of every `Event`.

The wire format is the JSON object each class dumps to: exactly the fields the emitter set, so
adding an optional field never changes what older events look like. Readers use attributes
(`event.data.delta`, `isinstance(event.data, ToolCompleteData)`). Each class carries its
event type (`LLMChunkData.type`), so an emitter names none: it builds the payload
(`emit(LLMChunkData(delta=text))`) and pyright checks every field; `Event.build` also refuses
an undeclared field at run time, so a shape cannot drift silently. Events read back from the
log are parsed leniently (an older or newer writer's extra fields are kept, not rejected).
"""

from __future__ import annotations

from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from .status import FINAL_STATUSES as FINAL_STATUSES  # defined once there; re-exported here
from .status import (  # payload fields are typed with them
    DecisionAction,
    EventType,
    Outcome,
    SubagentStatus,
    WorkflowNodeStatus,
)
from .status import MessageStatus as MessageStatus


class Record(BaseModel):
    """Typed fields, dumped as set (a field the emitter left out stays out of the JSON)."""

    model_config = ConfigDict(extra="allow")

    @model_serializer(mode="wrap")
    def _only_set(self, handler: Any):  # noqa: ANN202 - unannotated: keeps the model schema
        dumped = handler(self)
        extra = self.__pydantic_extra__
        set_ = self.__pydantic_fields_set__
        if not extra and len(set_) == len(type(self).__pydantic_fields__):
            return dumped  # every field was set (and no alias renames one): all are kept
        keep = set_ | set(extra or {})
        return {k: v for k, v in dumped.items() if k in keep}

    def to_dict(self) -> dict[str, Any]:
        return self.model_dump(mode="json")



class EventData(Record):
    """Base of every event payload; each subclass sets `type` to its event type."""

    type: ClassVar[EventType]


class AgentEventData(EventData):
    invocation: str | None = Field(
        default=None, description="Which agent invocation: 'lead' or 'agent:xxxxxxxx' for a subagent"
    )


class Usage(Record):
    prompt_tokens: int | None = Field(default=None, description="None when the provider reported none")
    completion_tokens: int | None = Field(default=None, description="None when the provider reported none")


class ToolCallRequest(Record):
    id: str = Field(description="The model's id for the call")
    name: str = Field(description="Tool name")
    arguments: str = Field(description="Raw JSON text as the model produced it")


class ToolResultData(Record):
    success: bool
    data: Any = Field(default=None, description="What the tool returned (JSON)")
    error: str | None = Field(default=None, description="The error text the model saw")
    metadata: dict[str, Any] = Field(default={}, description="Flags such as denied, interrupted")


class PendingCall(Record):
    tool_call_id: str = Field(description="Answer with this id")
    tool: str = Field(description="Tool name")
    arguments: Any = Field(description="Parsed arguments (raw text when they were not JSON)")
    agent: str | None = Field(default=None, description="The agent that asked")
    invocation: str | None = Field(default=None, description="The agent invocation that asked")


class DecisionRecord(Record):
    tool_call_id: str
    tool: str
    action: DecisionAction
    reason: str | None = Field(default=None, description="A denial's message for the model")
    arguments: Any = Field(default=None, description="An edit's new arguments")


# --- one class per event type ----------------------------------------------------------------


class MetadataData(EventData):
    """First event of a run: what was asked, or that a dead owner's run was recovered."""

    type = EventType.METADATA
    parent_message_id: str | None = Field(default=None, description="The message this one answers after")
    content: str | None = Field(default=None, description="The user's message")
    lead_agent: str | None = Field(default=None, description="Name of the lead agent that runs it")
    recovered: bool | None = Field(
        default=None, description="True when this segment continues a run whose process died"
    )
    workflow: str | None = Field(default=None, description="The workflow this message runs")
    input: dict[str, Any] | None = Field(default=None, description="The workflow's validated input")


class AgentStartData(AgentEventData):
    type = EventType.AGENT_START
    round: int = Field(description="1-based step of this invocation")


class LLMChunkData(AgentEventData):
    """A text delta (not the accumulated text). Streamed only, never stored."""

    type = EventType.LLM_CHUNK
    delta: str = Field(description="New text since the previous chunk")


class LLMCompleteData(AgentEventData):
    type = EventType.LLM_COMPLETE
    content: str = Field(description="The full text of the answer")
    tool_calls: list[ToolCallRequest] = Field(default=[], description="Tool calls, in call order")
    model: str | None = Field(default=None, description="The model name the provider reported")
    usage: Usage = Field(default=Usage(), description="Token counts of this call")
    usage_estimated: bool | None = Field(
        default=None,
        description="True when `usage` is an offline estimate: the call was cut off (cancelled) before the provider reported it",
    )
    duration_ms: float = Field(default=0.0, description="Wall time including retries")
    attempts: int = Field(default=1, description="1 plus the number of retries")
    finish_reason: str | None = Field(default=None, description="'stop', 'tool_calls', 'length', 'cancelled' (cut off), …")
    cost_usd: float | None = Field(
        default=None, description="From the model profile's prices; None when it has none"
    )


class AgentCompleteData(AgentEventData):
    type = EventType.AGENT_COMPLETE
    content: str = Field(default="", description="The step's text")
    tool_calls: int = Field(default=0, description="How many tool calls the step made")
    outcome: str | None = Field(
        default=None, description="For the lead: the run's outcome if this step ended it; for a subagent: its status"
    )
    error: str | None = Field(default=None, description="Why the step failed")


class ToolStartData(AgentEventData):
    type = EventType.TOOL_START
    tool_call_id: str = Field(description="The model's id for the call")
    tool: str = Field(description="Tool name")
    arguments: Any = Field(default=None, description="Parsed arguments (raw text if not JSON)")
    edited: bool = Field(default=False, description="True when a person edited the arguments")


class ToolCompleteData(AgentEventData):
    type = EventType.TOOL_COMPLETE
    tool_call_id: str = Field(description="The model's id for the call")
    tool: str = Field(description="Tool name")
    success: bool = Field(description="Whether the tool succeeded")
    result: ToolResultData = Field(description="The full result (the model may see it truncated)")
    duration_ms: float = Field(default=0.0, description="How long the tool ran")
    denied: bool | None = Field(default=None, description="True when a person denied the call")
    refused: bool | None = Field(default=None, description="True when a hook refused the call (it never ran)")
    outcome: str | None = Field(
        default=None,
        description="completed, failed, timed_out, abandoned (by a cancel), not_repeated "
        "(an identical call's effect was unknown), interrupted (by a crash)",
    )
    may_still_take_effect: bool | None = Field(
        default=None, description="True while the call runs out of reach (a sync tool's thread)"
    )


class PermissionRequestData(EventData):
    """The run paused: answer every call in `calls` (by `tool_call_id`) to resume it."""

    type = EventType.PERMISSION_REQUEST
    interrupt_id: str = Field(description="LangGraph's id of the pause")
    interrupt_ids: list[str] | None = Field(
        default=None, description="Every pause answered together (parallel workflow steps); set when several"
    )
    kind: str | None = Field(default=None, description="'permission'")
    calls: list[PendingCall] = Field(description="The calls waiting for a decision")


class PermissionResultData(EventData):
    type = EventType.PERMISSION_RESULT
    decisions: list[DecisionRecord] = Field(description="One decision per paused call")


class SubagentStartData(AgentEventData):
    type = EventType.SUBAGENT_START
    instruction: str = Field(description="What the lead asked the subagent to do")
    tool_call_id: str | None = Field(description="The lead's call_subagent call (None in a workflow step)")


class SubagentCompleteData(AgentEventData):
    type = EventType.SUBAGENT_COMPLETE
    status: SubagentStatus = Field(description="'done' or 'failed'")
    result: str | None = Field(default=None, description="The subagent's answer (partial when failed)")
    error: str | None = Field(default=None, description="Why it failed")
    tool_call_id: str | None = Field(description="The lead's call_subagent call (None in a workflow step)")


class ArtifactCreatedData(AgentEventData):
    type = EventType.ARTIFACT_CREATED
    artifact_id: str = Field(description="The artifact's id in its conversation")
    title: str
    version: int = Field(description="The new version number")
    content_type: str = Field(description="A MIME type such as text/markdown")


class ArtifactUpdatedData(AgentEventData):
    type = EventType.ARTIFACT_UPDATED
    artifact_id: str = Field(description="The artifact's id in its conversation")
    title: str
    version: int = Field(description="The new version number")
    previous_version: int
    change: str = Field(description="'update' (an edit) or 'rewrite' (new full text)")
    content_type: str = Field(description="A MIME type such as text/markdown")


class _WorkflowNodeData(EventData):
    node: str = Field(description="The node's id in the workflow file")
    role: str = Field(description="start, linear, decision, split, branch, merge or exit")
    kind: str | None = Field(default=None, description="'agent', 'tool' or 'group'; None for a role without a step")
    execution: str = Field(description="node#iteration, with [index] inside a split or branch")
    iteration: int = Field(description="1-based run of this node (loops run it again)")
    group: str | None = Field(default=None, description="The split/branch execution it runs in (a merge: the one it joins)")
    index: int | None = Field(default=None, description="Its item (split) or path (branch) index")
    parents: list[str] = Field(default=[], description="Executions whose output led here")


class WorkflowNodeStartData(_WorkflowNodeData):
    """A workflow node execution started (docs/workflows.md)."""

    type = EventType.WORKFLOW_NODE_START


class WorkflowNodeCompleteData(_WorkflowNodeData):
    """A workflow node execution ended; its full input and output are in the lineage."""

    type = EventType.WORKFLOW_NODE_COMPLETE
    status: WorkflowNodeStatus = Field(description="How it ended")
    output_summary: str = Field(default="", description="The output, shortened to one line")
    error: str | None = Field(default=None, description="Why it failed, was skipped or cancelled")
    repaired: bool | None = Field(default=None, description="True when the answer matched its schema after the repair round")
    outcome: str | None = Field(default=None, description="An agent group's outcome: 'completed' or 'max_turns'")
    choice: str | None = Field(default=None, description="The label a decision chose")
    exhausted: str | None = Field(default=None, description="A loop label that ran out of iterations (the fallback was taken)")
    count: int | None = Field(default=None, description="How many items a split fanned out to")
    paths: int | None = Field(default=None, description="How many paths a branch started")
    failed_items: list[int] | None = Field(default=None, description="Split items a merge received as failed")


class HandoffData(EventData):
    """An agent group's floor passed to another member (`envelope.agent` is the new speaker)."""

    type = EventType.HANDOFF
    execution: str = Field(description="The group node's execution")
    node: str = Field(description="The group node's id")
    from_agent: str = Field(description="Who had the floor")
    to_agent: str = Field(description="Who speaks next")
    message: str = Field(default="", description="What the handing agent (or the moderator) said about it")
    by: str = Field(description="'handoff' (the agent called the tool) or 'moderator'")
    turn: int = Field(description="The turn that ended")


class ContextCompactedData(AgentEventData):
    """Part of what a model call would send was condensed to fit the model's context window:
    an agent's older tool rounds (`scope` 'memory') or the conversation's earlier messages
    ('history', stored and reused by later messages). The originals stay in the event log."""

    type = EventType.CONTEXT_COMPACTED
    scope: str = Field(default="memory", description="'memory' (tool rounds) or 'history' (messages)")
    tokens_before: int = Field(description="Estimated prompt tokens before")
    tokens_after: int = Field(description="Estimated prompt tokens after")
    rounds_summarized: int = Field(default=0, description="Tool rounds the summary now stands for")
    messages_summarized: int | None = Field(
        default=None, description="History: earlier messages the stored summary covers"
    )
    aggressive: bool = Field(default=False, description="True after the provider said 'too long'")
    results_shortened: int = Field(default=0, description="Newest tool results cut to fit (with a marker)")
    summary_model: str | None = Field(default=None, description="The model that wrote the summary")
    usage: Usage = Field(default=Usage(), description="Token counts of the summary call")
    cost_usd: float | None = Field(default=None, description="Cost of the summary call, when priced")


class MemoryRecalledData(AgentEventData):
    """Memories (and knowledge-base chunks) were recalled before the agent's first model call
    of the message and put in its request as one system section (`memory.recall`,
    docs/memory.md). Emitted once per agent invocation, never again on a resume."""

    type = EventType.MEMORY_RECALLED
    ids: list[str] = Field(description="The recalled memories' ids, in the order they were injected")
    profile: str = Field(description="The context profile: compact, standard, comprehensive or one of the config's")
    mode: str = Field(description="The search mode that actually ran: recency, semantic, hybrid or lexical")
    tokens: int = Field(description="Estimated tokens of the injected section (within the profile's budget)")
    budget: int | None = Field(default=None, description="The profile's token budget")
    namespaces: list[list[str]] = Field(default=[], description="The namespaces searched")
    knowledge_ids: list[str] = Field(default=[], description="Knowledge-base chunks injected (their ids)")
    items: list[dict[str, Any]] = Field(
        default=[], description="Each injected item: id, namespace, text (shortened to 200 characters), score"
    )


class CompleteData(EventData):
    type = EventType.COMPLETE
    response: str = Field(description="The final answer (the partial answer when stopped early)")
    outcome: Outcome | str = Field(default=Outcome.COMPLETED, description="Why the run stopped")
    reason: str | None = Field(
        default=None,
        description="Why it stopped early (which budget, or which call the loop guard saw repeated, and the setting)",
    )
    metrics: dict[str, Any] = Field(
        default_factory=dict,
        description="This message's tokens, cost_usd, durations and per-agent figures; "
        "`conversation`: tokens and cost of the whole conversation so far",
    )


class CancelledData(EventData):
    type = EventType.CANCELLED
    reason: str = Field(description="Who or what cancelled it")
    partial_response: str | None = Field(default=None, description="The answer streamed so far")


class ErrorData(EventData):
    type = EventType.ERROR
    message: str = Field(description="What went wrong, for people")
    kind: str | None = Field(
        default=None, description="'llm', 'hook', 'abandoned', 'recovery', 'storage' (the database could not be written or reached) or an error class"
    )
    hook: str | None = Field(default=None, description="With kind 'hook': the hook that raised")
    point: str | None = Field(default=None, description="With kind 'hook': the hook point it raised in")


PAYLOADS: dict[EventType, type[EventData]] = {
    cls.type: cls
    for cls in (
        MetadataData,
        AgentStartData,
        LLMChunkData,
        LLMCompleteData,
        AgentCompleteData,
        ToolStartData,
        ToolCompleteData,
        PermissionRequestData,
        PermissionResultData,
        SubagentStartData,
        SubagentCompleteData,
        ArtifactCreatedData,
        ArtifactUpdatedData,
        WorkflowNodeStartData,
        WorkflowNodeCompleteData,
        HandoffData,
        ContextCompactedData,
        MemoryRecalledData,
        CompleteData,
        CancelledData,
        ErrorData,
    )
}

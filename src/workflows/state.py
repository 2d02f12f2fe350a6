"""State of a compiled workflow (the parent graph) and of one step (the nested agent/tool loop),
and the plain-data shapes their nodes write.

Parent channels, all plain data and all safe for concurrent writers (Send tasks of one
superstep write together):

- `wf_input`: the validated input, written once (a delta channel: never copied again).
- `wf_outputs`: top-level node id → its latest output (a delta channel: each write is stored
  once, loops overwrite).
- `wf_groups`: split/branch execution id → its count and per-item results: the reducer that
  joins parallel work (a merge reads it).
- `wf_visits`: how often each node (and each loop edge, `a->b`) ran: iterations and loop bounds.
- `wf_came_from`: node id → the executions that routed to it (lineage parents).
- `wf_step`: what the last node decided (next node, Sends, label). Routers read it through
  LangGraph's task-local read, so each Send task's router sees its own write.
- `graph_response`, `outcome`, `phase`: read by the run driver, as for a chat (the exit sets
  the phase to completed, so a budget crossed by the last step does not mark the run stopped).

The step state reuses the chat graph's channels (`AgentState` annotations, same reducers) so
the shared tool node and the subagent step run on it unchanged (`with_agent_channels`).

Every shape here is a `TypedDict`: at run time the plain dicts that checkpoints hold.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import (
    TYPE_CHECKING,
    Annotated,
    Any,
    Literal,
    NotRequired,
    Required,
    TypedDict,
    TypeVar,
    get_type_hints,
)

from langgraph.channels.delta import DeltaChannel

from ..core.state import AgentState, AgentUpdate, Memories, OutcomeValue, PhaseValue, SubagentRecord
from ..core.store.rows import LineageRow
from ..events.status import WorkflowNodeStatus
from ..shapes import ChatMessage, JsonObject, JsonValue, PendingToolCall

_SNAPSHOT_EVERY = 100_000

StepStatus = Literal["ok", "failed", "skipped", "cancelled"]
assert {*StepStatus.__args__} == {*WorkflowNodeStatus}  # one definition: the enum


# --- what a step runs and returns -------------------------------------------------------------


class StepResult(TypedDict):
    """What a step (an agent, tool or group step) produced."""

    status: StepStatus
    output: JsonValue
    error: str | None
    repaired: NotRequired[bool]  # the answer matched its schema after the repair round
    outcome: NotRequired[str]  # a group's: "completed" or "max_turns"


class StepTaskBase(TypedDict):
    """What every step task carries: where it runs and how it announces itself."""

    execution: str  # the node execution the step belongs to
    node: str
    start_event: JsonObject  # `Emitted.dump()` of its `workflow_node_start`, emitted by `begin`
    call_suffix: str | None  # a split item's / branch path's index: keeps tool-call ids apart
    start_record: LineageRow  # the lineage record `begin` writes


class AgentTask(StepTaskBase):
    kind: Literal["agent"]
    agent: str
    instruction: str  # the rendered instruction with the schema part of the prompt
    schema: JsonObject | None  # what the answer must match (JSON Schema)
    memory_profile: NotRequired[str | None]  # the node's context profile for recall


class ToolTask(StepTaskBase):
    kind: Literal["tool"]
    tool: str
    arguments: JsonValue  # the rendered arguments
    schema: JsonObject | None


class GroupTask(StepTaskBase):
    kind: Literal["group"]
    instruction: str
    agents: list[str]  # the members, in speaking order
    mode: Literal["handoff", "order", "moderator"]
    moderator: str | None
    max_turns: int
    targets: dict[str, list[str]]  # member → the members it may hand over to
    descriptions: dict[str, str]  # member → its description


StepTask = AgentTask | ToolTask


# --- the step graphs' state -------------------------------------------------------------------


class StepChannels(TypedDict, total=False):
    """The channels every step graph has: the chat graph's three (rebuilt with `AgentState`'s
    reducers by `with_agent_channels`) and the step's own."""

    subagent_invocations: dict[str, SubagentRecord]
    pending_tool_calls: list[PendingToolCall]
    agent_memories: Memories
    phase: str
    repairs: int
    result: StepResult | None


class StepState(StepChannels, total=False):
    """One node execution's inner loop: `task` says what to run; the rest are the chat graph's
    channels so `tool_execution` and the subagent step work on it as they are."""

    task: Required[StepTask]  # the input every step starts from


class StepUpdate(AgentUpdate, total=False):
    """What a step node writes: the chat graph's writes and the step's own."""

    repairs: int
    result: StepResult | None


def memory_of(update: AgentUpdate, invocation: str) -> list[ChatMessage]:
    """The messages `update` appends to `invocation`'s memory."""
    return list((update.get("agent_memories") or {}).get(invocation) or [])


class StepOutput(TypedDict, total=False):
    result: StepResult | None


_SHARED = ("subagent_invocations", "pending_tool_calls", "agent_memories")
_Schema = TypeVar("_Schema")
_typed_dict: Callable[..., Any] = TypedDict  # the functional form: fields known at run time


def with_agent_channels(schema: type[_Schema]) -> type[_Schema]:
    """`schema` (a step state class) as LangGraph must see it: the shared channels carry
    `AgentState`'s annotations (its reducers and delta channels), so both graphs fold their
    writes alike. Checks first that the class declares the same value types as `AgentState`,
    so what type checkers read is what runs."""
    agent = get_type_hints(AgentState)
    agent_channels = get_type_hints(AgentState, include_extras=True)
    fields = get_type_hints(schema, include_extras=True)
    declared = get_type_hints(schema)
    for name in _SHARED:
        if declared[name] != agent[name]:
            raise TypeError(f"{schema.__name__}.{name} is {declared[name]}, "
                            f"but AgentState.{name} is {agent[name]}")
    fields.update({name: agent_channels[name] for name in _SHARED})
    return _typed_dict(schema.__name__, fields, total=False)


if not TYPE_CHECKING:
    StepState = with_agent_channels(StepState)


# --- the workflow graph's state ---------------------------------------------------------------


class NodeOutput(TypedDict):
    output: JsonValue


class ScopeBase(TypedDict):
    """The top-level values a split item's / branch path's templates may read."""

    input: JsonObject
    nodes: dict[str, NodeOutput]  # only the nodes its templates reference


class ScopedTask(TypedDict):
    """One split item or branch path on its way through the nodes of its chain."""

    group: str  # the split/branch execution
    opener: str  # the split/branch node
    index: int
    item: JsonValue  # the split's item (None for a branch path)
    iteration: int
    parents: list[str]
    base: ScopeBase
    chain: dict[str, JsonValue]  # outputs of the chain's nodes so far
    skip: str | None  # why the rest of the chain is skipped (an earlier node failed)


class ScopedInput(TypedDict):
    """The `Send` payload a node inside a split/branch runs on."""

    wf_task: ScopedTask


class WorkflowStep(TypedDict, total=False):
    """What a node decided, for the router after it (`compile.py`)."""

    goto: str | None  # the next node (END when None)
    sends: list[tuple[str, ScopedInput]]  # (node, payload): one `Send` each
    label: str  # a decision's chosen edge label


class ItemReport(TypedDict):
    """A split item's or branch path's result, as its merge reads it."""

    status: Literal["ok", "failed"]
    output: JsonValue
    error: NotRequired[str | None]  # absent for the items of a split with no node per item
    execution: str
    index: NotRequired[int]
    finished_at: NotRequired[float]  # a branch's merge takes the earliest success


class GroupRecord(TypedDict, total=False):
    """A split's or branch's record in `wf_groups` (writes are merged key by key)."""

    kind: Literal["split", "branch"]
    count: int
    results: dict[str, ItemReport]  # by item index (as text)
    closed: bool  # the merge ran: later arrivals are ignored
    winner: int | None  # a branch's winning path


def _replace(current: Any, writes: Sequence[Any]) -> Any:
    return writes[-1] if writes else current


def _merge(current: dict[str, JsonValue], writes: Sequence[dict[str, JsonValue]]) -> dict[str, JsonValue]:
    out = dict(current)
    for write in writes:
        out.update(write)
    return out


_V = TypeVar("_V")


def _last(current: Any, write: Any) -> Any:
    return write


def _update(current: dict[str, _V] | None, write: dict[str, _V] | None) -> dict[str, _V]:
    return {**(current or {}), **(write or {})}


def _groups(current: dict[str, GroupRecord], writes: Sequence[dict[str, GroupRecord]]) -> dict[str, GroupRecord]:
    """Group records merged key by key; their `results` merged item by item."""
    out = dict(current)
    for write in writes:
        for group, record in write.items():
            merged: GroupRecord = {**out.get(group, {}), **record}
            if "results" in record:
                merged["results"] = {**out.get(group, {}).get("results", {}), **record["results"]}
            out[group] = merged
    return out


class WorkflowState(TypedDict, total=False):
    wf_input: Annotated[JsonObject, DeltaChannel(_replace, dict, snapshot_frequency=_SNAPSHOT_EVERY)]
    wf_outputs: Annotated[dict[str, JsonValue], DeltaChannel(_merge, dict, snapshot_frequency=_SNAPSHOT_EVERY)]
    wf_groups: Annotated[dict[str, GroupRecord], DeltaChannel(_groups, dict, snapshot_frequency=_SNAPSHOT_EVERY)]
    wf_visits: Annotated[dict[str, int], _update]
    wf_came_from: Annotated[dict[str, list[str]], _update]
    wf_step: Annotated[WorkflowStep | None, _last]
    graph_response: Annotated[str | None, _last]
    outcome: Annotated[OutcomeValue | None, _last]
    phase: Annotated[PhaseValue | None, _last]  # "completed" once the exit ran (the run driver reads it)


class WorkflowUpdate(TypedDict, total=False):
    """What a workflow node writes (the reducers' inputs)."""

    wf_outputs: dict[str, JsonValue]
    wf_groups: dict[str, GroupRecord]
    wf_visits: dict[str, int]
    wf_came_from: dict[str, list[str]]
    wf_step: WorkflowStep
    graph_response: str
    outcome: OutcomeValue
    phase: PhaseValue


RESERVED_IDS = frozenset(WorkflowState.__annotations__)

"""State of a compiled workflow (the parent graph) and of one step (the nested agent/tool loop).

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
the shared tool node and the subagent step run on it unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, Required, TypedDict, get_type_hints

from langgraph.channels.delta import DeltaChannel

from ..core.state import AgentState

_SNAPSHOT_EVERY = 100_000


def _replace(current: Any, writes: Sequence[Any]) -> Any:
    return writes[-1] if writes else current


def _merge(current: dict[str, Any], writes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    out = dict(current)
    for write in writes:
        out.update(write)
    return out


def _last(current: Any, write: Any) -> Any:
    return write


def _update(current: dict[str, Any] | None, write: dict[str, Any] | None) -> dict[str, Any]:
    return {**(current or {}), **(write or {})}


def _groups(current: dict[str, Any], writes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Group records merged key by key; their `results` merged item by item."""
    out = dict(current)
    for write in writes:
        for group, record in write.items():
            merged = {**out.get(group, {}), **record}
            if "results" in record:
                merged["results"] = {**out.get(group, {}).get("results", {}), **record["results"]}
            out[group] = merged
    return out


class WorkflowState(TypedDict, total=False):
    wf_input: Annotated[dict[str, Any], DeltaChannel(_replace, dict, snapshot_frequency=_SNAPSHOT_EVERY)]
    wf_outputs: Annotated[dict[str, Any], DeltaChannel(_merge, dict, snapshot_frequency=_SNAPSHOT_EVERY)]
    wf_groups: Annotated[dict[str, Any], DeltaChannel(_groups, dict, snapshot_frequency=_SNAPSHOT_EVERY)]
    wf_visits: Annotated[dict[str, int], _update]
    wf_came_from: Annotated[dict[str, list[str]], _update]
    wf_step: Annotated[dict[str, Any] | None, _last]
    graph_response: Annotated[str | None, _last]
    outcome: Annotated[str | None, _last]
    phase: Annotated[str | None, _last]  # "completed" once the exit ran (the run driver reads it)


RESERVED_IDS = frozenset(WorkflowState.__annotations__)

_AGENT = get_type_hints(AgentState, include_extras=True)

class StepState(TypedDict, total=False):
    """One node execution's inner loop: `task` says what to run; the rest are the chat graph's
    channels so `tool_execution` and the subagent step work on it as they are."""

    task: Required[dict[str, Any]]  # the input every step starts from
    subagent_invocations: dict[str, dict[str, Any]]
    pending_tool_calls: list[dict[str, Any]]
    agent_memories: dict[str, list[dict[str, Any]]]
    phase: str
    repairs: int
    result: dict[str, Any] | None


# Type checkers read the class above; at runtime the chat graph's channels keep `AgentState`'s
# annotations (its reducers and delta channels), so both graphs fold their writes alike.
_STEP_FIELDS: dict[str, Any] = {
    **get_type_hints(StepState),
    **{name: _AGENT[name] for name in ("subagent_invocations", "pending_tool_calls", "agent_memories")},
}
if not TYPE_CHECKING:
    StepState = TypedDict("StepState", _STEP_FIELDS, total=False)


class StepOutput(TypedDict, total=False):
    result: dict[str, Any] | None

"""What every workflow node execution does, whatever its role: record its lineage, emit
`workflow_node_start` / `workflow_node_complete`, write its update (`wf_step` and the shared
channels), fail the run under `on_failure: fail`, and run its agent, tool or group step.

`NodeRunner` holds this machinery; the roles build on it (`nodes.py` the entry and the simple
roles, `decision.py`, `merge.py`, `scoped.py` for the nodes inside a split or branch).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TypedDict

from langgraph.runtime import Runtime

from ..core.context import RunContext
from ..core.store.rows import LineageRow
from ..events.envelope import Emitted
from ..events.payloads import (
    EventData,
    WorkflowNodeCompleteData,
    WorkflowNodeStartData,
    WorkflowNodeStatus,
)
from ..shapes import JsonObject, JsonValue
from . import lineage
from .errors import WorkflowNodeError
from .lineage import summary
from .schemas import schema_prompt
from .spec import NodeSpec
from .state import (
    AgentTask,
    GroupTask,
    NodeOutput,
    ScopedTask,
    StepResult,
    StepStatus,
    StepTaskBase,
    ToolTask,
    WorkflowStep,
    WorkflowUpdate,
)
from .step import run_step
from .templates import TemplateError, render, to_text
from .topology import Topology

DEFAULT_TURNS = 8


class MergeInput(TypedDict):
    """One split item's / branch path's result as a merging agent's templates see it."""

    index: int
    status: str | None
    output: JsonValue
    error: str | None


class TemplateContext(TypedDict, total=False):
    """What a node's templates may reference (see `templates.ROOTS`)."""

    input: JsonObject
    nodes: dict[str, NodeOutput]
    iteration: int
    item: JsonValue  # inside a split
    index: int  # inside a split or branch
    results: list[MergeInput]  # a merging agent
    output: JsonValue  # a decision's tool output, for `route_on`


class CompleteNote(TypedDict, total=False):
    """Extra facts for `workflow_node_complete` (fields of `WorkflowNodeCompleteData`)."""

    repaired: bool
    outcome: str
    choice: str
    exhausted: str
    count: int
    paths: int
    failed_items: list[int]


@dataclass
class Exec:
    """One execution of a node: where it sits and what its templates can see."""

    execution: str
    iteration: int
    group: str | None
    index: int | None
    parents: list[str]
    context: TemplateContext
    task: ScopedTask | None = None  # the Send payload, for nodes inside a split/branch
    visits: dict[str, int] = field(default_factory=dict)


def note_of(result: StepResult) -> CompleteNote | None:
    """Extra facts for `workflow_node_complete`: a repaired answer, a group's outcome."""
    note: CompleteNote = {}
    if result.get("repaired"):
        note["repaired"] = result.get("repaired", False)
    if result.get("outcome"):
        note["outcome"] = result.get("outcome", "")
    return note or None


class NodeRunner:
    """A workflow node's shared machinery (one instance per node of a compiled graph)."""

    def __init__(self, topo: Topology, node: NodeSpec, scope_refs: dict[str, set[str]]) -> None:
        self.topo = topo
        self.node = node
        self.scope_refs = scope_refs
        self.opener = topo.scope_of.get(node.id)
        forward = topo.forward(node.id)
        self.successor = forward[0].target if len(forward) == 1 else None
        if node.role == "merge":
            self.opener = next(o for o, s in topo.scopes.items() if s.merge == node.id)
        self.__name__ = node.id

    # --- events and lineage ------------------------------------------------------------------

    def emit(self, runtime: Runtime[RunContext], data: EventData) -> None:
        runtime.stream_writer(Emitted(data, self.node.agent))

    def start_data(self, x: Exec) -> WorkflowNodeStartData:
        return WorkflowNodeStartData(node=self.node.id, role=self.node.role, kind=self.node.kind,
                                     execution=x.execution, iteration=x.iteration, group=x.group,
                                     index=x.index, parents=x.parents)

    def complete_data(self, x: Exec, status: StepStatus, output_summary: str, error: str | None,
                      note: CompleteNote | None = None) -> WorkflowNodeCompleteData:
        return WorkflowNodeCompleteData(**self.start_data(x).model_dump(), status=WorkflowNodeStatus(status),
                                        output_summary=output_summary, error=error, **(note or {}))

    def record(self, runtime: Runtime[RunContext], x: Exec, status: str, *, input: JsonValue = None,
               output: JsonValue = None, error: str | None = None, finished: bool = True) -> LineageRow:
        return lineage.record(
            message_id=runtime.context.message_id, execution=x.execution, node=self.node,
            iteration=x.iteration, group=x.group, index=x.index, parents=x.parents,
            status=status, input=input, output=output, error=error, finished=finished,
        )

    async def finish(
        self, x: Exec, runtime: Runtime[RunContext], *, status: StepStatus, output: JsonValue = None,
        error: str | None = None, input: JsonValue = None, extra: WorkflowUpdate | None = None,
        step: WorkflowStep | None = None, note: CompleteNote | None = None,
    ) -> WorkflowUpdate:
        """Record and announce the end of `x`; its update (or `WorkflowNodeError`)."""
        store = runtime.context.services.store
        await store.put_lineage(self.record(runtime, x, status, input=input, output=output, error=error))
        self.emit(runtime, self.complete_data(x, status, summary(output), error, note))
        if status == "failed" and self.node.on_failure == "fail":
            where = f" (item {x.index})" if x.index is not None else ""
            raise WorkflowNodeError(
                f"workflow node '{self.node.id}'{where} failed: {error}. It has on_failure: fail; "
                "set on_failure: continue to let the workflow go on without it",
                node=self.node.id, execution=x.execution,
            )
        update: WorkflowUpdate = {"wf_step": step or {}, **(extra or {})}
        if x.task is None:
            visits = {self.node.id: x.iteration, **update.get("wf_visits", {})}
            update["wf_visits"] = visits
            update["wf_outputs"] = {self.node.id: output}
        return update

    def came_from(self, x: Exec) -> WorkflowUpdate:
        return {"wf_came_from": {self.successor: [x.execution]}} if self.successor else {}

    # --- steps -------------------------------------------------------------------------------

    async def run_kind(
        self, x: Exec, runtime: Runtime[RunContext], *, schema: JsonObject | None = None,
        labels: list[str] | None = None, cancel: asyncio.Event | None = None,
    ) -> tuple[StepResult, JsonValue]:
        """Render the instruction or arguments and run the step; (result, recorded input)."""
        node = self.node
        start_event = Emitted(self.start_data(x), node.agent).dump()  # waits in the step's state
        call_suffix = str(x.index) if x.index is not None else None
        talks = node.kind in ("agent", "group")  # else a tool step
        try:
            instruction = to_text(render(node.instruction, x.context)) if talks else ""
            arguments = None if talks else render(node.arguments or {}, x.context)
        except TemplateError as exc:
            self.emit(runtime, self.start_data(x))
            return {"status": "failed", "output": None, "error": str(exc)}, None
        if node.kind == "agent":
            recorded: JsonValue = {"agent": node.agent, "instruction": instruction}
        elif node.kind == "group":
            recorded = {"agents": list(node.agents or ()), "mode": node.mode or "handoff",
                        "instruction": instruction}
        else:
            recorded = {"tool": node.tool, "arguments": arguments}
        start_record = self.record(runtime, x, "running", input=recorded, finished=False)
        common: StepTaskBase = {"execution": x.execution, "node": node.id, "start_event": start_event,
                                "call_suffix": call_suffix, "start_record": start_record}
        task: AgentTask | ToolTask | GroupTask
        if node.kind == "agent":
            assert node.agent is not None  # validated: an agent step names its agent
            prompt = instruction + (schema_prompt(schema, labels) if schema else "")
            task = {"kind": "agent", "agent": node.agent, "instruction": prompt, "schema": schema, **common}
            if node.memory_profile:
                task["memory_profile"] = node.memory_profile
        elif node.kind == "group":
            agents = runtime.context.services.agents
            members = list(node.agents or ())
            task = {"kind": "group", "instruction": instruction, "agents": members, "mode": node.mode or "handoff",
                    "moderator": node.moderator, "max_turns": node.max_turns or DEFAULT_TURNS,
                    "targets": {a: [t for t in agents[a].handoffs if t in members] for a in members},
                    "descriptions": {a: agents[a].description for a in members}, **common}
        else:
            assert node.tool is not None  # validated: a tool step names its tool
            task = {"kind": "tool", "tool": node.tool, "arguments": arguments,
                    "schema": node.output_schema, **common}
        return await run_step(task, runtime, cancel), recorded

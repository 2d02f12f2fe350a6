"""Role semantics: what one graph node does for each of the seven roles.

Every workflow node is one LangGraph node (`WorkflowNode`). A node either runs at the top
level (its input is the shared `WorkflowState`) or inside a split/branch (its input is the
small `Send` payload `{"wf_task": …}` carrying the item, its parents and the few top-level
values its templates reference). It records its lineage, emits `workflow_node_start` /
`workflow_node_complete`, and writes `wf_step`, which the router after it turns into the next
node, a list of `Send`s, or a decision label (see `compile.py`).

- start: validates the input. linear: one step (an agent loop or a tool call, `step.py`).
- decision: a label chosen by its agent (a JSON choice among the edge labels, asked for and checked) or read
  from `route_on`; loop edges count their uses and fall back when exhausted.
- split: fans out over a list, one `Send` per item; the merge waits for every item.
- branch: clones its input into one `Send` per path; the first path to succeed wins and the
  others are cancelled (a running model call is cancelled; later steps of a lost path stop; a
  path that paused for approval in the same step is dropped rather than asked, see `Race`).
- merge: joins `wf_groups` results by strategy (list, concatenate, an agent, or first).
- exit: the workflow's output; `graph_response` is what the controller stores.

This module is the entry (`WorkflowNode.__call__`) and the simple roles; the shared machinery
(lineage, events, the update, running a step) is `execution.NodeRunner`, and the roles with
more to them have their own modules: `decision.py`, `merge.py`, and `scoped.py` (nodes inside
a split or branch).

A failed step with `on_failure: fail` raises `WorkflowNodeError` (the run fails, and LangGraph
cancels the superstep's other tasks); with `continue` it is recorded and the flow goes on (a
split item or branch path skips its remaining nodes and reports the failure to the merge).
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from ..core.context import RunContext
from ..core.state import ExecutionPhase
from ..shapes import JsonValue
from .decision import DecisionRole
from .execution import Exec, TemplateContext, note_of
from .lineage import node_of, summary
from .merge import MergeRole
from .race import race_for
from .schemas import problems
from .scoped import ScopedRole
from .state import GroupRecord, ScopedInput, WorkflowState, WorkflowStep, WorkflowUpdate
from .templates import TemplateError, render, to_text


class WorkflowNode(DecisionRole, MergeRole, ScopedRole):
    """One workflow node as a LangGraph node (one instance per node of a compiled graph)."""

    # --- entry -------------------------------------------------------------------------------

    async def __call__(self, state: WorkflowState | ScopedInput, runtime: Runtime[RunContext]) -> WorkflowUpdate:
        role = self.node.role
        if "wf_task" in state:
            return await self._scoped(state["wf_task"], runtime)
        x = self._top(state)
        if role == "merge":
            return await self._merge(x, state, runtime)
        if self.node.kind is None:  # a step announces itself from inside (see step.begin)
            self.emit(runtime, self.start_data(x))
        handler = {
            "start": self._start, "linear": self._linear, "decision": self._decision,
            "split": self._split, "branch": self._branch, "exit": self._exit,
        }[role]
        return await handler(x, state, runtime)

    def _top(self, state: WorkflowState) -> Exec:
        visits = dict(state.get("wf_visits") or {})
        iteration = visits.get(self.node.id, 0) + 1
        outputs = state.get("wf_outputs") or {}
        context: TemplateContext = {
            "input": state.get("wf_input") or {},
            "nodes": {k: {"output": v} for k, v in outputs.items()},
            "iteration": iteration,
        }
        parents = list((state.get("wf_came_from") or {}).get(self.node.id, []))
        return Exec(f"{self.node.id}#{iteration}", iteration, None, None, parents, context,
                    visits=visits)

    # --- roles at the top level ----------------------------------------------------------------

    async def _start(self, x: Exec, state: WorkflowState, runtime: Runtime[RunContext]) -> WorkflowUpdate:
        value = state.get("wf_input") or {}
        found = problems(self.topo.spec.input, value)
        if found:
            return await self.finish(x, runtime, status="failed", input=value,
                                     error="the input does not match the workflow's input schema: " + "; ".join(found))
        return await self.finish(x, runtime, status="ok", input=value, output=value, extra=self.came_from(x))

    async def _linear(self, x: Exec, state: WorkflowState, runtime: Runtime[RunContext]) -> WorkflowUpdate:
        result, recorded = await self.run_kind(x, runtime, schema=self.node.output_schema)
        return await self.finish(x, runtime, status=result["status"], output=result.get("output"),
                                 error=result.get("error"), input=recorded, extra=self.came_from(x),
                                 note=note_of(result))

    async def _split(self, x: Exec, state: WorkflowState, runtime: Runtime[RunContext]) -> WorkflowUpdate:
        scope = self.topo.scopes[self.node.id]
        try:
            items = render(self.node.over, x.context)
        except TemplateError as exc:
            return await self.finish(x, runtime, status="failed", error=str(exc), input={"over": self.node.over})
        if not isinstance(items, list):
            return await self.finish(x, runtime, status="failed", input={"over": self.node.over},
                                     error=f"over must give a list, got {type(items).__name__}: {summary(items, 80)}")
        group: GroupRecord = {"kind": "split", "count": len(items), "results": {}}
        chain = scope.chains[0]
        step: WorkflowStep
        if chain and items:
            step = {"sends": [(chain[0], self._payload(x, i, item, state=state)) for i, item in enumerate(items)]}
        else:  # nothing to run per item: the items are the results
            group["results"] = {str(i): {"status": "ok", "output": item, "execution": x.execution}
                                for i, item in enumerate(items)}
            step = {"goto": scope.merge}
        return await self.finish(x, runtime, status="ok", output=items, input={"over": self.node.over},
                                 extra={"wf_groups": {x.execution: group}}, step=step,
                                 note={"count": len(items)})

    async def _branch(self, x: Exec, state: WorkflowState, runtime: Runtime[RunContext]) -> WorkflowUpdate:
        scope = self.topo.scopes[self.node.id]
        outputs = state.get("wf_outputs") or {}
        value = outputs.get(node_of(x.parents[0])) if x.parents else None
        race_for(runtime, x.execution)
        group: GroupRecord = {"kind": "branch", "count": len(scope.chains), "results": {}}
        sends = [(chain[0], self._payload(x, i, None, state=state)) for i, chain in enumerate(scope.chains)]
        return await self.finish(x, runtime, status="ok", output=value, input=value,
                                 extra={"wf_groups": {x.execution: group}}, step={"sends": sends},
                                 note={"paths": len(sends)})

    async def _exit(self, x: Exec, state: WorkflowState, runtime: Runtime[RunContext]) -> WorkflowUpdate:
        outputs = state.get("wf_outputs") or {}
        try:
            if self.node.output is not None:
                output: JsonValue = render(self.node.output, x.context)
            else:
                output = outputs.get(node_of(x.parents[0])) if x.parents else None
        except TemplateError as exc:
            return await self.finish(x, runtime, status="failed", error=str(exc))
        extra: WorkflowUpdate = {"graph_response": to_text(output), "outcome": "completed",
                                 "phase": ExecutionPhase.COMPLETED.value}
        return await self.finish(x, runtime, status="ok", output=output, extra=extra)

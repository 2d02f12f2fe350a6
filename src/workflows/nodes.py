"""Role semantics: what one graph node does for each of the seven roles.

Every workflow node is one LangGraph node (`WorkflowNode`). A node either runs at the top
level (its input is the shared `WorkflowState`) or inside a split/branch (its input is the
small `Send` payload `{"wf_task": …}` carrying the item, its parents and the few top-level
values its templates reference). It records its lineage, emits `workflow_node_start` /
`workflow_node_complete`, and writes `wf_step`, which the router after it turns into the next
node, a list of `Send`s, or a decision label (see `compile.py`).

- start: validates the input. linear: one step (an agent loop or a tool call, `step.py`).
- decision: a label chosen by its agent (a JSON choice constrained to the edge labels) or read
  from `route_on`; loop edges count their uses and fall back when exhausted.
- split: fans out over a list, one `Send` per item; the merge waits for every item.
- branch: clones its input into one `Send` per path; the first path to succeed wins and the
  others are cancelled (a running model call is cancelled; later steps of a lost path stop; a
  path that paused for approval in the same step is dropped rather than asked, see `Race`).
- merge: joins `wf_groups` results by strategy (list, concatenate, an agent, or first).
- exit: the workflow's output; `graph_response` is what the controller stores.

A failed step with `on_failure: fail` raises `WorkflowNodeError` (the run fails, and LangGraph
cancels the superstep's other tasks); with `continue` it is recorded and the flow goes on (a
split item or branch path skips its remaining nodes and reports the failure to the merge).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any, TypedDict

from langgraph.errors import GraphInterrupt
from langgraph.graph import END
from langgraph.runtime import Runtime

from ..core.context import RunContext
from ..core.state import ExecutionPhase
from ..core.store.rows import LineageRow
from ..events.envelope import Emitted
from ..events.payloads import (
    EventData,
    WorkflowNodeCompleteData,
    WorkflowNodeStartData,
    WorkflowNodeStatus,
)
from . import lineage
from .errors import WorkflowNodeError
from .lineage import node_of, summary
from .race import Race, race_for
from .schemas import choice_schema, problems, schema_prompt
from .spec import NodeSpec
from .state import WorkflowState
from .step import run_step
from .templates import TemplateError, render, to_text
from .topology import Topology

CANCELLED = "another path finished first"
DEFAULT_TURNS = 8


class ScopedInput(TypedDict):
    """The `Send` payload a node inside a split/branch runs on (see `_payload`)."""

    wf_task: dict[str, Any]


@dataclass
class Exec:
    """One execution of a node: where it sits and what its templates can see."""

    execution: str
    iteration: int
    group: str | None
    index: int | None
    parents: list[str]
    context: dict[str, Any]
    task: dict[str, Any] | None = None  # the Send payload, for nodes inside a split/branch
    visits: dict[str, int] = field(default_factory=dict)


def _note(result: dict[str, Any]) -> dict[str, Any] | None:
    """Extra facts for `workflow_node_complete`: a repaired answer, a group's outcome."""
    note = {k: result[k] for k in ("repaired", "outcome") if result.get(k)}
    return note or None


class WorkflowNode:
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

    # --- entry -------------------------------------------------------------------------------

    async def __call__(
        self, state: WorkflowState | ScopedInput, runtime: Runtime[RunContext]
    ) -> dict[str, Any]:
        role = self.node.role
        if "wf_task" in state:
            return await self._scoped(state["wf_task"], runtime)
        x = self._top(state)
        if role == "merge":
            return await self._merge(x, state, runtime)
        if self.node.kind is None:  # a step announces itself from inside (see step.begin)
            self._emit(runtime, self._start_data(x))
        handler = {
            "start": self._start, "linear": self._linear, "decision": self._decision,
            "split": self._split, "branch": self._branch, "exit": self._exit,
        }[role]
        return await handler(x, state, runtime)

    def _top(self, state: WorkflowState) -> Exec:
        visits = dict(state.get("wf_visits") or {})
        iteration = visits.get(self.node.id, 0) + 1
        outputs = state.get("wf_outputs") or {}
        context = {
            "input": state.get("wf_input") or {},
            "nodes": {k: {"output": v} for k, v in outputs.items()},
            "iteration": iteration,
        }
        parents = list((state.get("wf_came_from") or {}).get(self.node.id, []))
        return Exec(f"{self.node.id}#{iteration}", iteration, None, None, parents, context,
                    visits=visits)

    # --- events and lineage ------------------------------------------------------------------

    def _emit(self, runtime: Runtime[RunContext], data: EventData) -> None:
        runtime.stream_writer(Emitted(data, self.node.agent))

    def _start_data(self, x: Exec) -> WorkflowNodeStartData:
        return WorkflowNodeStartData(node=self.node.id, role=self.node.role, kind=self.node.kind,
                                     execution=x.execution, iteration=x.iteration, group=x.group,
                                     index=x.index, parents=x.parents)

    def _complete_data(self, x: Exec, status: str, output_summary: str, error: str | None,
                       note: dict[str, Any] | None = None) -> WorkflowNodeCompleteData:
        return WorkflowNodeCompleteData(**self._start_data(x).model_dump(), status=WorkflowNodeStatus(status),
                                        output_summary=output_summary, error=error, **(note or {}))

    def _record(self, runtime: Runtime[RunContext], x: Exec, status: str, **fields: Any) -> LineageRow:
        return lineage.record(
            message_id=runtime.context.message_id, execution=x.execution, node=self.node,
            iteration=x.iteration, group=x.group, index=x.index, parents=x.parents,
            status=status, **fields,
        )

    async def _finish(
        self, x: Exec, runtime: Runtime[RunContext], *, status: str, output: Any = None,
        error: str | None = None, input: Any = None, extra: dict[str, Any] | None = None,
        step: dict[str, Any] | None = None, note: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        store = runtime.context.services.store
        await store.put_lineage(self._record(runtime, x, status, input=input, output=output, error=error))
        self._emit(runtime, self._complete_data(x, status, summary(output), error, note))
        if status == "failed" and self.node.on_failure == "fail":
            where = f" (item {x.index})" if x.index is not None else ""
            raise WorkflowNodeError(
                f"workflow node '{self.node.id}'{where} failed: {error}. It has on_failure: fail; "
                "set on_failure: continue to let the workflow go on without it",
                node=self.node.id, execution=x.execution,
            )
        update: dict[str, Any] = {"wf_step": step or {}, **(extra or {})}
        if x.task is None:
            visits = {self.node.id: x.iteration, **update.get("wf_visits", {})}
            update["wf_visits"] = visits
            update["wf_outputs"] = {self.node.id: output}
        return update

    def _came_from(self, x: Exec) -> dict[str, Any]:
        return {"wf_came_from": {self.successor: [x.execution]}} if self.successor else {}

    # --- steps -------------------------------------------------------------------------------

    async def _run_kind(
        self, x: Exec, runtime: Runtime[RunContext], *, schema: dict[str, Any] | None = None,
        labels: list[str] | None = None, cancel: asyncio.Event | None = None,
    ) -> tuple[dict[str, Any], Any]:
        """Render the instruction or arguments and run the step; (result, recorded input)."""
        node = self.node
        start_event = Emitted(self._start_data(x), node.agent).dump()  # waits in the step's state
        task: dict[str, Any] = {"execution": x.execution, "node": node.id, "kind": node.kind,
                                "start_event": start_event,
                                "call_suffix": str(x.index) if x.index is not None else None}
        try:
            if node.kind == "agent":
                instruction = to_text(render(node.instruction, x.context))
                recorded: Any = {"agent": node.agent, "instruction": instruction}
                prompt = instruction + (schema_prompt(schema, labels) if schema else "")
                task.update(agent=node.agent, instruction=prompt, schema=schema)
            elif node.kind == "group":
                instruction = to_text(render(node.instruction, x.context))
                recorded = {"agents": list(node.agents or ()), "mode": node.mode or "handoff",
                            "instruction": instruction}
                agents = runtime.context.services.agents
                members = list(node.agents or ())
                task.update(instruction=instruction, agents=members, mode=node.mode or "handoff",
                            moderator=node.moderator, max_turns=node.max_turns or DEFAULT_TURNS,
                            targets={a: [t for t in agents[a].handoffs if t in members] for a in members},
                            descriptions={a: agents[a].description for a in members})
            else:
                arguments = render(node.arguments or {}, x.context)
                recorded = {"tool": node.tool, "arguments": arguments}
                task.update(tool=node.tool, arguments=arguments, schema=node.output_schema)
        except TemplateError as exc:
            self._emit(runtime, self._start_data(x))
            return {"status": "failed", "output": None, "error": str(exc)}, None
        task["start_record"] = self._record(runtime, x, "running", input=recorded, finished=False)
        return await run_step(task, runtime, cancel), recorded

    # --- roles at the top level ----------------------------------------------------------------

    async def _start(self, x: Exec, state: WorkflowState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        value = state.get("wf_input") or {}
        found = problems(self.topo.spec.input, value)
        if found:
            return await self._finish(x, runtime, status="failed", input=value,
                                      error="the input does not match the workflow's input schema: " + "; ".join(found))
        return await self._finish(x, runtime, status="ok", input=value, output=value, extra=self._came_from(x))

    async def _linear(self, x: Exec, state: WorkflowState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        result, recorded = await self._run_kind(x, runtime, schema=self.node.output_schema)
        return await self._finish(x, runtime, status=result["status"], output=result.get("output"),
                                  error=result.get("error"), input=recorded, extra=self._came_from(x),
                                  note=_note(result))

    async def _decision(self, x: Exec, state: WorkflowState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        node = self.node
        edges = {e.label: e for e in self.topo.out_edges.get(node.id, []) if e.label is not None}
        labels = list(edges)
        recorded: Any = None
        reason = None
        try:
            if node.kind == "agent":
                result, recorded = await self._run_kind(x, runtime, schema=choice_schema(labels), labels=labels)
                if result["status"] != "ok":
                    return await self._decision_failed(x, runtime, result.get("error"), recorded)
                label, reason = result["output"]["choice"], result["output"].get("reason")
            else:
                context = x.context
                if node.kind == "tool":
                    result, recorded = await self._run_kind(x, runtime)
                    if result["status"] != "ok":
                        return await self._decision_failed(x, runtime, result.get("error"), recorded)
                    context = {**context, "output": result["output"]}
                value = render(node.route_on, context)
                recorded = {"route_on": node.route_on, "value": value, **(recorded or {})}
                label = to_text(value)
        except TemplateError as exc:
            return await self._decision_failed(x, runtime, str(exc), recorded)
        if label not in edges:
            return await self._decision_failed(
                x, runtime, f"the choice '{label}' is not one of the labels {', '.join(labels)}", recorded)
        chosen, visits, note = label, {}, {}
        edge = edges[label]
        if edge.max_iterations is not None:
            key = f"{node.id}->{edge.target}"
            used = x.visits.get(key, 0)
            if used >= edge.max_iterations:
                if node.fallback is None:
                    return await self._decision_failed(
                        x, runtime, f"'{label}' loops back to '{edge.target}', which already ran "
                        f"{used} extra time(s) (max_iterations {edge.max_iterations})", recorded)
                chosen, note = node.fallback, {"exhausted": label}
            else:
                visits[key] = used + 1
        output = {"choice": chosen, **({"reason": reason} if reason else {})}
        extra = {"wf_came_from": {edges[chosen].target: [x.execution]}}
        if visits:
            extra["wf_visits"] = visits
        return await self._finish(x, runtime, status="ok", output=output, input=recorded, extra=extra,
                                  step={"label": chosen}, note={"choice": chosen, **note})

    async def _decision_failed(self, x: Exec, runtime: Runtime[RunContext], error: Any, recorded: Any) -> dict[str, Any]:
        """A decision that cannot choose takes its fallback when it may continue; else the run fails."""
        node = self.node
        if node.on_failure == "continue" and node.fallback is not None:
            target = next(e.target for e in self.topo.out_edges[node.id] if e.label == node.fallback)
            return await self._finish(
                x, runtime, status="failed", error=str(error), input=recorded,
                output={"choice": node.fallback}, step={"label": node.fallback},
                extra={"wf_came_from": {target: [x.execution]}}, note={"choice": node.fallback})
        if node.on_failure == "continue":
            error = f"{error} (a decision can only continue through a fallback label)"
        await runtime.context.services.store.put_lineage(
            self._record(runtime, x, "failed", input=recorded, error=str(error)))
        self._emit(runtime, self._complete_data(x, "failed", "", str(error)))
        raise WorkflowNodeError(f"workflow node '{node.id}' failed: {error}",
                                node=node.id, execution=x.execution)

    def _payload(self, x: Exec, index: int, item: Any, *, state: WorkflowState) -> dict[str, Any]:
        outputs = state.get("wf_outputs") or {}
        refs = self.scope_refs.get(self.node.id, set())
        base = {"input": state.get("wf_input") or {},
                "nodes": {k: {"output": outputs[k]} for k in refs if k in outputs}}
        return {"wf_task": {"group": x.execution, "opener": self.node.id, "index": index,
                            "item": item, "iteration": x.iteration, "parents": [x.execution],
                            "base": base, "chain": {}, "skip": None}}

    async def _split(self, x: Exec, state: WorkflowState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        scope = self.topo.scopes[self.node.id]
        try:
            items = render(self.node.over, x.context)
        except TemplateError as exc:
            return await self._finish(x, runtime, status="failed", error=str(exc), input={"over": self.node.over})
        if not isinstance(items, list):
            return await self._finish(x, runtime, status="failed", input={"over": self.node.over},
                                      error=f"over must give a list, got {type(items).__name__}: {summary(items, 80)}")
        group: dict[str, Any] = {"kind": "split", "count": len(items), "results": {}}
        chain = scope.chains[0]
        if chain and items:
            step = {"sends": [[chain[0], self._payload(x, i, item, state=state)] for i, item in enumerate(items)]}
        else:  # nothing to run per item: the items are the results
            group["results"] = {str(i): {"status": "ok", "output": item, "execution": x.execution}
                                for i, item in enumerate(items)}
            step = {"goto": scope.merge}
        return await self._finish(x, runtime, status="ok", output=items, input={"over": self.node.over},
                                  extra={"wf_groups": {x.execution: group}}, step=step,
                                  note={"count": len(items)})

    async def _branch(self, x: Exec, state: WorkflowState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        scope = self.topo.scopes[self.node.id]
        outputs = state.get("wf_outputs") or {}
        value = outputs.get(node_of(x.parents[0])) if x.parents else None
        race_for(runtime, x.execution)
        group = {"kind": "branch", "count": len(scope.chains), "results": {}}
        sends = [[chain[0], self._payload(x, i, None, state=state)] for i, chain in enumerate(scope.chains)]
        return await self._finish(x, runtime, status="ok", output=value, input=value,
                                  extra={"wf_groups": {x.execution: group}}, step={"sends": sends},
                                  note={"paths": len(sends)})

    async def _exit(self, x: Exec, state: WorkflowState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        outputs = state.get("wf_outputs") or {}
        try:
            if self.node.output is not None:
                output = render(self.node.output, x.context)
            else:
                output = outputs.get(node_of(x.parents[0])) if x.parents else None
        except TemplateError as exc:
            return await self._finish(x, runtime, status="failed", error=str(exc))
        extra = {"graph_response": to_text(output), "outcome": "completed",
                 "phase": ExecutionPhase.COMPLETED.value}
        return await self._finish(x, runtime, status="ok", output=output, extra=extra)

    # --- merge -------------------------------------------------------------------------------

    async def _merge(self, x: Exec, state: WorkflowState, runtime: Runtime[RunContext]) -> dict[str, Any]:
        opener = self.opener
        assert opener is not None  # a merge always knows its opener (see `__init__`)
        visits = state.get("wf_visits") or {}
        group_id = f"{opener}#{visits.get(opener, 0)}"
        group = (state.get("wf_groups") or {}).get(group_id) or {}
        results: dict[str, Any] = group.get("results") or {}
        wait = {"wf_step": {"goto": END}}
        if group.get("closed"):
            return wait  # a path that finished after the branch was decided
        count = int(group.get("count", 0))
        x.group = group_id
        if group.get("kind") == "branch":
            wins = sorted((r for r in results.values() if r["status"] == "ok"), key=lambda r: r.get("finished_at", 0))
            if not wins and len(results) < count:
                return wait
            self._emit(runtime, self._start_data(x))
            closed = {"wf_groups": {group_id: {"closed": True}}}
            if not wins:
                x.parents = [r["execution"] for r in results.values()]
                return await self._finish(x, runtime, status="failed", error="every path of the branch failed",
                                          extra=closed, step={"goto": self.successor})
            winner = wins[0]
            race_for(runtime, group_id).won.set()  # stop the paths still running
            x.parents = [winner["execution"]]
            closed["wf_groups"][group_id]["winner"] = winner.get("index")
            return await self._finish(x, runtime, status="ok", output=winner["output"],
                                      input={"strategy": "first", "winner": winner["execution"]},
                                      extra={**closed, **self._came_from(x)}, step={"goto": self.successor})
        if len(results) < count:
            return wait
        ordered = [results[str(i)] for i in range(count)]
        x.parents = [r["execution"] for r in ordered] or [group_id]
        done = [r["output"] for r in ordered if r["status"] == "ok"]
        failed = [i for i, r in enumerate(ordered) if r["status"] != "ok"]
        strategy = self.node.strategy or "list"
        recorded: Any = {"strategy": strategy, "items": count, "failed": failed}
        extra = {"wf_groups": {group_id: {"closed": True}}, **self._came_from(x)}
        note = {"failed_items": failed} if failed else None
        if strategy == "agent":
            x.context = {**x.context, "results": [{"index": i, **{k: r.get(k) for k in ("status", "output", "error")}}
                                                  for i, r in enumerate(ordered)]}
            result, recorded = await self._run_kind(x, runtime, schema=self.node.output_schema)
            return await self._finish(x, runtime, status=result["status"], output=result.get("output"),
                                      error=result.get("error"), input=recorded, extra=extra,
                                      step={"goto": self.successor}, note=note)
        self._emit(runtime, self._start_data(x))
        output: Any = done if strategy == "list" else self.node.separator.join(to_text(v) for v in done)
        return await self._finish(x, runtime, status="ok", output=output, input=recorded, extra=extra,
                                  step={"goto": self.successor}, note=note)

    # --- inside a split or branch ------------------------------------------------------------

    async def _race_step(self, x: Exec, runtime: Runtime[RunContext], race: Race, last: bool) -> tuple[dict[str, Any], Any]:
        """A branch path's step: cancelled when another path wins; its first success wins."""
        race.enter()
        paused = False
        try:
            try:
                result, recorded = await self._run_kind(x, runtime, schema=self.node.output_schema, cancel=race.won)
            except GraphInterrupt:
                paused = True
                race.leave()  # paused paths no longer hold the race open
                if await race.decided_by_another():
                    return {"status": "cancelled", "output": None, "error": CANCELLED}, None
                raise
            if last and result["status"] == "ok":
                race.won.set()  # first success: cancel the other paths at once
            return result, recorded
        finally:
            if not paused:
                race.leave()

    async def _scoped(self, task: dict[str, Any], runtime: Runtime[RunContext]) -> dict[str, Any]:
        node = self.node
        base = task["base"]
        context = {
            "input": base["input"],
            "nodes": {**base["nodes"], **{k: {"output": v} for k, v in task["chain"].items()}},
            "item": task["item"], "index": task["index"], "iteration": task["iteration"],
        }
        x = Exec(f"{node.id}#{task['iteration']}[{task['index']}]", task["iteration"], task["group"],
                 task["index"], list(task["parents"]), context, task=task)
        branch = self.topo.scopes[task["opener"]].kind == "branch"
        race = race_for(runtime, task["group"]) if branch else None
        cancel = race.won if race is not None else None
        last = self.topo.next_in_chain(node.id) is None
        recorded: Any = {"item": task["item"]} if not branch else None
        if task.get("skip"):
            self._emit(runtime, self._start_data(x))
            result = {"status": "skipped", "output": None, "error": task["skip"]}
        elif cancel is not None and cancel.is_set():
            self._emit(runtime, self._start_data(x))
            result = {"status": "cancelled", "output": None, "error": CANCELLED}
        else:
            result, recorded = await self._race_step(x, runtime, race, last) if race else \
                await self._run_kind(x, runtime, schema=node.output_schema)
            if not branch:
                recorded = {"item": task["item"], **(recorded or {})}
        status = result["status"]
        if status == "cancelled":
            return await self._finish(x, runtime, status=status, error=result.get("error"),
                                      input=recorded, step={"goto": END})
        nxt = self.topo.next_in_chain(node.id)
        output = result.get("output")
        if nxt is not None:
            skip = task.get("skip") or (f"'{node.id}' failed: {result.get('error')}" if status == "failed" else None)
            payload = {**task, "parents": [x.execution], "chain": {**task["chain"], node.id: output}, "skip": skip}
            step: dict[str, Any] = {"sends": [[nxt, {"wf_task": payload}]]}
            extra: dict[str, Any] = {}
        else:
            report = {"status": "ok" if status == "ok" else "failed", "output": output,
                      "error": result.get("error"), "execution": x.execution,
                      "index": task["index"], "finished_at": time.time()}
            step = {"goto": self.topo.scopes[task["opener"]].merge}
            extra = {"wf_groups": {task["group"]: {"results": {str(task["index"]): report}}}}
        return await self._finish(x, runtime, status=status, output=output, error=result.get("error"),
                                  input=recorded, extra=extra, step=step, note=_note(result))

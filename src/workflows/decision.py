"""The decision role: a node that picks one of its outgoing edge labels.

The label is chosen by its agent (asked for a JSON choice among the labels and checked, one repair round)
or read from `route_on` (after a tool step, its output is `output` there). A loop edge
(`max_iterations`) counts its uses; once exhausted the decision takes its `fallback` label.
A decision that cannot choose takes its fallback when it may continue; otherwise the run fails.
"""

from __future__ import annotations

from langgraph.runtime import Runtime

from ..core.context import RunContext
from ..shapes import JsonValue
from .errors import WorkflowNodeError
from .execution import CompleteNote, Exec, NodeRunner
from .schemas import choice_schema
from .state import WorkflowState, WorkflowUpdate
from .templates import TemplateError, render, to_text


class DecisionRole(NodeRunner):
    async def _decision(self, x: Exec, state: WorkflowState, runtime: Runtime[RunContext]) -> WorkflowUpdate:
        node = self.node
        edges = {e.label: e for e in self.topo.out_edges.get(node.id, []) if e.label is not None}
        labels = list(edges)
        recorded: JsonValue = None
        reason = None
        try:
            if node.kind == "agent":
                result, recorded = await self.run_kind(x, runtime, schema=choice_schema(labels), labels=labels)
                if result["status"] != "ok":
                    return await self._decision_failed(x, runtime, result.get("error"), recorded)
                label, reason = result["output"]["choice"], result["output"].get("reason")
            else:
                context = x.context
                if node.kind == "tool":
                    result, recorded = await self.run_kind(x, runtime)
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
        chosen = label
        visits: dict[str, int] = {}
        note: CompleteNote = {}
        edge = edges[label]
        if edge.max_iterations is not None:
            key = f"{node.id}->{edge.target}"
            used = x.visits.get(key, 0)
            if used >= edge.max_iterations:
                if node.fallback is None:
                    return await self._decision_failed(
                        x, runtime, f"'{label}' loops back to '{edge.target}', which already ran "
                        f"{used} extra time(s) (max_iterations {edge.max_iterations})", recorded)
                chosen = node.fallback
                note = {"exhausted": label}
            else:
                visits[key] = used + 1
        output = {"choice": chosen, **({"reason": reason} if reason else {})}
        extra: WorkflowUpdate = {"wf_came_from": {edges[chosen].target: [x.execution]}}
        if visits:
            extra["wf_visits"] = visits
        return await self.finish(x, runtime, status="ok", output=output, input=recorded, extra=extra,
                                 step={"label": chosen}, note={"choice": chosen, **note})

    async def _decision_failed(self, x: Exec, runtime: Runtime[RunContext], error: object,
                               recorded: JsonValue) -> WorkflowUpdate:
        """A decision that cannot choose takes its fallback when it may continue; else the run fails."""
        node = self.node
        if node.on_failure == "continue" and node.fallback is not None:
            target = next(e.target for e in self.topo.out_edges[node.id] if e.label == node.fallback)
            return await self.finish(
                x, runtime, status="failed", error=str(error), input=recorded,
                output={"choice": node.fallback}, step={"label": node.fallback},
                extra={"wf_came_from": {target: [x.execution]}}, note={"choice": node.fallback})
        if node.on_failure == "continue":
            error = f"{error} (a decision can only continue through a fallback label)"
        await runtime.context.services.store.put_lineage(
            self.record(runtime, x, "failed", input=recorded, error=str(error)))
        self.emit(runtime, self.complete_data(x, "failed", "", str(error)))
        raise WorkflowNodeError(f"workflow node '{node.id}' failed: {error}",
                                node=node.id, execution=x.execution)

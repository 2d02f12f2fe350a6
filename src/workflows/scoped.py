"""Nodes inside a split or branch: one execution per item or path, carried by `Send`.

A split item or branch path travels its chain of nodes as a small `Send` payload
(`ScopedTask`: the item, its parents, the few top-level values its templates reference, the
chain's outputs so far), never through the shared state, so parallel items do not see each
other. The chain's last node reports to `wf_groups`, where the merge reads it. A failed node
under `on_failure: continue` skips the rest of its chain and reports the failure. In a branch
each path's step races the others (`race.py`): the first success wins and the rest stop.
"""

from __future__ import annotations

import time

from langgraph.errors import GraphInterrupt
from langgraph.graph import END
from langgraph.runtime import Runtime

from ..core.context import RunContext
from ..shapes import JsonValue
from .execution import Exec, NodeRunner, TemplateContext, note_of
from .race import Race, race_for
from .state import (
    ItemReport,
    ScopeBase,
    ScopedInput,
    ScopedTask,
    StepResult,
    WorkflowState,
    WorkflowStep,
    WorkflowUpdate,
)

CANCELLED = "another path finished first"


class ScopedRole(NodeRunner):
    def _payload(self, x: Exec, index: int, item: JsonValue, *, state: WorkflowState) -> ScopedInput:
        """The `Send` payload that starts item (or path) `index` on the scope's first node."""
        outputs = state.get("wf_outputs") or {}
        refs = self.scope_refs.get(self.node.id, set())
        base: ScopeBase = {"input": state.get("wf_input") or {},
                           "nodes": {k: {"output": outputs[k]} for k in refs if k in outputs}}
        return {"wf_task": {"group": x.execution, "opener": self.node.id, "index": index,
                            "item": item, "iteration": x.iteration, "parents": [x.execution],
                            "base": base, "chain": {}, "skip": None}}

    async def _race_step(self, x: Exec, runtime: Runtime[RunContext], race: Race,
                         last: bool) -> tuple[StepResult, JsonValue]:
        """A branch path's step: cancelled when another path wins; its first success wins."""
        race.enter()
        paused = False
        try:
            try:
                result, recorded = await self.run_kind(x, runtime, schema=self.node.output_schema, cancel=race.won)
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

    async def _scoped(self, task: ScopedTask, runtime: Runtime[RunContext]) -> WorkflowUpdate:
        node = self.node
        base = task["base"]
        context: TemplateContext = {
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
        recorded: JsonValue = {"item": task["item"]} if not branch else None
        result: StepResult
        if task.get("skip"):
            self.emit(runtime, self.start_data(x))
            result = {"status": "skipped", "output": None, "error": task["skip"]}
        elif cancel is not None and cancel.is_set():
            self.emit(runtime, self.start_data(x))
            result = {"status": "cancelled", "output": None, "error": CANCELLED}
        else:
            result, recorded = await self._race_step(x, runtime, race, last) if race else \
                await self.run_kind(x, runtime, schema=node.output_schema)
            if not branch:
                recorded = {"item": task["item"], **(recorded or {})}
        status = result["status"]
        if status == "cancelled":
            return await self.finish(x, runtime, status=status, error=result.get("error"),
                                     input=recorded, step={"goto": END})
        nxt = self.topo.next_in_chain(node.id)
        output = result.get("output")
        extra: WorkflowUpdate = {}
        if nxt is not None:
            skip = task.get("skip") or (f"'{node.id}' failed: {result.get('error')}" if status == "failed" else None)
            payload: ScopedTask = {**task, "parents": [x.execution], "chain": {**task["chain"], node.id: output},
                                   "skip": skip}
            step: WorkflowStep = {"sends": [(nxt, {"wf_task": payload})]}
        else:
            report: ItemReport = {"status": "ok" if status == "ok" else "failed", "output": output,
                                  "error": result.get("error"), "execution": x.execution,
                                  "index": task["index"], "finished_at": time.time()}
            step = {"goto": self.topo.scopes[task["opener"]].merge}
            extra = {"wf_groups": {task["group"]: {"results": {str(task["index"]): report}}}}
        return await self.finish(x, runtime, status=status, output=output, error=result.get("error"),
                                 input=recorded, extra=extra, step=step, note=note_of(result))

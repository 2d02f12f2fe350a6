"""The merge role: join a split's items or a branch's paths, read from `wf_groups`.

A merge runs each time an item or path reports (they arrive as parallel `Send` tasks) and
waits until its group is complete. A split's merge joins the items in index order by
strategy (`list`, `concatenate`, or an `agent` that reads `{{ results }}`); failed items are
reported beside the output. A branch's merge takes the earliest success, stops the paths
still running (`race.py`), and closes the group so later arrivals are ignored.
"""

from __future__ import annotations

from langgraph.graph import END
from langgraph.runtime import Runtime

from ..core.context import RunContext
from ..shapes import JsonValue
from .execution import CompleteNote, Exec, NodeRunner
from .race import race_for
from .state import GroupRecord, ItemReport, WorkflowState, WorkflowUpdate
from .templates import to_text


class MergeRole(NodeRunner):
    async def _merge(self, x: Exec, state: WorkflowState, runtime: Runtime[RunContext]) -> WorkflowUpdate:
        opener = self.opener
        assert opener is not None  # a merge always knows its opener (see `NodeRunner.__init__`)
        visits = state.get("wf_visits") or {}
        group_id = f"{opener}#{visits.get(opener, 0)}"
        group: GroupRecord = (state.get("wf_groups") or {}).get(group_id) or {}
        results: dict[str, ItemReport] = group.get("results") or {}
        wait: WorkflowUpdate = {"wf_step": {"goto": END}}
        if group.get("closed"):
            return wait  # a path that finished after the branch was decided
        count = int(group.get("count", 0))
        x.group = group_id
        if group.get("kind") == "branch":
            return await self._join_branch(x, runtime, group_id, results, count)
        if len(results) < count:
            return wait
        ordered = [results[str(i)] for i in range(count)]
        x.parents = [r["execution"] for r in ordered] or [group_id]
        done = [r["output"] for r in ordered if r["status"] == "ok"]
        failed = [i for i, r in enumerate(ordered) if r["status"] != "ok"]
        strategy = self.node.strategy or "list"
        recorded: JsonValue = {"strategy": strategy, "items": count, "failed": failed}
        extra: WorkflowUpdate = {"wf_groups": {group_id: {"closed": True}}, **self.came_from(x)}
        note: CompleteNote | None = {"failed_items": failed} if failed else None
        if strategy == "agent":
            x.context = {**x.context, "results": [{"index": i, "status": r.get("status"), "output": r.get("output"),
                                                   "error": r.get("error")} for i, r in enumerate(ordered)]}
            result, recorded = await self.run_kind(x, runtime, schema=self.node.output_schema)
            return await self.finish(x, runtime, status=result["status"], output=result.get("output"),
                                     error=result.get("error"), input=recorded, extra=extra,
                                     step={"goto": self.successor}, note=note)
        self.emit(runtime, self.start_data(x))
        output: JsonValue = done if strategy == "list" else self.node.separator.join(to_text(v) for v in done)
        return await self.finish(x, runtime, status="ok", output=output, input=recorded, extra=extra,
                                 step={"goto": self.successor}, note=note)

    async def _join_branch(self, x: Exec, runtime: Runtime[RunContext], group_id: str,
                           results: dict[str, ItemReport], count: int) -> WorkflowUpdate:
        """The first path to succeed wins (once every path failed: the merge fails)."""
        wins = sorted((r for r in results.values() if r["status"] == "ok"), key=lambda r: r.get("finished_at", 0))
        if not wins and len(results) < count:
            return {"wf_step": {"goto": END}}
        self.emit(runtime, self.start_data(x))
        closed: GroupRecord = {"closed": True}
        if not wins:
            x.parents = [r["execution"] for r in results.values()]
            return await self.finish(x, runtime, status="failed", error="every path of the branch failed",
                                     extra={"wf_groups": {group_id: closed}}, step={"goto": self.successor})
        winner = wins[0]
        race_for(runtime, group_id).won.set()  # stop the paths still running
        x.parents = [winner["execution"]]
        closed["winner"] = winner.get("index")
        return await self.finish(x, runtime, status="ok", output=winner["output"],
                                 input={"strategy": "first", "winner": winner["execution"]},
                                 extra={"wf_groups": {group_id: closed}, **self.came_from(x)},
                                 step={"goto": self.successor})

"""One node execution's work: an agent loop or a tool call, as a small nested LangGraph graph.

```
begin ──► agent ──► tool_execution ──► agent ──► … ──► END   (kind: agent)
  └─────────────────► tool_execution ──► finish ──► END      (kind: tool)
```
`agent` is the chat graph's subagent step (one LLM call, the agent's prompt and tools, its
`max_tool_rounds`); `tool_execution` is the chat graph's shared tool node, unchanged: CONFIRM
tools `interrupt()` there exactly as in a chat run, the ledger keeps approved calls to one
execution, and the permission request reaches the controller as usual.

The graph runs *inside* a workflow node (a nested graph call), so it gets its own checkpoint
namespace per node execution: parallel split items each loop and pause on their own, several
pauses are resumed together by interrupt id, and on resume only the paused items continue.
`begin` emits `workflow_node_start` once (a resumed node re-runs its wrapper, not `begin`).
Custom events are forwarded to the parent stream by `run_step`.

A step whose agent repeats one failing call until the loop guard stops it (`run.loop_guard`)
fails with outcome `loop_detected`: the tool node marks its invocation failed, and `agent` ends
the step instead of asking the model again.

An agent's answer is checked against the node's output schema (or, for a decision, the
choice schema); a mismatch gets exactly one repair round before the node fails.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from typing import Any

from langgraph.graph import END
from langgraph.runtime import Runtime

from ..core.agent_nodes import approval_flags, subagent_step
from ..core.context import RunContext
from ..core.state import SubagentRecordUpdate
from ..core.tool_node import tool_execution
from ..events.envelope import Emitted
from ..shapes import ChatMessage, JsonValue, PendingToolCall, RawToolCall
from .group import GROUP_GRAPH, step_graph_builder
from .schemas import check_output, problems
from .state import GroupTask, StepResult, StepState, StepTask, StepUpdate, memory_of

ERROR_PREFIX = "ERROR: "


async def begin(state: StepState, runtime: Runtime[RunContext]) -> StepUpdate:
    task = state["task"]
    runtime.stream_writer(Emitted.load(task["start_event"]))
    await runtime.context.services.store.put_lineage(task["start_record"])
    if task["kind"] == "agent":
        record: SubagentRecordUpdate = {"agent": task["agent"], "instruction": task["instruction"],
                                        "tool_call_id": None, "status": "running", "rounds": 0, "order": 0}
        if task.get("memory_profile"):  # the node's context profile: this step recalls with it
            record["memory_profile"] = task.get("memory_profile")
        return {"subagent_invocations": {task["execution"]: record}, "repairs": 0}
    call: RawToolCall = {
        "id": f"wf-{task['execution']}",
        "name": task["tool"],
        "arguments": json.dumps(task["arguments"], ensure_ascii=False),
    }
    flags = await approval_flags(runtime.context, [call])
    pending: PendingToolCall = {
        **call,
        "agent": f"workflow:{task['node']}",
        "invocation": task["execution"],
        "round": 1,
        "needs_approval": bool(flags.get(call["id"], False)),
    }
    return {"pending_tool_calls": [pending]}


async def agent(state: StepState, runtime: Runtime[RunContext]) -> StepUpdate:
    task = state["task"]
    invocation = task["execution"]
    record = (state.get("subagent_invocations") or {})[invocation]
    if record["status"] == "failed":  # stopped in the tool node (the loop guard): no model call
        stopped: StepResult = {"status": "failed", "output": None, "error": record.get("error")}
        if outcome := record.get("outcome"):
            stopped["outcome"] = outcome
        return {"result": stopped}
    memory = list((state.get("agent_memories") or {}).get(invocation, []))
    answer_update, _compacted = await subagent_step(runtime.context, runtime, invocation, record, memory, None, set())
    update: StepUpdate = {**answer_update}
    if task.get("call_suffix") and update.get("pending_tool_calls"):
        _scope_call_ids(update, invocation, task["call_suffix"] or "")
    outcome = (update.get("subagent_invocations") or {}).get(invocation, {})
    if outcome.get("status") == "failed":
        update["result"] = {"status": "failed", "output": None, "error": outcome.get("error")}
    elif outcome.get("status") == "done":
        answer = outcome.get("result") or ""
        output, found = check_output(task.get("schema"), answer)
        repairs = int(state.get("repairs") or 0)
        if not found:
            update["result"] = {"status": "ok", "output": output, "error": None,
                                "repaired": repairs > 0}
        elif repairs < 1:
            note: ChatMessage = {
                "role": "user",
                "content": "Your answer could not be used: " + "; ".join(found)
                + ". Answer again, with only the JSON object the instruction asks for.",
            }
            update["agent_memories"] = {invocation: [*memory_of(update, invocation), note]}
            update["subagent_invocations"] = {invocation: {"status": "running"}}
            update["repairs"] = repairs + 1
        else:
            update["result"] = {
                "status": "failed", "output": None,
                "error": "the answer did not match the output schema after one repair round: "
                + "; ".join(found),
            }
    return update


def _scope_call_ids(update: StepUpdate, invocation: str, suffix: str) -> None:
    """Parallel items pause together: keep their tool-call ids apart (providers may reuse
    ids like `call_0`) by suffixing the item index, in the calls and in the agent's memory."""
    calls = update.get("pending_tool_calls") or []
    renamed = {c["id"]: f"{c['id']}.{suffix}" for c in calls}
    update["pending_tool_calls"] = [{**c, "id": renamed[c["id"]]} for c in calls]
    messages = memory_of(update, invocation)
    first = messages[0]
    messages[0] = {**first, "tool_calls": [{**tc, "id": renamed.get(tc["id"], tc["id"])}
                                           for tc in first.get("tool_calls") or []]}
    update["agent_memories"] = {**(update.get("agent_memories") or {}), invocation: messages}


async def finish(state: StepState) -> StepUpdate:
    """A tool step's output: the tool's result as the model would see it, JSON when it is."""
    task = state["task"]
    memory = (state.get("agent_memories") or {}).get(task["execution"], [])
    content = memory[-1].get("content") if memory else ""
    text = content if isinstance(content, str) else ""  # a tool's result is text
    if text.startswith(ERROR_PREFIX):
        return {"result": {"status": "failed", "output": None, "error": text[len(ERROR_PREFIX):]}}
    try:
        output: JsonValue = json.loads(text)
    except json.JSONDecodeError:
        output = text
    schema = task.get("schema")
    found = problems(schema, output) if schema else []
    if found:
        return {"result": {"status": "failed", "output": output,
                           "error": "the tool's result did not match the output schema: " + "; ".join(found)}}
    return {"result": {"status": "ok", "output": output, "error": None}}


def _after_begin(state: StepState) -> str:
    return "agent" if state["task"]["kind"] == "agent" else "tool_execution"


def _after_agent(state: StepState) -> str:
    if state.get("result") is not None:
        return END
    status = (state.get("subagent_invocations") or {}).get(state["task"]["execution"], {}).get("status")
    return "tool_execution" if status == "tools" else "agent"


def _after_tools(state: StepState) -> str:
    return "agent" if state["task"]["kind"] == "agent" else "finish"


def build_step_graph() -> Any:
    builder = step_graph_builder(
        StepState, begin=begin, agent=agent, tool_execution=tool_execution, finish=finish
    )
    builder.add_conditional_edges("begin", _after_begin, ["agent", "tool_execution"])
    builder.add_conditional_edges("agent", _after_agent, ["tool_execution", "agent", END])
    builder.add_conditional_edges("tool_execution", _after_tools, ["agent", "finish"])
    builder.add_edge("finish", END)
    return builder.compile()


STEP_GRAPH = build_step_graph()


async def run_step(
    task: StepTask | GroupTask, runtime: Runtime[RunContext], cancel: asyncio.Event | None = None
) -> StepResult:
    """Run one step as a nested graph, forwarding its events; `cancel` stops it cleanly (its
    model call or tool is cancelled) and the step reports status `cancelled`."""

    async def consume() -> StepResult:
        result: StepResult | None = None
        graph = GROUP_GRAPH if task["kind"] == "group" else STEP_GRAPH
        async for mode, chunk in graph.astream({"task": task}, stream_mode=["custom", "updates"]):
            if mode == "custom":
                runtime.stream_writer(chunk)
            elif isinstance(chunk, dict):
                for update in chunk.values():
                    if isinstance(update, dict) and update.get("result") is not None:
                        result = update["result"]
        return result or {"status": "failed", "output": None, "error": "the step ended without a result"}

    if cancel is not None and cancel.is_set():
        return {"status": "cancelled", "output": None, "error": "another path finished first"}
    # The nested run is a task of its own, stopped explicitly: when LangGraph cancels this
    # node (a sibling failed, the run was cancelled) the nested graph's running tasks would
    # otherwise outlive it (a model stream left open).
    work = asyncio.ensure_future(consume())
    stop = asyncio.ensure_future(cancel.wait()) if cancel is not None else None
    try:
        await asyncio.wait({work, stop} - {None}, return_when=asyncio.FIRST_COMPLETED)
    except asyncio.CancelledError:
        await _stop(work)
        raise
    finally:
        if stop is not None:
            stop.cancel()
    if not work.done():  # the branch was won by another path
        await _stop(work)
        return {"status": "cancelled", "output": None, "error": "another path finished first"}
    return work.result()


async def _stop(work: asyncio.Future[Any]) -> None:
    work.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await work

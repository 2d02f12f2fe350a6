"""Graph nodes that call a model: `lead_agent` and `subagents`.

One model call per agent step, through the `Model` protocol only (`Services.model_for` picks
the implementation from the agent's profile). Both nodes return partial updates built by
`merge_agent_response_to_state`, including the phase that routes the next step. Parallel delegation: every subagent invocation that needs a
step runs concurrently inside one `subagents` node (asyncio), so their model calls overlap
while their tool rounds still go through the shared tool node, where permissions apply.
A subagent failure becomes that call's error result; its siblings still answer.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from langgraph.runtime import Runtime

from ..agents.model import ModelRequest, ModelResponse
from ..agents.prompts import PLAN_ID, lead_messages, subagent_messages
from ..agents.spec import AgentSpec
from ..errors import ArtifactFlowError, LLMError
from ..hooks import nodes as hook_points
from ..hooks.runner import HookError
from ..hooks.types import AgentStep
from ..tools.base import Permission
from .agent_window import node_result, windowed_call
from .context import RunContext
from .state import LEAD, AgentState, ExecutionPhase, merge_agent_response_to_state
from .window import Prices, cost_usd, rounds_in

HELD = "lead~held"  # lead tool results waiting for the round's subagents to finish
REPLACED = "~replaced"  # a subagent step's compacted memory, merged into the node's writes


class Emitter:
    """Sends node events to the controller through LangGraph's custom stream."""

    def __init__(self, runtime: Runtime[RunContext], agent: str, invocation: str) -> None:
        self._write = runtime.stream_writer
        self.agent = agent
        self.invocation = invocation

    def __call__(self, type_: str, **data: Any) -> None:
        self._write(
            {"type": type_, "agent": self.agent, "data": {"invocation": self.invocation, **data}}
        )


def close_lead_round(state: AgentState) -> list[dict[str, Any]]:
    """Once every subagent of the lead's last round answered, build that round's tool
    messages in call order: held tool results plus each subagent's answer."""
    invocations = state.get("subagent_pending") or {}
    if not invocations:
        return []
    memories = state.get("agent_memories") or {}
    lead_memory = memories.get(LEAD, [])
    held = {m["tool_call_id"]: m for m in memories.get(HELD, [])}
    by_call = {rec["tool_call_id"]: rec for rec in invocations.values()}
    last = next((m for m in reversed(lead_memory) if m.get("role") == "assistant"), None)
    messages: list[dict[str, Any]] = []
    for call in (last or {}).get("tool_calls", []):
        call_id = call["id"]
        if call_id in held:
            messages.append(held[call_id])
        elif call_id in by_call:
            rec = by_call[call_id]
            if rec.get("status") == "done":
                text = rec.get("result") or "(the subagent returned no text)"
            else:
                text = f"ERROR: subagent '{rec['agent']}' failed: {rec.get('error')}"
                if rec.get("result"):
                    text += f"\nPartial answer: {rec['result']}"
            messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
    return messages + [m for m in memories.get(HELD, []) if m.get("role") != "tool"]  # hooks' notes


async def _approval_flags(
    context: RunContext, calls: list[dict[str, Any]]
) -> dict[str, bool]:
    svc = context.services
    confirm = [c for c in calls if svc.tools.permission(c["name"]) is Permission.CONFIRM]
    if not confirm:
        return {}
    allowed = await svc.store.always_allowed(context.conversation_id)
    return {c["id"]: c["name"] not in allowed for c in confirm}


def _unique_ids(calls: list[dict[str, Any]], taken: set[str], suffix: str) -> list[dict[str, Any]]:
    """Providers may reuse ids like `call_0`; ids must be unique within a round."""
    out = []
    for call in calls:
        call_id = call["id"]
        while call_id in taken:
            call_id = f"{call_id}_{suffix}"
        taken.add(call_id)
        out.append({**call, "id": call_id})
    return out


async def _llm_step(
    context: RunContext,
    spec: AgentSpec,
    messages: list[dict[str, Any]],
    emit: Emitter,
    agent: AgentStep | None = None,
) -> ModelResponse:
    svc = context.services
    model, target = svc.model_for(spec)
    tools = svc.tools.specs(spec.tools)
    request = ModelRequest(
        target, messages, tools or None, agent=spec.name,
        max_output_tokens=spec.max_output_tokens, tool_choice=spec.tool_choice,
    )
    request = await hook_points.before_model(context, agent, request)

    def on_delta(text: str) -> None:
        emit("llm_chunk", delta=text)

    started = time.perf_counter()
    try:
        response = await model.complete(request, on_delta if hook_points.streams(context) else None)
    except Exception as exc:
        await hook_points.model_failed(context, agent, exc)
        raise
    duration = (time.perf_counter() - started) * 1000
    response = await hook_points.after_model(context, agent, request, response, duration)
    usage = response.usage
    emit(
        "llm_complete",
        content=response.content,
        tool_calls=response.tool_calls,
        model=response.model,
        # A usage the provider did not report stays None (unknown), never a made-up 0.
        usage={
            "prompt_tokens": usage.prompt_tokens if usage else None,
            "completion_tokens": usage.completion_tokens if usage else None,
        },
        duration_ms=round(duration, 2),
        attempts=response.attempts,
        finish_reason=response.finish_reason,
        cost_usd=(
            cost_usd(usage.prompt_tokens, usage.completion_tokens, Prices.of(target)) if usage else None
        ),
    )
    return response


async def lead_agent(state: AgentState, runtime: Runtime[RunContext]) -> Any:
    context = runtime.context
    svc = context.services
    spec = svc.lead
    emit = Emitter(runtime, spec.name, LEAD)
    memories = state.get("agent_memories") or {}
    memory = list(memories.get(LEAD, []))
    closing = await hook_points.subagent_answers(context, state, close_lead_round(state))
    memory += closing
    artifacts = None
    if any(name.endswith("_artifact") or name == "list_artifacts" for name in spec.tools):
        artifacts = await svc.store.list_artifacts(context.conversation_id)
    fixed = lead_messages(
        spec,
        task=state.get("current_task", ""),
        history=state.get("conversation_history") or [],
        memory=[],
        subagents=svc.subagents_for(spec),
        artifacts=artifacts,
    )
    used = rounds_in(memory)  # summarized rounds count too
    emit("agent_start", round=used + 1)
    agent = await hook_points.agent_start(context, spec, LEAD, used + 1)
    step = await windowed_call(
        context, spec, LEAD, fixed=fixed, memory=memory, task=state.get("current_task", ""),
        emit=emit, call=lambda messages: _llm_step(context, spec, messages, emit, agent),
        on_compacted=lambda result, model: hook_points.compacted(context, agent, result, summary_model=model),
    )
    response = step.response
    calls = _unique_ids(response.tool_calls, set(), "dup")
    calls, refused = await hook_points.decide_calls(context, agent, calls)
    update = merge_agent_response_to_state(
        agent=spec.name,
        invocation=LEAD,
        content=response.content,
        tool_calls=calls,
        needs_approval=await _approval_flags(context, [c for c in calls if c["id"] not in refused]),
        rounds_used=used,
        max_tool_rounds=spec.max_tool_rounds,
    )
    hook_points.mark_refused(update, refused)
    if state.get("current_agent") != spec.name:
        update["current_agent"] = spec.name
    if closing:
        update["agent_memories"] = {LEAD: closing + update["agent_memories"][LEAD], HELD: None}
        update["subagent_pending"] = None
    emit(
        "agent_complete",
        content=response.content,
        tool_calls=len(calls),
        outcome=update.get("outcome"),
    )
    await hook_points.agent_end(context, agent, response.content, len(calls), update.get("outcome"))
    return node_result(update, step.replaced(update, LEAD))


async def _subagent_step(
    context: RunContext,
    runtime: Runtime[RunContext],
    invocation: str,
    record: dict[str, Any],
    memory: list[dict[str, Any]],
    plan: Mapping[str, Any] | None,
    taken: set[str],
) -> dict[str, Any]:
    svc = context.services
    spec = svc.agents[record["agent"]]
    emit = Emitter(runtime, spec.name, invocation)
    rounds = int(record.get("rounds", 0))
    if rounds == 0 and not memory:
        emit("subagent_start", instruction=record["instruction"], tool_call_id=record["tool_call_id"])
    emit("agent_start", round=rounds + 1)
    agent = await hook_points.agent_start(context, spec, invocation, rounds + 1, record)
    fixed = subagent_messages(spec, instruction=record["instruction"], plan=plan, memory=[])
    try:
        step = await windowed_call(
            context, spec, invocation, fixed=fixed, memory=memory, task=record["instruction"],
            emit=emit, call=lambda messages: _llm_step(context, spec, messages, emit, agent),
            on_compacted=lambda result, model: hook_points.compacted(context, agent, result, summary_model=model),
        )
        response = step.response
    except HookError:
        raise  # a failing hook ends the run; it is not this subagent's failure
    except (LLMError, ArtifactFlowError) as exc:
        await hook_points.agent_failed(context, agent, exc)
        emit("agent_complete", content="", tool_calls=0, outcome="failed", error=str(exc))
        emit("subagent_complete", status="failed", error=str(exc), tool_call_id=record["tool_call_id"])
        return {"subagent_pending": {invocation: {"status": "failed", "error": str(exc)}}}
    calls = _unique_ids(response.tool_calls, taken, invocation.rsplit(":", 1)[-1])
    calls, refused = await hook_points.decide_calls(context, agent, calls)
    update = merge_agent_response_to_state(
        agent=spec.name,
        invocation=invocation,
        content=response.content,
        tool_calls=calls,
        needs_approval=await _approval_flags(context, [c for c in calls if c["id"] not in refused]),
        rounds_used=rounds,
        max_tool_rounds=spec.max_tool_rounds,
    )
    hook_points.mark_refused(update, refused)
    status = update.get("subagent_pending", {}).get(invocation, {}).get("status")
    emit("agent_complete", content=response.content, tool_calls=len(calls), outcome=status)
    error = update.get("subagent_pending", {}).get(invocation, {}).get("error")
    await hook_points.agent_end(context, agent, response.content, len(calls), status if status in ("done", "failed") else None, error)
    if status in ("done", "failed"):
        emit(
            "subagent_complete",
            status=status,
            result=update["subagent_pending"][invocation].get("result"),
            error=update["subagent_pending"][invocation].get("error"),
            tool_call_id=record["tool_call_id"],
        )
    update[REPLACED] = step.replaced(update, invocation)
    return update


async def subagents(state: AgentState, runtime: Runtime[RunContext]) -> Any:
    context = runtime.context
    svc = context.services
    invocations = state.get("subagent_pending") or {}
    running = [(k, v) for k, v in invocations.items() if v.get("status") == "running"]
    running.sort(key=lambda kv: kv[1].get("order", 0))
    memories = state.get("agent_memories") or {}
    plan = await svc.store.get_artifact(context.conversation_id, PLAN_ID)
    taken: set[str] = set()
    updates = await hook_points.gather_all(
        *(
            _subagent_step(context, runtime, key, rec, list(memories.get(key, [])), plan, taken)
            for key, rec in running
        )
    )
    merged: dict[str, Any] = {
        "agent_memories": {},
        "subagent_pending": {},
        "current_agent": ",".join(rec["agent"] for _, rec in running),
    }
    calls: list[dict[str, Any]] = []
    replaced: dict[str, Any] = {}
    for update in updates:
        replaced.update(update.pop(REPLACED, None) or {})
        merged["agent_memories"].update(update.get("agent_memories", {}))
        merged["subagent_pending"].update(update.get("subagent_pending", {}))
        calls += update.get("pending_tool_calls") or []
    # Every running invocation took its step: each now waits for tools, or is done/failed.
    # Any tool call sends the round to the tool node; otherwise all answered, and the lead
    # closes its round.
    if calls:
        merged["pending_tool_calls"] = calls
        merged["phase"] = ExecutionPhase.TOOL_EXECUTING.value
    else:
        merged["phase"] = ExecutionPhase.LEAD_EXECUTING.value
    return node_result(merged, replaced)

"""Graph nodes that call a model: `lead_agent` and `subagents`.

One model call per agent step, through the `Model` protocol only (`Services.model_for` picks
the implementation from the agent's profile). Both nodes return partial updates built by
`merge_agent_response_to_state`, including the phase that routes the next step. Parallel delegation: every subagent invocation that needs a
step runs concurrently inside one `subagents` node (asyncio), so their model calls overlap
while their tool rounds still go through the shared tool node, where permissions apply.
A subagent failure becomes that call's error result; its siblings still answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from langgraph.runtime import Runtime

from ..agents.model import ModelRequest, ModelResponse
from ..agents.model.base import Usage as ModelUsage
from ..agents.prompts import PLAN_ID, lead_messages, subagent_messages
from ..agents.spec import AgentSpec
from ..errors import ArtifactFlowError, LLMError, scrub_secrets
from ..events.envelope import Emitted
from ..events.payloads import (
    AgentCompleteData,
    AgentEventData,
    AgentStartData,
    LLMChunkData,
    LLMCompleteData,
    SubagentCompleteData,
    SubagentStartData,
    ToolCallRequest,
    Usage,
)
from ..hooks import nodes as hook_points
from ..hooks.dispatch import HookError
from ..hooks.types import AgentStep
from ..shapes import ChatMessage, RawToolCall
from ..tools.arguments import argument_error
from ..tools.base import Permission
from .agent_window import node_result, windowed_call
from .context import RunContext
from .recall import with_recall
from .state import (
    LEAD,
    AgentState,
    AgentUpdate,
    ExecutionPhase,
    PendingToolCall,
    SubagentRecord,
    SubagentRecordUpdate,
    SubagentStatus,
    merge_agent_response_to_state,
)
from .window import Prices, cost_usd, rounds_in
from .window.tokens import request_tokens, text_tokens


class Emitter:
    """Sends node events to the controller: straight to the run's segment when it takes them
    (`RunContext.emit_now`, the chat graph), else through LangGraph's custom stream."""

    def __init__(self, runtime: Runtime[RunContext], agent: str, invocation: str) -> None:
        direct = getattr(runtime.context, "emit_now", None)
        self._write = direct if direct is not None else runtime.stream_writer
        self.agent = agent
        self.invocation = invocation

    def __call__(self, data: AgentEventData) -> None:
        self._write(Emitted(data.model_copy(update={"invocation": self.invocation}), self.agent))


def close_lead_round(state: AgentState) -> list[ChatMessage]:
    """Once every subagent of the lead's last round answered, build that round's tool
    messages in call order: held tool results plus each subagent's answer."""
    invocations = state.get("subagent_invocations") or {}
    if not invocations:
        return []
    memories = state.get("agent_memories") or {}
    lead_memory = memories.get(LEAD, [])
    held_results = (state.get("held_tool_results") or {}).get(LEAD, [])
    held = {m.get("tool_call_id"): m for m in held_results if m["role"] == "tool"}
    by_call = {rec["tool_call_id"]: rec for rec in invocations.values()}
    last = next((m for m in reversed(lead_memory) if m.get("role") == "assistant"), None)
    messages: list[ChatMessage] = []
    for call in last.get("tool_calls", []) if last else []:
        call_id = call["id"]
        if call_id in held:
            messages.append(held[call_id])
        elif call_id in by_call:
            rec = by_call[call_id]
            if rec.get("status") == SubagentStatus.DONE:
                text = rec.get("result") or "(the subagent returned no text)"
            else:
                text = f"ERROR: subagent '{rec['agent']}' failed: {rec.get('error')}"
                if rec.get("result"):
                    text += f"\nPartial answer: {rec.get('result')}"
            messages.append({"role": "tool", "tool_call_id": call_id, "content": text})
    return messages + [m for m in held_results if m["role"] != "tool"]  # hooks' notes


async def approval_flags(
    context: RunContext, calls: list[RawToolCall]
) -> dict[str, bool]:
    """Call id → whether it waits for a person (a CONFIRM tool not always-allowed in this
    conversation). A call whose arguments cannot run (not JSON, not the tool's schema) asks
    nobody: it fails in the tool node and the model gets the error. Public: the workflow
    steps use it for their own tool calls."""
    svc = context.services
    confirm = [
        c for c in calls
        if svc.tools.permission(c["name"]) is Permission.CONFIRM
        and argument_error(svc.tools.get(c["name"]), c["arguments"]) is None
    ]
    if not confirm:
        return {}
    allowed = await svc.store.always_allowed(context.conversation_id)
    return {c["id"]: c["name"] not in allowed for c in confirm}


def _unique_ids(calls: list[RawToolCall], taken: set[str], suffix: str) -> list[RawToolCall]:
    """Providers may reuse ids like `call_0`; ids must be unique within a round."""
    out: list[RawToolCall] = []
    for call in calls:
        call_id = call["id"]
        while call_id in taken:
            call_id = f"{call_id}_{suffix}"
        taken.add(call_id)
        out.append({**call, "id": call_id})
    return out


async def _decided_update(
    context: RunContext,
    agent: AgentStep | None,
    spec: AgentSpec,
    invocation: str,
    content: str,
    calls: list[RawToolCall],
    rounds_used: int,
) -> tuple[AgentUpdate, list[RawToolCall]]:
    """An agent's update from its model answer, and the calls as the hooks let them through:
    the refused ones marked, the others flagged when they wait for a person."""
    calls, refused = await hook_points.decide_calls(context, agent, calls)
    update = merge_agent_response_to_state(
        agent=spec.name,
        invocation=invocation,
        content=content,
        tool_calls=calls,
        needs_approval=await approval_flags(context, [c for c in calls if c["id"] not in refused]),
        rounds_used=rounds_used,
        max_tool_rounds=spec.max_tool_rounds,
    )
    hook_points.mark_refused(update, refused)
    return update, calls


def _cut_off_call(emit: Emitter, request: ModelRequest, text: str, started: float) -> Emitted:
    """The `llm_complete` of a call cancelled before it ended. The provider reports usage
    only at the end of a stream, so its tokens are estimated offline (the prompt from the
    request, the completion from the text streamed so far) and marked `usage_estimated`;
    the server did the work, so budgets and totals count it."""
    prompt = request_tokens(request.messages, request.tools)
    completion = text_tokens(text)
    data = LLMCompleteData(
        content=text, model=request.target.model,
        usage=Usage(prompt_tokens=prompt, completion_tokens=completion), usage_estimated=True,
        duration_ms=round((time.perf_counter() - started) * 1000, 2), finish_reason="cancelled",
        cost_usd=cost_usd(prompt, completion, Prices.of(request.target)),
        invocation=emit.invocation,
    )
    return Emitted(data, emit.agent)


async def _llm_step(
    context: RunContext,
    spec: AgentSpec,
    messages: list[ChatMessage],
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

    streamed: list[str] = []

    def on_delta(text: str) -> None:
        streamed.append(text)
        emit(LLMChunkData(delta=text))

    started = time.perf_counter()
    try:
        response = await model.complete(request, on_delta if hook_points.streams(context) else None)
    except asyncio.CancelledError:
        context.cut_off_calls.append(_cut_off_call(emit, request, "".join(streamed), started))
        raise
    except Exception as exc:
        await hook_points.model_failed(context, agent, exc)
        raise
    duration = (time.perf_counter() - started) * 1000
    response = await hook_points.after_model(context, agent, request, response, duration)
    usage, estimated = response.usage, None
    if usage is None:  # the server sent none (llama-cpp-python while streaming): estimated
        # offline as for a cut-off call, and marked so (never a made-up 0)
        written = response.content + "".join(c["arguments"] or "" for c in response.tool_calls)
        usage, estimated = ModelUsage(
            request_tokens(request.messages, request.tools), text_tokens(written)
        ), True
    emit(LLMCompleteData(
        content=response.content,
        tool_calls=[ToolCallRequest.model_validate(c) for c in response.tool_calls],
        model=response.model,
        usage=Usage(prompt_tokens=usage.prompt_tokens, completion_tokens=usage.completion_tokens),
        usage_estimated=estimated,
        duration_ms=round(duration, 2),
        attempts=response.attempts,
        finish_reason=response.finish_reason,
        cost_usd=cost_usd(usage.prompt_tokens, usage.completion_tokens, Prices.of(target)),
    ))
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
    emit(AgentStartData(round=used + 1))
    agent = await hook_points.agent_start(context, spec, LEAD, used + 1)
    fixed = await with_recall(
        fixed, context, spec, LEAD, state.get("current_task", ""), first=used == 0 and not closing,
        emit=emit, agent=agent, lead=True,
    )
    step = await windowed_call(
        context, spec, LEAD, fixed=fixed, memory=memory, task=state.get("current_task", ""),
        emit=emit, call=lambda messages: _llm_step(context, spec, messages, emit, agent),
        on_compacted=lambda result, model: hook_points.compacted(context, agent, result, summary_model=model),
    )
    response = step.response
    calls = _unique_ids(response.tool_calls, set(), "dup")
    update, calls = await _decided_update(context, agent, spec, LEAD, response.content, calls, used)
    if state.get("active_agents") != [spec.name]:
        update["active_agents"] = [spec.name]
    if closing:
        update["agent_memories"] = {LEAD: closing + ((update.get("agent_memories") or {}).get(LEAD) or [])}
        update["held_tool_results"] = {LEAD: None}
        update["subagent_invocations"] = None
    emit(AgentCompleteData(content=response.content, tool_calls=len(calls), outcome=update.get("outcome")))
    await hook_points.agent_end(context, agent, response.content, len(calls), update.get("outcome"))
    return node_result(update, step.replaced(update, LEAD))


async def subagent_step(
    context: RunContext,
    runtime: Runtime[RunContext],
    invocation: str,
    record: SubagentRecord,
    memory: list[ChatMessage],
    plan: Mapping[str, Any] | None,
    taken: set[str],
) -> tuple[AgentUpdate, dict[str, list[ChatMessage]]]:
    """One subagent's step: its partial update, and its whole new memory when compacted. Public:
    the workflow agent and group steps run their turns with it."""
    svc = context.services
    spec = svc.agents[record["agent"]]
    emit = Emitter(runtime, spec.name, invocation)
    rounds = int(record.get("rounds", 0))
    if rounds == 0 and not memory:
        emit(SubagentStartData(instruction=record["instruction"], tool_call_id=record["tool_call_id"]))
    emit(AgentStartData(round=rounds + 1))
    agent = await hook_points.agent_start(context, spec, invocation, rounds + 1, record)
    fixed = subagent_messages(spec, instruction=record["instruction"], plan=plan, memory=[])
    fixed = await with_recall(
        fixed, context, spec, invocation, record["instruction"], first=rounds == 0 and not memory,
        emit=emit, agent=agent, lead=False, profile=record.get("memory_profile"),
    )
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
        error = scrub_secrets(str(exc))
        emit(AgentCompleteData(content="", tool_calls=0, outcome="failed", error=error))
        emit(SubagentCompleteData(status=SubagentStatus.FAILED, error=error, tool_call_id=record["tool_call_id"]))
        return {"subagent_invocations": {invocation: {"status": SubagentStatus.FAILED.value, "error": error}}}, {}
    calls = _unique_ids(response.tool_calls, taken, invocation.rsplit(":", 1)[-1])
    update, calls = await _decided_update(context, agent, spec, invocation, response.content, calls, rounds)
    record_update = (update.get("subagent_invocations") or {}).get(invocation) or SubagentRecordUpdate()
    status = record_update.get("status")
    emit(AgentCompleteData(content=response.content, tool_calls=len(calls), outcome=status))
    error = record_update.get("error")
    final = status is not None and SubagentStatus(status).final
    await hook_points.agent_end(context, agent, response.content, len(calls), status if final else None, error)
    if final:
        emit(SubagentCompleteData(
            status=SubagentStatus(status),
            result=record_update.get("result"),
            error=record_update.get("error"),
            tool_call_id=record["tool_call_id"],
        ))
    return update, step.replaced(update, invocation)


async def subagents(state: AgentState, runtime: Runtime[RunContext]) -> Any:
    context = runtime.context
    svc = context.services
    invocations = state.get("subagent_invocations") or {}
    running = [(k, v) for k, v in invocations.items() if v.get("status") == SubagentStatus.RUNNING]
    running.sort(key=lambda kv: kv[1].get("order", 0))
    memories = state.get("agent_memories") or {}
    plan = await svc.store.get_artifact(context.conversation_id, PLAN_ID)
    taken: set[str] = set()
    updates = await hook_points.gather_all(
        *(
            subagent_step(context, runtime, key, rec, list(memories.get(key, [])), plan, taken)
            for key, rec in running
        )
    )
    memories_written: dict[str, list[ChatMessage] | None] = {}
    records: dict[str, SubagentRecordUpdate] = {}
    calls: list[PendingToolCall] = []
    replaced: dict[str, list[ChatMessage]] = {}
    for update, compacted in updates:
        replaced.update(compacted)
        memories_written.update(update.get("agent_memories") or {})
        records.update(update.get("subagent_invocations") or {})
        calls += update.get("pending_tool_calls") or []
    merged: AgentUpdate = {
        "agent_memories": memories_written,
        "subagent_invocations": records,
        "active_agents": [rec["agent"] for _, rec in running],
    }
    # Every running invocation took its step: each now waits for tools, or is done/failed.
    # Any tool call sends the round to the tool node; otherwise all answered, and the lead
    # closes its round.
    if calls:
        merged["pending_tool_calls"] = calls
        merged["phase"] = ExecutionPhase.TOOL_EXECUTING.value
    else:
        merged["phase"] = ExecutionPhase.LEAD_EXECUTING.value
    return node_result(merged, replaced)

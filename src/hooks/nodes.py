"""Node-level hook points: the small functions the agent nodes and the tool node call.

The nodes keep their own dicts (the model seam's request and response, the call dicts of
`pending_tool_calls`); each function here builds the typed records hooks see, runs the
`HookRunner`, and turns the answers back into those dicts. `context` is the node's
`RunContext` (its `services.hooks` and `run`). With no hook registered, `agent_start`
returns None and every other function returns its input at once: a run without hooks builds
nothing.

Exactly-once (LangGraph re-runs a node from its first line on resume, and a recovered run
re-runs the node its process died in):
- agent-node points are not keyed: an agent node that runs again makes a new model call,
  and its hooks describe that call. `before_tool_call`'s verdict is checkpointed with the
  round's calls (`pending_tool_calls`), so it is taken once;
- in the tool node, a call that ran rides the tool ledger (a finished row is replayed with
  its stored, already rewritten result and no hook fires); round points, calls that never
  ran (refused, denied, an invalid delegation), the policy check of a person's edit, and a
  subagent's answer are keyed in the hook marks (`HookRunner.once`,
  `{invocation}/{round}/{call}/{point}`).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Iterable, Mapping
from typing import Any, TypeVar

from ..errors import LLMError
from ..shapes import ChatMessage, JsonObject, PendingToolCall, RawToolCall, Refusal, ToolResultDict
from ..tools.base import ToolResult
from .dedupe import hook_key
from .dispatch import HookRunner
from .types import (
    LEAD_INVOCATION,
    AgentStep,
    AgentStepEnd,
    Compaction,
    Failure,
    ModelRequest,
    ModelResponse,
    Refuse,
    RunInfo,
    ToolCall,
    ToolOutcome,
    ToolRound,
)

T = TypeVar("T")
SUBAGENT_TOOL = "call_subagent"
_SAME: Any = object()


def _hooks(context: Any) -> HookRunner:
    return context.services.hooks


def _run(context: Any) -> RunInfo:
    run = getattr(context, "run", None)
    if run is None:  # a context built by hand (tests): the ids are all there is
        mid = context.message_id
        run = RunInfo(context.conversation_id, mid, f"thread-{mid}", context.services.lead.name, "")
    return run


def pending_call(call: PendingToolCall, arguments: Any = _SAME, **changes: Any) -> ToolCall:
    """The typed call of a `pending_tool_calls` dict (optionally with other arguments)."""
    raw: JsonObject = {**call} if arguments is _SAME else {**call, "arguments": arguments}
    typed = ToolCall.from_raw(
        raw, agent=call["agent"], invocation=call["invocation"], round=int(call.get("round", 0))
    )
    if call.get("needs_approval") and "needs_approval" not in changes:
        changes["needs_approval"] = True
    return dataclasses.replace(typed, **changes) if changes else typed


async def gather_all(*aws: Awaitable[T]) -> list[T]:
    """`asyncio.gather` whose first failure cancels and drains the siblings (a failing hook
    must not orphan parallel tools or subagents) and is raised as itself."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(aw) for aw in aws]  # type: ignore[arg-type]
    except BaseExceptionGroup as failed:
        errors = [e for e in failed.exceptions if not isinstance(e, asyncio.CancelledError)]
        raise (errors or list(failed.exceptions))[0] from None
    return [task.result() for task in tasks]


# --- agent steps and model calls --------------------------------------------------------------


async def agent_start(
    context: Any, spec: Any, invocation: str, round: int, record: Mapping[str, Any] | None = None
) -> AgentStep | None:
    """`on_agent_start`; the step every later point of this agent step takes (None: no hooks)."""
    hooks = _hooks(context)
    if hooks.empty:
        return None
    target = context.services.models.resolve(spec.model)
    agent = AgentStep(
        spec.name,
        invocation,
        round,
        model=target.model,
        instruction=(record or {}).get("instruction"),
        tool_call_id=(record or {}).get("tool_call_id"),
    )
    await hooks.on_agent_start(_run(context), agent)
    return agent


def streams(context: Any) -> bool:
    """Whether to stream deltas: not when a hook may rewrite the answer afterwards (readers
    would see text the hook removes)."""
    return not _hooks(context).wants("after_model_request")


def _typed_request(request: Any) -> ModelRequest:
    choice = request.tool_choice if request.tool_choice is not None else request.target.tool_choice
    return ModelRequest(list(request.messages), list(request.tools or []), request.target.model, choice)


async def before_model(context: Any, agent: AgentStep | None, request: Any) -> Any:
    """`before_model_request` + `on_model_start` on the seam's request; returns what to send."""
    if agent is None:
        return request
    typed = _typed_request(request)
    sent = await _hooks(context).before_model_request(_run(context), agent, typed)
    if sent is typed:
        return request
    return dataclasses.replace(
        request, messages=list(sent.messages), tools=list(sent.tools) or None, tool_choice=sent.tool_choice
    )


async def after_model(
    context: Any, agent: AgentStep | None, request: Any, response: Any, duration_ms: float
) -> Any:
    """`after_model_request` + `on_model_end`; returns the (maybe rewritten) seam response."""
    if agent is None:
        return response
    usage = response.usage
    typed = ModelResponse(
        content=response.content,
        tool_calls=list(response.tool_calls),
        model=response.model or request.target.model,
        input_tokens=usage.prompt_tokens if usage else 0,
        output_tokens=usage.completion_tokens if usage else 0,
        finish_reason=response.finish_reason,
        duration_ms=duration_ms,
        attempts=response.attempts,
    )
    final = await _hooks(context).after_model_request(_run(context), agent, _typed_request(request), typed)
    if final is typed:
        return response
    calls = [{"id": c["id"], "name": c["name"], "arguments": c["arguments"]} for c in final.tool_calls]
    return dataclasses.replace(response, content=final.content, tool_calls=calls)


async def model_failed(context: Any, agent: AgentStep | None, error: BaseException) -> None:
    if agent is not None:
        kind = "llm" if isinstance(error, LLMError) else type(error).__name__
        await _hooks(context).on_error(_run(context), Failure("model", str(error), error=error, agent=agent, kind=kind))


async def decide_calls(
    context: Any, agent: AgentStep | None, calls: list[RawToolCall]
) -> tuple[list[RawToolCall], dict[str, Refusal]]:
    """`before_tool_call` for each call the model made: the calls with rewritten arguments,
    and the refused ones (`{id: {"refused": reason, "refused_by": hook}}`) that nobody is
    asked about and that never run (`mark_refused` records them in the round)."""
    hooks = _hooks(context)
    if agent is None or not hooks.wants("before_tool_call"):
        return calls, {}
    run = _run(context)
    out: list[RawToolCall] = []
    refused: dict[str, Refusal] = {}
    for call in calls:
        typed = ToolCall.from_raw(call, agent=agent.name, invocation=agent.invocation, round=agent.round)
        verdict = await hooks.before_tool_call(run, typed)
        if isinstance(verdict, Refuse):
            refused[call["id"]] = {"refused": verdict.reason, "refused_by": verdict.hook}
        elif verdict is not typed:
            call = RawToolCall(id=call["id"], name=call["name"], arguments=verdict.arguments_json())
        out.append(call)
    return out, refused


def mark_refused(update: Mapping[str, Any], refused: Mapping[str, Refusal]) -> None:
    """Record refusals on the round's call dicts (checkpointed with `pending_tool_calls`)."""
    if not refused:
        return
    for call in update.get("pending_tool_calls") or ():
        if call["id"] in refused:
            call.update(refused[call["id"]])


async def agent_end(
    context: Any, agent: AgentStep | None, content: str, tool_calls: int,
    outcome: str | None = None, error: str | None = None,
) -> None:
    if agent is not None:
        end = AgentStepEnd(content or "", tool_calls, outcome=outcome, error=error)
        await _hooks(context).on_agent_end(_run(context), agent, end)


async def agent_failed(context: Any, agent: AgentStep | None, error: BaseException) -> None:
    """A subagent invocation failed (its call's result says so; the run goes on)."""
    if agent is not None:
        run, hooks = _run(context), _hooks(context)
        kind = "llm" if isinstance(error, LLMError) else type(error).__name__
        await hooks.on_error(run, Failure("agent", str(error), error=error, agent=agent, kind=kind))
        await hooks.on_agent_end(run, agent, AgentStepEnd("", 0, outcome="failed", error=str(error)))


async def compacted(
    context: Any, agent: AgentStep | None, result: Any, *, summary_model: str | None = None
) -> None:
    """`on_compaction`, for the context-compaction code in the agent nodes: call it after the
    summary replaced the memory, with the step from `agent_start` and the compaction result
    (anything with `tokens_before`, `tokens_after`, `rounds_summarized`; `event_data()`
    becomes `Compaction.extra`)."""
    hooks = _hooks(context)
    if agent is None or not hooks.wants("on_compaction"):
        return
    extra = result.event_data() if callable(getattr(result, "event_data", None)) else {}
    compaction = Compaction(
        int(result.tokens_before), int(result.tokens_after), int(result.rounds_summarized),
        summary_model, extra,
    )
    await hooks.on_compaction(_run(context), agent, compaction)


async def memory_recalled(context: Any, agent: AgentStep | None, recall: Any) -> None:
    """`on_memory_recall`, for the agent nodes: call it once, right after recall was stored
    for the invocation (`core/recall.py` keys it in the hook marks)."""
    hooks = _hooks(context)
    if agent is None or not hooks.wants("on_memory_recall"):
        return
    await hooks.on_memory_recall(_run(context), agent, recall)


async def subagent_answers(context: Any, state: Mapping[str, Any], closing: list[ChatMessage]) -> list[ChatMessage]:
    """A subagent's answer is its `call_subagent` call's result: it passes through
    `after_tool_call` / `on_tool_end` when the lead's round closes (keyed: once)."""
    hooks = _hooks(context)
    if not closing or not hooks.wants("after_tool_call", "on_tool_end"):
        return closing
    records = {r["tool_call_id"]: r for r in (state.get("subagent_invocations") or {}).values()}
    memory = (state.get("agent_memories") or {}).get(LEAD_INVOCATION, [])
    turns = [m for m in memory if m.get("role") == "assistant" and m.get("tool_calls")]
    if not turns:
        return closing
    made = {c["id"]: c["function"] for c in turns[-1]["tool_calls"]}
    run, lead = _run(context), context.services.lead.name
    out = []
    for message in closing:
        call_id = message.get("tool_call_id", "")
        record = records.get(call_id)
        if record is None or call_id not in made:
            out.append(message)
            continue
        call = ToolCall.from_raw(
            {"id": call_id, "name": SUBAGENT_TOOL, "arguments": made[call_id].get("arguments")},
            agent=lead, invocation=LEAD_INVOCATION, round=len(turns),
        )
        text = str(message.get("content") or "")
        result = ToolResult(True, text) if record.get("status") == "done" else ToolResult.fail(text.removeprefix("ERROR: "))

        async def fire(call: ToolCall = call, result: ToolResult = result) -> str:
            return (await hooks.after_tool_call(run, call, result)).model_text()

        key = hook_key("after_tool_call", LEAD_INVOCATION, call.round, call_id)
        out.append({**message, "content": await hooks.once(run, key, fire)})
    return out


# --- the tool node ------------------------------------------------------------------------------


def _rounds(calls: Iterable[PendingToolCall]) -> dict[str, list[PendingToolCall]]:
    groups: dict[str, list[PendingToolCall]] = {}
    for call in calls:
        groups.setdefault(call["invocation"], []).append(call)
    return groups


def _round(calls: list[PendingToolCall], outcomes: tuple[ToolOutcome, ...] = ()) -> ToolRound:
    first = calls[0]
    live = tuple(pending_call(c) for c in calls if not c.get("refused"))
    return ToolRound(first["agent"], first["invocation"], int(first.get("round", 0)), live, outcomes)


async def round_start(context: Any, calls: list[PendingToolCall]) -> None:
    """`on_tool_round_start` per invocation of the round, after permissions (keyed)."""
    hooks = _hooks(context)
    if not hooks.wants("on_tool_round_start"):
        return
    for group in _rounds(calls).values():
        await hooks.on_tool_round_start(_run(context), _round(group))


async def unrun(
    context: Any, call: PendingToolCall, result: ToolResult, *, denied: bool = False, refused: bool = False
) -> ToolResult:
    """`after_tool_call` for a call that never ran (refused, denied, invalid; keyed)."""
    hooks = _hooks(context)
    if not hooks.wants("after_tool_call", "on_tool_end"):
        return result
    run, typed = _run(context), pending_call(call)

    async def fire() -> ToolResultDict:
        final = await hooks.after_tool_call(run, typed, result, denied=denied, refused=refused)
        return final.to_dict()

    key = hook_key("after_tool_call", typed.invocation, typed.round, typed.id)
    return ToolResult.from_dict(await hooks.once(run, key, fire))


async def refused_result(context: Any, call: PendingToolCall) -> ToolResult:
    """The result of a call a hook refused when the model made it."""
    result = Refuse(call.get("refused", ""), call.get("refused_by")).result()
    return await unrun(context, call, result, refused=True)


async def edited(context: Any, call: PendingToolCall, arguments: Any) -> tuple[Any, ToolResult | None]:
    """`before_tool_call` on a person's edit (policy applies to edits too; keyed): the
    arguments to run with, or the refusal's result."""
    hooks = _hooks(context)
    if not hooks.wants("before_tool_call"):
        return arguments, None
    run, typed = _run(context), pending_call(call, arguments)

    async def fire() -> JsonObject:
        verdict = await hooks.before_tool_call(run, typed)
        if isinstance(verdict, Refuse):
            return {"refused": verdict.reason, "refused_by": verdict.hook}
        if verdict is typed:
            return {"same": True}
        return {"arguments": verdict.arguments if verdict.raw_arguments is None else verdict.raw_arguments}

    stored = await hooks.once(run, hook_key("before_tool_call", typed.invocation, typed.round, typed.id), fire)
    if "refused" in stored:
        refusal = Refusal(refused=stored["refused"], refused_by=stored.get("refused_by"))
        return arguments, await refused_result(context, {**call, "arguments": arguments, **refusal})
    return (arguments if stored.get("same") else stored["arguments"]), None


async def tool_started(context: Any, call: PendingToolCall, arguments: Any) -> None:
    hooks = _hooks(context)
    if hooks.wants("on_tool_start"):
        await hooks.on_tool_start(_run(context), pending_call(call, arguments))


async def tool_finished(
    context: Any, call: PendingToolCall, arguments: Any, result: ToolResult, duration_ms: float
) -> ToolResult:
    """`after_tool_call` + `on_tool_end` for a call that ran: the result to record."""
    hooks = _hooks(context)
    if not hooks.wants("after_tool_call", "on_tool_end"):
        return result
    return await hooks.after_tool_call(_run(context), pending_call(call, arguments), result, duration_ms)


async def round_end(
    context: Any, calls: list[PendingToolCall], results: dict[str, ToolResult], durations: dict[str, float]
) -> dict[str, list[ChatMessage]]:
    """`after_tool_round` per invocation (keyed): messages to append after each
    invocation's tool results, by invocation."""
    hooks = _hooks(context)
    if not hooks.wants("after_tool_round"):
        return {}
    added: dict[str, list[ChatMessage]] = {}
    for invocation, group in _rounds(calls).items():
        outcomes = tuple(
            ToolOutcome(
                pending_call(c), results[c["id"]], durations.get(c["id"], 0.0),
                denied=bool(results[c["id"]].metadata.get("denied")),
                refused=bool(c.get("refused") or results[c["id"]].metadata.get("refused")),
            )
            for c in group
            if c["id"] in results
        )
        messages = await hooks.after_tool_round(_run(context), _round(group, outcomes))
        if messages:
            added[invocation] = [ChatMessage(**m) for m in messages]
    return added

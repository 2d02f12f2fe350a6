"""The shared tool-execution node.

Order matters because LangGraph re-runs this node from its first line on resume:

1. Compute the round's CONFIRM calls (decided when the agent answered, so a re-run sees the
   same set) and, if any, `interrupt()` once with all of them. Nothing before this point has a
   side effect, emits an event or fires a hook (hook points: `hooks/nodes.py`).
2. Run the approved calls concurrently; results come back in call order. `RoundSchedule`
   (`tool_schedule`) runs calls on the same resource one after another and releases their
   `tool_complete` events in call order.
3. A ledger in the app store makes each approved call run at most once even if the process
   dies between running the tool and saving the checkpoint: a finished call's stored result
   is reused; a call that started but never finished is reported as interrupted, not re-run.
   The ledger is cleared when the message finishes. A recovered run does not emit a second
   `tool_start` for a call whose start is on record, nor a second `tool_complete` for a
   result replayed from the ledger whose completion is logged, and an approved call does not begin
   once a cancel was accepted (`ledger_begin`; the run then ends `cancelled`).

`call_subagent` is handled here too: a valid call starts a subagent invocation whose answer
becomes this call's result later; an invalid one is a tool error listing the valid names.

The node ends by setting the phase: LEAD_EXECUTING when the lead's results are all in,
SUBAGENT_EXECUTING when subagents were started or got their results (the lead's own results
are held until its subagents answer).
"""

from __future__ import annotations

import json
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import interrupt

from ..agents.spec import AgentSpec
from ..errors import CancelRequested
from ..events.payloads import ToolCompleteData, ToolResultData, ToolStartData
from ..events.status import DecisionAction, Outcome
from ..hooks import nodes as hook_points
from ..shapes import ChatMessage, JsonObject
from ..tools.base import ToolResult
from ..tools.context import ToolContext
from ..tools.registry import parse_arguments, run_tool_call
from . import loop_guard
from .agent_nodes import Emitter
from .context import RunContext
from .state import (
    CALL_SUBAGENT,
    LEAD,
    AgentState,
    AgentUpdate,
    ExecutionPhase,
    PendingToolCall,
    SubagentRecordUpdate,
    SubagentStatus,
    new_invocation_id,
)
from .tool_schedule import RoundSchedule, serial_key

TRUNCATION_MARKER = "\n\n[... truncated: showing {shown} of {total} characters]"


def permission_payload(calls: list[PendingToolCall]) -> JsonObject:
    pending = []
    for call in calls:
        args, error = parse_arguments(call["arguments"])
        pending.append(
            {
                "tool_call_id": call["id"],
                "tool": call["name"],
                "arguments": args if error is None else call["arguments"],
                "agent": call["agent"],
                "invocation": call["invocation"],
            }
        )
    return {"kind": "permission", "calls": pending}


def model_text(result: ToolResult, limit: int) -> tuple[str, bool]:
    text = result.model_text()
    if len(text) <= limit:
        return text, False
    return text[:limit] + TRUNCATION_MARKER.format(shown=limit, total=len(text)), True


def _decision_for(decisions: Any, call_id: str) -> JsonObject:
    """Fail closed: anything but a well-formed approval is a denial."""
    if isinstance(decisions, dict):
        decision = decisions.get(call_id)
        if isinstance(decision, dict) and decision.get("action") in (DecisionAction.APPROVE, DecisionAction.EDIT, DecisionAction.ALWAYS):
            return decision
        if isinstance(decision, dict) and decision.get("action") == DecisionAction.DENY:
            return decision
    return {"action": DecisionAction.DENY.value, "reason": "no valid decision was given"}


def _subagent_call(
    context: RunContext, call: PendingToolCall, order: int
) -> tuple[ToolResult | None, dict[str, SubagentRecordUpdate] | None]:
    svc = context.services
    lead: AgentSpec = svc.lead
    valid = [a.name for a in svc.subagents_for(lead)]
    if call["invocation"] != LEAD:
        return ToolResult.fail("only the lead agent can call subagents"), None
    args, error = parse_arguments(call["arguments"])
    if error is not None or args is None:
        return ToolResult.fail(error or "invalid arguments"), None
    name = args.get("agent_name")
    instruction = args.get("instruction")
    if not isinstance(name, str) or name not in valid:
        return (
            ToolResult.fail(
                f"unknown subagent {name!r}. Valid subagents: {', '.join(valid) or 'none'}"
            ),
            None,
        )
    if not isinstance(instruction, str) or not instruction.strip():
        return ToolResult.fail("call_subagent needs a non-empty 'instruction'"), None
    invocation = new_invocation_id(name)
    record: SubagentRecordUpdate = {
        "agent": name,
        "instruction": instruction,
        "tool_call_id": call["id"],
        "status": SubagentStatus.RUNNING.value,
        "rounds": 0,
        "order": order,
    }
    return None, {invocation: record}


def _shape(svc: Any, name: str) -> str | None:
    """A tool's argument schema as compact JSON, for the loop guard's note (None: unknown)."""
    tool = svc.tools.get(name)
    if tool is None:
        return None
    return json.dumps(tool.json_schema(), separators=(",", ":"), ensure_ascii=False)[:1500]


async def started_in_log(store: Any, message_id: str, call_id: str, kind: str = "tool_start") -> bool:
    """Whether the message's log holds a `kind` event (`tool_start`, `tool_complete`) of
    `call_id` (only asked on a re-run: the ledger already knows the call)."""
    events = await store.events(message_id)
    return any(e["type"] == kind and e["data"].get("tool_call_id") == call_id for e in events)


def _result(result: ToolResult) -> ToolResultData:
    return ToolResultData.model_validate(result.to_dict())


async def _run_one(
    context: RunContext,
    runtime: Runtime[RunContext],
    call: PendingToolCall,
    decision: JsonObject | None,
    schedule: RoundSchedule,
) -> tuple[ToolResult, float]:
    svc = context.services
    emit = schedule.emitter(Emitter(runtime, call["agent"], call["invocation"]), call["id"])
    arguments: Any = call["arguments"]
    note = None
    call_key = f"{call['invocation']}/{call.get('round', 0)}/{call['id']}"
    ledger_key = call_key if decision else None
    if decision is not None:
        if decision["action"] == DecisionAction.DENY and await svc.store.ledger_get(context.message_id, call_key):
            # A re-asked approval after a crash: the call already started. Never say "denied".
            result = ToolResult.fail(
                "this tool call was interrupted by a process failure while running; its effect "
                "is unknown. It was not run again (declined at the re-asked approval). Check "
                "its effect before retrying.",
                interrupted=True,
            )
            result = await hook_points.tool_finished(context, call, call["arguments"], result, 0.0)
            emit(ToolCompleteData(tool_call_id=call["id"], tool=call["name"], success=False,
                                  result=_result(result), duration_ms=0.0, outcome=result.outcome))
            return result, 0.0
        if decision["action"] == DecisionAction.DENY:
            reason = decision.get("reason")
            text = "the user denied this tool call" + (f": {reason}" if reason else "")
            result = await hook_points.unrun(context, call, ToolResult.fail(text, denied=True), denied=True)
            emit(ToolCompleteData(tool_call_id=call["id"], tool=call["name"], success=False,
                                  result=_result(result), duration_ms=0.0, denied=True))
            return result, 0.0
        if decision["action"] == DecisionAction.EDIT:
            arguments = decision.get("arguments") or {}
            note = arguments
            arguments, refusal = await hook_points.edited(context, call, arguments)  # policy applies
            if refusal is not None:
                emit(ToolCompleteData(tool_call_id=call["id"], tool=call["name"], success=False,
                                      result=_result(refusal), duration_ms=0.0, refused=True))
                return refusal, 0.0
    # Approved calls go through the ledger (exactly once across crashes); AUTO calls are
    # at-least-once, like any step LangGraph re-runs, and skip the extra writes (`ledger_key`).
    record = (
        await svc.store.ledger_get(context.message_id, ledger_key) if ledger_key else None
    )
    begun = None
    if record is None and ledger_key and not svc.tools.may_rerun(call["name"]):
        begun = await svc.store.ledger_begin(context.message_id, ledger_key)
        if begun == "cancelled":  # a cancel was accepted first: the approved call never runs
            raise CancelRequested(context.message_id)
    # The ledger first, then the event: a recovered run re-runs this node, and a call the
    # ledger knows gets its `tool_start` only if the log does not hold it yet (one per call).
    fresh = record is None and begun != "exists"
    if fresh or not await started_in_log(svc.store, context.message_id, call["id"]):
        parsed, _ = parse_arguments(arguments)
        emit(ToolStartData(tool_call_id=call["id"], tool=call["name"],
                           arguments=parsed if parsed is not None else arguments, edited=note is not None))
    replayed = False  # the result comes from the ledger: its `tool_complete` may be logged already
    if record is not None and record["status"] == "finished":
        result = ToolResult.from_dict(record["result"] or {})
        duration = 0.0
        replayed = True
    elif ledger_key and not svc.tools.may_rerun(call["name"]) and (record is not None or begun == "exists"):
        result = ToolResult.fail(
            "this tool call was interrupted by a process failure while running; it was not "
            "re-run, to avoid running it twice. Check its effect before retrying.",
            interrupted=True,
        )
        duration = 0.0
        result = await hook_points.tool_finished(context, call, arguments, result, duration)
    else:
        tool_context = ToolContext(
            conversation_id=context.conversation_id,
            message_id=context.message_id,
            agent=call["agent"],
            tool_call_id=call["id"],
            services={"store": svc.store, "settings": svc.settings, **svc.extras},
            emit=emit,  # artifact tools report their changes (`ArtifactCreatedData`, ...)
        )
        agent = svc.agents.get(call["agent"])
        await hook_points.tool_started(context, call, arguments)
        result, duration = await run_tool_call(
            svc.tools,
            call["name"],
            arguments,
            tool_context,
            default_timeout=svc.settings.tools.timeout,
            allowed=agent.tools if agent else None,
        )
        if note is not None:
            result.metadata["edited_arguments"] = note
        result = await hook_points.tool_finished(context, call, arguments, result, duration)
        if ledger_key:
            await svc.store.ledger_finish(context.message_id, ledger_key, result.to_dict())
    # A process killed after `tool_complete` was stored, before the step's checkpoint: the
    # recovered run replays the result from the ledger, and the log must still hold one.
    if replayed and await started_in_log(svc.store, context.message_id, call["id"], "tool_complete"):
        schedule.release(call["id"], lambda: None)  # its turn passes, so later calls' go out
    else:
        emit(ToolCompleteData(tool_call_id=call["id"], tool=call["name"], success=result.success,
                              result=_result(result), duration_ms=round(duration, 2), outcome=result.outcome,
                              may_still_take_effect=result.may_still_take_effect))
    return result, duration


async def tool_execution(state: AgentState, runtime: Runtime[RunContext]) -> AgentUpdate:
    context = runtime.context
    svc = context.services
    calls: list[PendingToolCall] = list(state.get("pending_tool_calls") or [])
    to_confirm = [c for c in calls if c.get("needs_approval")]
    decisions: Any = {}
    if to_confirm:
        decisions = interrupt(permission_payload(to_confirm))
    # --- nothing above this line may have a side effect -----------------------------------
    await hook_points.round_start(context, calls)
    invocations = dict(state.get("subagent_invocations") or {})
    new_invocations: dict[str, SubagentRecordUpdate] = {}
    immediate: dict[str, ToolResult] = {}
    deferred: set[str] = set()
    order = len(invocations)
    runnable: list[tuple[PendingToolCall, JsonObject | None]] = []
    for call in calls:
        if call.get("refused"):  # a hook refused it when the model made it: it never runs
            immediate[call["id"]] = await hook_points.refused_result(context, call)
            continue
        if call["name"] == CALL_SUBAGENT:
            error, record = _subagent_call(context, call, order)
            order += 1
            if record is not None:
                new_invocations.update(record)
                deferred.add(call["id"])
            else:
                assert error is not None
                immediate[call["id"]] = await hook_points.unrun(context, call, error)
            continue
        decision = _decision_for(decisions, call["id"]) if call.get("needs_approval") else None
        runnable.append((call, decision))

    schedule = RoundSchedule(
        (c["id"] for c in calls if c["id"] not in deferred),
        {c["id"]: serial_key(svc.tools, c, d) for c, d in runnable},
    )
    for call in calls:
        if call["id"] in immediate:
            data = ToolCompleteData(tool_call_id=call["id"], tool=call["name"], success=False,
                                    result=_result(immediate[call["id"]]), duration_ms=0.0)
            if call.get("refused"):
                data.refused = True  # set only when true: the wire leaves an unset field out
            schedule.emitter(Emitter(runtime, call["agent"], call["invocation"]), call["id"])(data)

    async def run(call: PendingToolCall, decision: JsonObject | None) -> tuple[ToolResult, float]:
        async with schedule.turn(call["id"]):
            return await _run_one(context, runtime, call, decision, schedule)

    outcomes = await hook_points.gather_all(*(run(c, d) for c, d in runnable))
    results = dict(immediate)
    for (call, _), (result, _) in zip(runnable, outcomes, strict=True):
        results[call["id"]] = result
    durations = {call["id"]: d for (call, _), (_, d) in zip(runnable, outcomes, strict=True)}
    added = await hook_points.round_end(context, calls, results, durations)  # after_tool_round

    # The lead's results wait in `held_tool_results` while subagents it started this round run.
    hold = bool(deferred)
    memories: dict[str, list[ChatMessage]] = {}
    held: list[ChatMessage] = []
    limit_default = svc.settings.tools.max_result_chars
    texts: dict[str, str] = {}
    for call in calls:
        if call["id"] not in deferred:
            tool = svc.tools.get(call["name"])
            limit = (tool.max_result_chars if tool and tool.max_result_chars else limit_default)
            texts[call["id"]], _ = model_text(results[call["id"]], limit)
    guard = loop_guard.judge_round(loop_guard.LoopGuardConfig.of(svc.settings),
                                   state.get("agent_memories") or {}, calls, texts,
                                   shapes=lambda name: _shape(svc, name))
    for call in calls:
        if call["id"] in deferred:
            continue
        text = loop_guard.with_note(texts[call["id"]], guard.notes.get(call["id"]))
        message: ChatMessage = {"role": "tool", "tool_call_id": call["id"], "content": text}
        if call["invocation"] == LEAD and hold:
            held.append(message)
        else:
            memories.setdefault(call["invocation"], []).append(message)
    for invocation, messages in added.items():  # after the invocation's tool results
        if invocation == LEAD and hold:
            held.extend(messages)
        else:
            memories.setdefault(invocation, []).extend(messages)

    update: AgentUpdate = {"pending_tool_calls": None, "agent_memories": memories}
    if held:
        update["held_tool_results"] = {LEAD: held}
    touched = {c["invocation"] for c in calls if c["invocation"] != LEAD}
    status_updates: dict[str, SubagentRecordUpdate] = {
        inv: {"status": SubagentStatus.RUNNING.value}
        for inv in touched
        if inv in invocations and invocations[inv]["status"] == SubagentStatus.TOOLS
    }
    status_updates.update(new_invocations)
    # A workflow step's invocation has no `call_subagent` call (LangGraph hands this node
    # every AgentState key, so the state's keys cannot tell a step from a chat run).
    stopped = invocations.get(guard.stopped) if guard.stop and guard.stopped else None
    step_stopped = stopped is not None and stopped["tool_call_id"] is None
    if step_stopped and guard.stopped:
        # No chat run to end here: the step's invocation fails, and the step reads the record
        # before its next model call and ends with outcome loop_detected.
        status_updates[guard.stopped] = {
            "status": SubagentStatus.FAILED.value, "outcome": Outcome.LOOP_DETECTED.value,
            "error": f"{guard.stop}{loop_guard.SETTING_HINT}",
        }
    if status_updates:
        update["subagent_invocations"] = status_updates
    lead_waits = any(c["invocation"] == LEAD for c in calls) and not deferred
    update["phase"] = (
        ExecutionPhase.LEAD_EXECUTING.value if lead_waits else ExecutionPhase.SUBAGENT_EXECUTING.value
    )
    if guard.stop is not None and not step_stopped:
        lead_memory = (state.get("agent_memories") or {}).get(LEAD, [])
        update.update(phase=ExecutionPhase.COMPLETED.value, outcome=Outcome.LOOP_DETECTED.value,
                      outcome_reason=guard.stop + loop_guard.SETTING_HINT,
                      graph_response=loop_guard.partial_answer(lead_memory, guard.stop))
    return update

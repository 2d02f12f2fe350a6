"""Drive a `HookRunner` through a run the way the engine does, without the engine (unit tests
of the runner and the tracing hook).

Sequence: lead step → tool round → subagent → model → tool that needs approval (pause) →
resume (possibly in another process) → subagent finishes → lead answers. Simplified: the
engine also lists `call_subagent` in `ToolRound.calls` and passes the subagent's answer
through `after_tool_call` when the lead's round closes; the engine's real order is asserted
in `test_hooks_engine.py`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from artifactflow.hooks import (
    AgentStep,
    AgentStepEnd,
    HookRunner,
    ModelRequest,
    ModelResponse,
    PermissionDecision,
    PermissionRequest,
    PermissionResult,
    Refuse,
    RunEnd,
    RunInfo,
    ToolCall,
    ToolOutcome,
    ToolRound,
)
from artifactflow.tools.base import ToolResult

LEAD = "lead_agent"
SUB = "researcher:ab12"


def new_run(**changes: Any) -> RunInfo:
    run = RunInfo("conv-1", "msg-1", "thread-msg-1", LEAD, "find the release date")
    return dataclasses.replace(run, **changes)


async def model_step(
    runner: HookRunner, run: RunInfo, agent: AgentStep, answer: str, calls: list[dict[str, Any]],
    *, outcome: str | None = None, tokens: tuple[int, int] = (100, 20),
) -> list[ToolCall | Refuse]:
    """One agent step: start, model call, the calls it made, end."""
    await runner.on_agent_start(run, agent)
    request = ModelRequest([{"role": "system", "content": "be brief"}, {"role": "user", "content": run.content}], [], agent.model or "m")
    request = await runner.before_model_request(run, agent, request)
    response = ModelResponse(answer, calls, (agent.model or "m") + "-2025", tokens[0], tokens[1], "tool_calls" if calls else "stop")
    response = await runner.after_model_request(run, agent, request, response)
    made = [ToolCall.from_raw(c, agent=agent.name, invocation=agent.invocation, round=agent.round) for c in response.tool_calls]
    decided = await runner.before_tool_calls(run, made)
    await runner.on_agent_end(run, agent, AgentStepEnd(response.content, len(made), outcome=outcome))
    return decided


async def tool_round(
    runner: HookRunner, run: RunInfo, agent: str, invocation: str, round_: int,
    calls: list[ToolCall | Refuse], results: dict[str, ToolResult], *, raw_calls: list[ToolCall] | None = None,
) -> tuple[list[ToolOutcome], list[Any]]:
    """One invocation's tool round in the tool node, after the permission interrupt."""
    live = [c for c in calls if isinstance(c, ToolCall)]
    round_info = ToolRound(agent, invocation, round_, tuple(live))
    await runner.on_tool_round_start(run, round_info)
    outcomes = []
    for call in live:
        await runner.on_tool_start(run, call)
        result = await runner.after_tool_call(run, call, results[call.id], 12.5)
        outcomes.append(ToolOutcome(call, result, 12.5))
    for refused, raw in zip(calls, raw_calls or [], strict=False):
        if isinstance(refused, Refuse):
            result = await runner.after_tool_call(run, raw, refused.result(), refused=True)
            outcomes.append(ToolOutcome(raw, result, refused=True))
    added = await runner.after_tool_round(run, dataclasses.replace(round_info, outcomes=tuple(outcomes)))
    return outcomes, added


def fetch_call(call_id: str = "c1", *urls: str) -> dict[str, Any]:
    """A `web_fetch` call as the model sends it (the real tool takes `url_list`)."""
    listed = ", ".join(f'"{u}"' for u in urls or ("https://python.org/downloads",))
    return {"id": call_id, "name": "web_fetch", "arguments": f'{{"url_list": [{listed}]}}'}


async def first_segment(runner: HookRunner, run: RunInfo) -> dict[str, Any]:
    """Lead fetches a page and delegates; the subagent calls a CONFIRM tool: the run pauses.
    Returns what the engine stores in `waiting_for`."""
    await runner.on_run_start(run)
    lead = AgentStep(LEAD, "lead", 1, model="gpt-test", provider="openai")
    calls = await model_step(runner, run, lead, "", [
        fetch_call("c1"),
        {"id": "c2", "name": "call_subagent", "arguments": '{"agent_name": "researcher", "instruction": "dig"}'},
    ])
    await tool_round(runner, run, LEAD, "lead", 1, calls[:1], {"c1": ToolResult(True, "Python 3.14 released")})
    sub = AgentStep("researcher", SUB, 1, model="gpt-small", provider="openai", instruction="dig", tool_call_id="c2")
    pending = await model_step(runner, run, sub, "", [{"id": "c3", "name": "append_note", "arguments": '{"text": "3.14"}'}])
    waiting = {"interrupt_id": "i-1", "calls": [{"tool_call_id": "c3"}], "trace": runner.trace_context(run)}
    await runner.on_permission_request(run, PermissionRequest("i-1", tuple(c for c in pending if isinstance(c, ToolCall))))
    await runner.on_run_end(run, RunEnd("waiting"))
    return waiting


async def second_segment(runner: HookRunner, run: RunInfo) -> None:
    """The approval arrives; the subagent's tool runs, it answers, the lead answers."""
    await runner.on_run_start(run)
    await runner.on_permission_result(run, PermissionResult((PermissionDecision("c3", "append_note", "approve"),)))
    note = ToolCall("c3", "append_note", {"text": "3.14"}, "researcher", SUB, 1, needs_approval=True)
    await tool_round(runner, run, "researcher", SUB, 1, [note], {"c3": ToolResult(True, "noted")})
    sub = AgentStep("researcher", SUB, 2, model="gpt-small", provider="openai", tool_call_id="c2")
    await model_step(runner, run, sub, "3.14 is out", [], outcome="done")
    lead = AgentStep(LEAD, "lead", 2, model="gpt-test", provider="openai")
    await model_step(runner, run, lead, "Python 3.14 is out.", [], outcome="completed")
    await runner.on_run_end(run, RunEnd("completed", response="Python 3.14 is out.", outcome="completed"))

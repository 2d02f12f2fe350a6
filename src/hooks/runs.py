"""Run-level hook points, as the run driver (`core/run/`) fires them.

The driver, not a node, fires these, the way it emits run-level events: `before_run` before
the user message is stored, `on_run_start` / `on_permission_result` as a segment starts,
`on_permission_request` and `on_run_end` as it pauses, ends or fails. Each function takes
the engine's own dicts (the stored message, the interrupt payload, the validated decisions)
and builds the typed records hooks see; with no hook registered each returns at once.

End points (`on_run_end`, `on_error`) fire before the segment's final event is written, so a
caller that saw `complete` knows its hooks finished (spans are ended and exported). Their
failures are only logged (the run's outcome is decided). The W3C trace context goes into the
paused message's `waiting_for["trace"]`, read back by the resume in whatever process runs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, cast

from ..shapes import JsonObject, PauseRecord, PendingToolCall, RecordedDecision
from .dispatch import HookError, HookRunner
from .nodes import pending_call
from .types import (
    Failure,
    PermissionDecision,
    PermissionRequest,
    PermissionResult,
    RunEnd,
    RunInfo,
)

TRACE_KEY = "trace"


def run_info(
    message: Mapping[str, Any],
    lead_agent: str,
    *,
    content: str | None = None,
    resumed: bool = False,
    recovered: bool = False,
    user_id: str | None = None,
    trace: JsonObject | None = None,
) -> RunInfo:
    """The segment's `RunInfo` from the stored message (`content` before it is stored)."""
    return RunInfo(
        conversation_id=message["conversation_id"],
        message_id=message["id"],
        thread_id=message.get("thread_id") or f"thread-{message['id']}",
        lead_agent=lead_agent,
        content=message.get("content", "") if content is None else content,
        resumed=resumed,
        recovered=recovered,
        user_id=user_id,
        trace_context=trace or None,
    )


async def later_segment(
    hooks: HookRunner, store: Any, message: Mapping[str, Any], lead_agent: str, **flags: Any
) -> RunInfo:
    """`run_info` for a resumed or recovered segment, with the conversation's user (looked up
    only when a hook is registered)."""
    user_id = None
    if not hooks.empty:
        conversation = await store.get_conversation(message["conversation_id"])
        user_id = conversation.get("user_id") if conversation else None
    return run_info(message, lead_agent, user_id=user_id, **flags)


async def run_started(hooks: HookRunner, run: RunInfo, decisions: list[RecordedDecision] | None) -> None:
    """`on_run_start`, then (for a resume) `on_permission_result` with the decisions."""
    if hooks.empty:
        return
    await hooks.on_run_start(run)
    if decisions is not None and hooks.wants("on_permission_result"):
        await hooks.on_permission_result(run, permission_result(decisions))


def permission_result(decisions: list[RecordedDecision]) -> PermissionResult:
    return PermissionResult(
        tuple(
            PermissionDecision(
                d["tool_call_id"], d["tool"], d["action"], d.get("reason"), d.get("arguments")
            )
            for d in decisions
        )
    )


async def run_paused(
    hooks: HookRunner,
    run: RunInfo,
    waiting: PauseRecord,
    pending_calls: Callable[[], Awaitable[Sequence[Mapping[str, Any]]]],
) -> PauseRecord:
    """Before the pause is stored: `on_permission_request`, and the trace context to keep.
    Returns `waiting` plus `trace` (spans are still open here). `pending_calls` loads the
    round's call dicts (they carry the round number) only when a hook wants them."""
    if hooks.empty:
        return waiting
    if hooks.wants("on_permission_request"):
        asked = {c.get("tool_call_id") for c in waiting.get("calls") or []}
        calls = tuple(
            pending_call(cast(PendingToolCall, c), needs_approval=True)
            for c in await pending_calls()
            if c["id"] in asked
        )
        await hooks.on_permission_request(run, PermissionRequest(waiting["interrupt_id"], calls))
    trace = hooks.trace_context(run)
    return {**waiting, "trace": trace} if trace else waiting


def event_view(waiting: Mapping[str, Any]) -> Mapping[str, Any]:
    """The `permission_request` event's data: the stored pause without the trace context."""
    return {k: v for k, v in waiting.items() if k != TRACE_KEY} if TRACE_KEY in waiting else waiting


async def run_ended(hooks: HookRunner, run: RunInfo, end: RunEnd) -> None:
    if not hooks.empty:
        await hooks.on_run_end(run, end)


async def run_end(hooks: HookRunner, run: RunInfo, end: RunEnd, failure: BaseException | None, data: Any) -> None:
    """The hooks of a decided ending: `run_failed` for a `failure` (its `data`: the `error`
    event's payload, with `message` and `kind`), else `on_run_end`."""
    if failure is not None and getattr(data, "message", None) is not None:
        await run_failed(hooks, run, failure, data.message, getattr(data, "kind", None) or "error")
    else:
        await run_ended(hooks, run, end)


def error_fields(exc: BaseException) -> dict[str, Any]:
    """Extra `error` event fields: which hook failed at which point."""
    if isinstance(exc, HookError):
        return {"kind": "hook", "hook": exc.hook, "point": exc.point}
    return {}


async def run_failed(hooks: HookRunner, run: RunInfo, exc: BaseException, text: str, kind: str) -> None:
    """`on_error` (scope run, fatal) then `on_run_end` (failed)."""
    if hooks.empty:
        return
    await hooks.on_error(run, Failure("run", text, error=exc, fatal=True, kind=kind))
    await hooks.on_run_end(run, RunEnd("failed", error=text))

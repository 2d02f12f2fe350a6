"""Continuing a paused message, and recovering a run whose process died.

Claiming a paused message is one conditional UPDATE (expected status and run token), so of
two racing resumes — or a resume and a cancel — exactly one wins, across processes; the loser
gets `ResumeConflictError` saying what happened instead.
The run — not the tool node — emits `permission_result` from the validated decisions. A run
whose process died keeps status `running` with an expired lease: it is claimed the same way
and continued from its last checkpoint, and the tool ledger keeps tools from running twice.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping
from typing import Any, cast

from langgraph.types import Command

from ...errors import ResumeConflictError
from ...events.envelope import Emitted
from ...events.payloads import DecisionRecord, ErrorData, MetadataData, PermissionResultData
from ...hooks.runs import TRACE_KEY, later_segment
from ...shapes import AcceptedDecisions, AskedCall, Decision, PauseRecord, RecordedDecision
from ..permissions import normalize_decisions
from ..store.rows import MessageRow
from .cancel import end_orphan
from .eventlog import change_status
from .launch import launch
from .runtime import Runtime
from .segment import FirstEvents

_NOT_WAITING = {
    "completed": "it has completed",
    "failed": "it has failed",
    "cancelled": "it was cancelled",
}


def running_detail(rt: Runtime, message: MessageRow, *, after: str = "") -> str:
    """Who runs a `running` message, e.g. "it is running, owned by another process; its lease
    expires in 23 s (run.lease_seconds)" (+ `after` while the lease lasts)."""
    if rt.running_here(message["id"]):
        return "it is running in this process"
    expires = message.get("lease_expires_at")
    if expires is None:
        return "it is running"
    left = expires - rt.clock()
    if left < 0:
        return f"it is running, but its owner's lease expired {math.ceil(-left)} s ago"
    return (
        f"it is running, owned by another process; its lease expires in {math.ceil(left)} s "
        f"(run.lease_seconds){after}"
    )


def not_waiting(rt: Runtime, message: MessageRow) -> str:
    """Why the message cannot take a decision now, and when to try again."""
    status = message["status"]
    if status == "running":
        return running_detail(
            rt, message, after="; try again then (if that process died, the run is recovered)"
        )
    return _NOT_WAITING.get(status, f"its status is {status}")


async def resume_start(rt: Runtime, message_id: str, decisions: Any) -> None:
    """Validate `decisions` (the format in `core/permissions.py`), claim the paused message,
    and start the resumed run; a run whose owner died is recovered instead."""
    message = await rt.message(message_id)
    status = message["status"]
    if status == "running" and message_id not in rt.runs and rt.lease_expired(message):
        await recover(rt, message)
        return
    if status != "waiting":
        detail = not_waiting(rt, message)
        raise ResumeConflictError(
            f"message {message_id} is not waiting for a decision: {detail}", message_id=message_id
        )
    waiting = message["waiting_for"] or {}
    calls: list[AskedCall] = waiting.get("calls", [])
    decided = normalize_decisions(decisions, calls, rt.services.tools)
    results: list[RecordedDecision] = [
        {
            "tool_call_id": c["tool_call_id"],
            "tool": c["tool"],
            "action": decided[c["tool_call_id"]]["action"],
            "reason": decided[c["tool_call_id"]].get("reason"),
            "arguments": decided[c["tool_call_id"]].get("arguments"),
        }
        for c in calls
    ]
    run_token = uuid.uuid4().hex
    # The claim stores the decisions: accepted and durable in one write, before anyone is told
    # (the 202, the CLI going on), so a crash before the next checkpoint loses nothing.
    accepted = AcceptedDecisions(waiting=cast(PauseRecord, waiting), decided=dict(decided), results=results)
    claim = await rt.store.change_status(
        message_id,
        expected_status="waiting",
        expected_run_token=message["run_token"],
        status="running",
        run_token=run_token,
        lease_expires_at=rt.lease(),
        waiting_for=None,
        decisions=accepted,
    )
    if not claim.won:
        how = (
            "it was cancelled" if claim.status == "cancelled"
            else "it was already resumed by another request"
        )
        raise ResumeConflictError(f"message {message_id} cannot be resumed: {how}", message_id=message_id)
    always = [c["tool"] for c in calls if decided[c["tool_call_id"]]["action"] == "always"]
    if always:
        await rt.store.allow_always(message["conversation_id"], always)
    command = resume_command(waiting, decided)
    info = await later_segment(
        rt.services.hooks, rt.store, message, rt.services.lead.name, resumed=True, trace=waiting.get(TRACE_KEY)
    )
    first: FirstEvents = [Emitted(PermissionResultData(decisions=[DecisionRecord.model_validate(r) for r in results]))]
    launch(rt, message, run_token, command, first_events=first, info=info, decisions=results)


def resume_command(waiting: Mapping[str, Any], decisions: Mapping[str, Decision]) -> Command:
    """The resume for a pause: every pending interrupt (parallel workflow steps pause
    together) gets the decisions, by id; each tool node reads the ones for its own calls."""
    ids = waiting.get("interrupt_ids") or [waiting["interrupt_id"]]
    return Command(resume=dict.fromkeys(ids, decisions))


async def recover(rt: Runtime, message: MessageRow) -> None:
    """Continue a run whose process died, from its last checkpoint: with the decisions its
    resume accepted when it died before getting past the pause (they are not asked again),
    or ended `cancelled` when a cancel was accepted meanwhile."""
    if message.get("cancel_requested_at") is not None:
        if not await end_orphan(rt, message):
            raise ResumeConflictError(f"message {message['id']} is being recovered elsewhere")
        return
    run_token = uuid.uuid4().hex
    won = await rt.store.claim_message(
        message["id"],
        expected_status="running",
        expected_run_token=message["run_token"],
        run_token=run_token,
        lease_expires_at=rt.lease(),
        stale_before=rt.clock(),
    )
    if not won:
        raise ResumeConflictError(f"message {message['id']} is being recovered elsewhere")
    if not await rt.checkpoints.has_checkpoint(message["thread_id"]):
        data = ErrorData(
            message="the run's process died before its first checkpoint; nothing to recover",
            kind="recovery",
        )
        await change_status(
            rt.store, message, data,
            expected_status="running", expected_run_token=run_token, status="failed",
            error="the process died before the first checkpoint", lease_expires_at=None,
        )
        raise ResumeConflictError(f"message {message['id']} cannot be recovered: no checkpoint")
    info = await later_segment(rt.services.hooks, rt.store, message, rt.services.lead.name, recovered=True)
    first: FirstEvents = [Emitted(MetadataData(recovered=True))]
    graph_input, decisions = await _accepted_resume(rt, message)
    if decisions is not None and not await _result_logged(rt, message["id"]):
        first.append(Emitted(PermissionResultData(decisions=[DecisionRecord.model_validate(r) for r in decisions])))
    launch(rt, message, run_token, graph_input, first_events=first, info=info, decisions=decisions)


async def _accepted_resume(rt: Runtime, message: MessageRow) -> tuple[Command | None, list[RecordedDecision] | None]:
    """The resume a dead run had accepted, if its last checkpoint is still at that pause."""
    accepted = message.get("decisions")
    if not accepted:
        return None, None
    waiting = accepted["waiting"]
    ids = set(waiting.get("interrupt_ids") or [waiting["interrupt_id"]])
    graph = await rt.graph_for(message)
    snapshot = await graph.aget_state({"configurable": {"thread_id": message["thread_id"]}})
    pending = {i.id for i in getattr(snapshot, "interrupts", ())}
    if not ids <= pending:
        return None, None  # past the pause: the checkpoint holds what the decisions did
    return resume_command(waiting, accepted["decided"]), accepted["results"]


async def _result_logged(rt: Runtime, message_id: str) -> bool:
    """Whether the pause's `permission_result` is in the log (after its last request)."""
    kinds = [row["type"] for row in await rt.store.events(message_id)]
    last_request = max((i for i, kind in enumerate(kinds) if kind == "permission_request"), default=-1)
    return "permission_result" in kinds[last_request + 1:]


async def resume_cursor(rt: Runtime, message_id: str) -> int:
    """Where a resumed stream starts: just after the pause's permission_request."""
    last_request = 0
    for row in await rt.store.events(message_id):
        if row["type"] == "permission_request":
            last_request = row["event_id"]
    return last_request

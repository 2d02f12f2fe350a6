"""Upkeep around runs: renewing a lease, computing a message's metrics (with its
conversation's running totals), dropping the checkpoints of a finished message, and gc of
checkpoints no run needs any more.

Checkpoints matter only while a run is in flight or paused; once a message finishes, its event
log is the record. gc also abandons pauses (and dead runs) idle past the retention window,
each with one compare-and-set (a resume or cancel landing meanwhile wins, and gc skips it), and
removes checkpoint rows found behind any finished message (a stale owner's late write, or a
crash between two deletes).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, TypedDict

from ...events.payloads import ErrorData
from ..metrics import (
    ConversationUsage,
    RunMetrics,
    conversation_usage,
    records_from_events,
    summarize,
)
from ..store.rows import MessageRow
from ..store.thread_reads import UsageSums, usage_sums
from .eventlog import change_status
from .runtime import Runtime

log = logging.getLogger("artifactflow")


async def keep_lease(rt: Runtime, message_id: str, run_token: str) -> None:
    """Renew the lease every third of its length until cancelled; stop the run if a cancel
    was accepted meanwhile that the bus did not bring (`cancel.py`). A renewal that fails (the
    database is away for a moment) is tried again at the next period, not abandoned."""
    period = rt.services.settings.run.lease_seconds / 3
    while True:
        await asyncio.sleep(period)
        try:
            cancelled = await rt.store.renew_lease(message_id, run_token, rt.lease())
            if cancelled is None:  # no longer ours (rare): the cancel flag is still read
                cancelled = await rt.store.cancel_requested(message_id)
        except Exception as exc:
            log.warning("run %s: could not renew its lease (%s); trying again", message_id, exc)
            continue
        handle = rt.runs.get(message_id)
        if cancelled and handle is not None and handle.task is not None and not handle.cancel_requested:
            handle.cancel_requested = True
            handle.task.cancel()
            return


async def run_metrics(
    rt: Runtime,
    message_id: str,
    started: float,
    *,
    events: Sequence[Mapping[str, Any]] | None = None,
    message: MessageRow | None = None,
) -> RunMetrics:
    """The message's metrics from its event log; wall time adds up over resumed segments.
    `events` and `message`: the whole log and the row, when the caller has them already."""
    if message is None:
        message = await rt.message(message_id)
    previous = message.get("metrics") or {}
    wall = (time.perf_counter() - started) * 1000 + float(previous.get("wall_ms", 0.0))
    if events is None:
        events = await rt.store.events(message_id)
    metrics = summarize(records_from_events(events), wall)
    others = await usage_sums(rt.store, message["conversation_id"], excluding=message_id)
    metrics["conversation"] = with_others(conversation_usage([{"metrics": metrics}]), others)
    return metrics


def with_others(mine: ConversationUsage, others: UsageSums) -> ConversationUsage:
    """A message's own usage plus the rest of its conversation's (summed in the database,
    `thread_reads.usage_sums`): what `conversation_usage` over every message gives, without
    reading every message at each run's end."""
    priced = others.priced + (mine["cost_usd"] is not None)
    return {
        "messages": others.messages + mine["messages"],
        "tokens": {
            "prompt": others.prompt + mine["tokens"]["prompt"],
            "completion": others.completion + mine["tokens"]["completion"],
            "total": others.total + mine["tokens"]["total"],
        },
        "cost_usd": round(others.cost_usd + (mine["cost_usd"] or 0.0), 6) if priced else None,
        "cost_complete": others.unpriced == 0 and mine["cost_complete"],
    }


async def final_metrics(
    rt: Runtime, message_id: str, started: float, flush: Callable[[], Awaitable[None]]
) -> dict[str, Any]:
    """`{"metrics": ...}` for a run ending cancelled or failed (after `flush`ing its events),
    so the tokens its finished model calls spent count in the message's and the conversation's
    totals like a completed run's; `{}` when they cannot be read (the store may be why the run
    failed: the ending must still be recorded)."""
    try:
        await flush()
        return {"metrics": await run_metrics(rt, message_id, started)}
    except Exception:  # a lost figure must not lose the run's ending
        log.warning("could not compute the metrics of message %s", message_id, exc_info=True)
        return {}


async def cleanup_checkpoints(rt: Runtime, message: MessageRow, *, touch: bool = False) -> None:
    """A message finished: forget its tool ledger, hook marks and (unless configured to keep them) its
    thread's checkpoints. `touch`: `touch_conversation` its conversation too (in the first
    transaction)."""
    touched = message["conversation_id"] if touch else None
    if rt.services.settings.checkpoints.keep_completed:
        await rt.store.run_records_clear(message["id"], touch=touched)  # its tool ledger and hook marks
        return
    # The checkpoints first, then (one transaction) the ledger, the hook marks and the mark
    # that they are gone: a failure between leaves rows gc clears (`gc` below).
    await rt.checkpoints.delete_thread(message["thread_id"])
    await rt.store.run_records_clear(message["id"], touch=touched, checkpoints_deleted=True)
    if rt.upkeep is not None:  # hand the freed pages back, empty the logs: later (`upkeep.py`)
        rt.upkeep.request()


class GcReport(TypedDict):
    """What `gc` deleted (or, with `dry_run`, would delete): message ids."""

    finished: list[str]  # finished messages whose checkpoints went
    abandoned: list[str]  # idle paused or orphaned runs, now failed
    dry_run: bool


async def gc(rt: Runtime, retention_hours: float | None, *, dry_run: bool) -> GcReport:
    """Delete checkpoints no run needs any more.

    Finished messages (completed, failed, cancelled) lose theirs at once; paused or
    orphaned-running messages idle for longer than the retention window are abandoned: their
    checkpoints go and they are marked failed. Returns what was (or would be) done."""
    settings = rt.services.settings.checkpoints
    hours = settings.retention_hours if retention_hours is None else retention_hours
    cutoff = rt.clock() - hours * 3600
    finished, abandoned = [], []
    threads = await rt.checkpoints.thread_ids()
    for message in await rt.store.messages_with_status(["completed", "failed", "cancelled"]):
        if not message["checkpoints_deleted"] or message["thread_id"] in threads:
            finished.append(message)
    for message in await rt.store.messages_with_status(["waiting", "running"]):
        if message["id"] in rt.runs or message["updated_at"] >= cutoff:
            continue
        if message["status"] == "running" and not rt.lease_expired(message):
            continue
        abandoned.append(message)
    if not dry_run:
        for message in finished:
            await rt.checkpoints.delete_thread(message["thread_id"])
            await rt.store.update_message(message["id"], checkpoints_deleted=True)
        for message in list(abandoned):
            stale: dict[str, Any] = {"stale_before": rt.clock()} if message["status"] == "running" else {}
            ended = await change_status(
                rt.store, message,
                ErrorData(message="abandoned; checkpoints removed by gc", kind="abandoned"),
                expected_status=message["status"], expected_run_token=message["run_token"],
                status="failed", run_token=uuid.uuid4().hex, lease_expires_at=None,
                error=f"abandoned: no activity for more than {hours:g} h (removed by gc)",
                waiting_for=None, checkpoints_deleted=True, **stale,
            )
            if ended is None:  # resumed or cancelled meanwhile: not abandoned after all
                abandoned.remove(message)
                continue
            await rt.checkpoints.delete_thread(message["thread_id"])
        await rt.store.ledger_clear_finished()
        await rt.store.hook_marks_clear()
        await rt.checkpoints.vacuum()
    return {
        "finished": [m["id"] for m in finished],
        "abandoned": [m["id"] for m in abandoned],
        "dry_run": dry_run,
    }

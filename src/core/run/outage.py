"""Ending a run whose database went away: its final status is written once the database is back.

A run's last act is one compare-and-set that stores its final status and event
(`Segment._finish`). When the database is away at that moment (a PostgreSQL restart or outage,
a full disk, a read-only data folder) that write fails, and before this module the run's task
died with the error unretrieved and the message stayed `running` for good. Now the segment
hands the failure here, and:

1. the final write (`failed`, with the reason: "database unavailable", "disk full",
   "read-only") is retried with backoff, for up to `PATIENCE_SECONDS`, so the message ends
   as soon as a write succeeds again (a database back within a minute is seen within
   `MAX_DELAY_SECONDS` of its return);
2. if the first retry fails too, readers of this process get that final `error` event at once
   (published, not stored: its id is provisional), so a command line can print the message id
   and the reason instead of waiting; the stored event follows when the write succeeds;
3. a run that lost its message meanwhile (another process recovered it) stops quietly, as
   everywhere else (`LeaseLostError`).

A failure that is not an outage (a bug in a final write) gets one more attempt, then is logged.
A full disk first frees the space kept for endings (`endings.Spare`) and tries again at once,
which almost always stores the ending in the process that ran it. A process that stops while
the write still fails (it is closing: `LiveRun.closing`, or its task is cancelled), or that
gives up, leaves a durable marker instead; the next process to open the store, or the server's
maintenance loop, stores the ending from it (`endings.settle_endings`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from ...errors import LeaseLostError, StoreUnavailableError, scrub_secrets
from ...events.envelope import Event
from ...events.payloads import ErrorData, EventData
from ..store.faults import DISK_FULL, store_fault
from ..store.outage_retry import through_outage
from ..store.rows import MessageRow
from .endings import Spare
from .eventlog import change_status, new_event, stored_event
from .live import EventSink, LiveRun

log = logging.getLogger("artifactflow")

PATIENCE_SECONDS = 15 * 60.0
FIRST_DELAY_SECONDS = 0.2
MAX_DELAY_SECONDS = 5.0


# Endings that carry a run's work: on PostgreSQL they wait out an outage (`store_ending`).
KEPT_ENDINGS = frozenset({"completed", "waiting"})


async def store_ending(
    store: Any, message: MessageRow, data: EventData, *, agent: str | None, status: str,
    expected_run_token: str, **change: Any,
) -> Event | None:
    """`change_status` of a run's ending (`Segment._finish`). A `completed` or `waiting` ending
    on PostgreSQL is retried through an outage (`store/outage_retry.py`): the answer the model
    gave while the database was away is stored when it returns, not replaced by `failed`. A
    retry that loses the compare-and-set checks whether an earlier attempt did win (its reply
    lost with the connection): then that stored event is the ending, never a second one.
    Other endings fail at once and are stored later by `end_after_outage`, which tells this
    process's readers first."""

    async def attempt(again: bool) -> Event | None:
        event = await change_status(store, message, data, agent=agent, status=status,
                                    expected_run_token=expected_run_token, **change)
        if event is None and again:
            return await _stored_ending(store, message, status, expected_run_token)
        return event

    if store.is_sqlite or status not in KEPT_ENDINGS:
        return await attempt(False)
    return await through_outage(attempt, what=f"run {message['id']}: its `{status}` ending")


async def _stored_ending(store: Any, message: MessageRow, status: str, run_token: str) -> Event | None:
    """The ending an earlier attempt stored (same status, still this run's token), or None."""
    row = await store.get_message(message["id"])
    if row is None or row["status"] != status or row.get("run_token") != run_token:
        return None
    last = await store.events(message["id"], after_event_id=await store.last_event_id(message["id"]) - 1)
    return stored_event(message, last[-1]) if last else None


async def end_after_outage(
    store: Any, message: MessageRow, run_token: str, handle: LiveRun, exc: Exception,
    *, spare: Spare | None = None, on_stored: Callable[[str], Awaitable[None]] | None = None,
    sink: EventSink | None = None,
) -> None:
    """Store the final `failed` status of `message`'s run (`run_token`, live as `handle`)
    after its final write failed with `exc`; then `on_stored(reason)` (the run's `on_run_end`:
    its ending is decided only now)."""
    message_id = message["id"]
    fault = store_fault(exc)
    if fault is None:
        log.error("run %s: its final status could not be stored", message_id, exc_info=exc)
        text, attempts_left = scrub_secrets(f"{type(exc).__name__}: {exc}"), 1
    else:
        log.warning(
            "run %s: %s; its final status is stored once writes succeed again", message_id, fault
        )
        text, attempts_left = str(fault), None
    data = ErrorData(message=text, kind="storage" if fault else type(exc).__name__)
    deadline = time.monotonic() + PATIENCE_SECONDS
    delay = FIRST_DELAY_SECONDS
    attempt = 0
    spared = False  # the spare space was freed for this write
    handle.unstored_ending = True  # a close stops this task rather than asking the store to cancel
    next_id = max(handle.last_stored(), sink.last_put if sink is not None else 0) + 1
    told = False
    try:
        if sink is not None and sink.holding:  # its events wait for the database: say so now,
            await _tell_readers(message, handle, data, next_id)
            told = True
            with contextlib.suppress(Exception):  # then store them first (the ending is last)
                await sink.flush()
        while True:
            attempt += 1
            try:
                event = await change_status(
                    store,
                    message,
                    data,
                    expected_status="running",
                    expected_run_token=run_token,
                    status="failed",
                    error=text,
                    lease_expires_at=None,
                )
            except Exception as again:
                if not spared and spare is not None and _disk_full(again):
                    spared = True
                    if spare.release():
                        continue  # the freed space is for exactly this write
                if (
                    (attempts_left is not None and attempt > attempts_left)
                    or time.monotonic() > deadline
                    or handle.closing
                ):
                    log.error(
                        "run %s: could not store its final status (%s)", message_id, again,
                        exc_info=again if fault is None else None,
                    )
                    _leave_marker(spare, message_id, run_token, fault)
                    return
                if not told:
                    told = True
                    await _tell_readers(message, handle, data, next_id)
                await asyncio.sleep(delay)
                delay = min(delay * 2, MAX_DELAY_SECONDS)
                continue
            if event is None:
                raise LeaseLostError(
                    f"message {message_id} is no longer owned by this run", message_id=message_id
                )
            handle.finishing = True
            if on_stored is not None:
                await asyncio.shield(on_stored(text))
            if not handle.done:
                await handle.publish(event)
            log.warning("run %s: final status `failed` stored after %d attempt(s)", message_id, attempt)
            return
    except asyncio.CancelledError:  # the process is stopping with the ending unstored
        _leave_marker(spare, message_id, run_token, fault)
        raise


def _disk_full(exc: BaseException) -> bool:
    fault = store_fault(exc)
    return fault is not None and fault.reason == DISK_FULL


def _leave_marker(spare: Spare | None, message_id: str, run_token: str, fault: StoreUnavailableError | None) -> None:
    reason = fault.reason if fault is not None else "error"
    if spare is None or not spare.mark(message_id, run_token, reason):
        log.error(
            "run %s stays `running` until recovered (`artifactflow resume %s`)", message_id, message_id
        )


async def _tell_readers(message: MessageRow, handle: LiveRun, data: ErrorData, event_id: int) -> None:
    """Hand this process's readers the final event now (stored later), and end their streams."""
    notice = ErrorData(
        message=f"{data.message} (message {message['id']} is marked "
        "failed once the database accepts writes again)",
        kind=data.kind,
    )
    await handle.publish(new_event(message, notice, event_id))
    await handle.finish()

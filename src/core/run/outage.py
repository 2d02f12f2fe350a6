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
A process that stops while its database is still away (a command line on a full disk) leaves
the message `running` with a lapsing lease: `artifactflow resume MESSAGE_ID` (or
`run.recover_on_start` on a server) ends it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ...errors import LeaseLostError
from ...events.payloads import ErrorData
from ..store.faults import store_fault
from ..store.rows import MessageRow
from .eventlog import change_status, new_event
from .live import LiveRun

log = logging.getLogger("artifactflow")

PATIENCE_SECONDS = 15 * 60.0
FIRST_DELAY_SECONDS = 0.2
MAX_DELAY_SECONDS = 5.0


async def end_after_outage(
    store: Any, message: MessageRow, run_token: str, handle: LiveRun, exc: Exception
) -> None:
    """Store the final `failed` status of `message`'s run (`run_token`, live as `handle`)
    after its final write failed with `exc`."""
    message_id = message["id"]
    fault = store_fault(exc)
    if fault is None:
        log.error("run %s: its final status could not be stored", message_id, exc_info=exc)
        text, attempts_left = f"{type(exc).__name__}: {exc}", 1
    else:
        log.warning(
            "run %s: %s; its final status is stored once writes succeed again", message_id, fault
        )
        text, attempts_left = str(fault), None
    data = ErrorData(message=text, kind="storage" if fault else type(exc).__name__)
    deadline = time.monotonic() + PATIENCE_SECONDS
    delay = FIRST_DELAY_SECONDS
    attempt = 0
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
            if (
                attempts_left is not None and attempt > attempts_left
            ) or time.monotonic() > deadline:
                log.error(
                    "run %s: gave up storing its final status; it stays `running` until "
                    "recovered (`artifactflow resume %s`)",
                    message_id,
                    message_id,
                    exc_info=again,
                )
                return
            if attempt == 1:
                await _tell_readers(message, handle, data)
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_DELAY_SECONDS)
            continue
        if event is None:
            raise LeaseLostError(
                f"message {message_id} is no longer owned by this run", message_id=message_id
            )
        handle.finishing = True
        if not handle.done:
            await handle.publish(event)
        log.warning("run %s: final status `failed` stored after %d attempt(s)", message_id, attempt)
        return


async def _tell_readers(message: MessageRow, handle: LiveRun, data: ErrorData) -> None:
    """Hand this process's readers the final event now (stored later), and end their streams."""
    notice = ErrorData(
        message=f"{data.message} (message {message['id']} is marked "
        "failed once the database accepts writes again)",
        kind=data.kind,
    )
    await handle.publish(new_event(message, notice, handle.last_stored() + 1))
    await handle.finish()

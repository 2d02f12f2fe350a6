"""Reading a message's events: replay from the log, then follow the live run.

A run in this process is followed through its `RunHandle` (events handed over by `event_id`,
so nothing is lost or repeated at the switch). A run owned by another process is followed by
polling the log until the message stops running. A stream ends at a final event (`complete`,
`error`, `cancelled`, or a `permission_request` that is still the latest word).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from ..events import Event
from .eventlog import stored_event
from .runtime import Runtime

POLL_SECONDS = 0.25
POLL_GRACE = 8  # polls after the owner stopped running, for its final event to land


async def events(rt: Runtime, message_id: str, after_event_id: int | None = None) -> list[Event]:
    message = await rt.message(message_id)
    return [stored_event(message, row) for row in await rt.store.events(message_id, after_event_id)]


async def follow(
    rt: Runtime, message_id: str, after_event_id: int = 0, *, from_start: bool = False
) -> AsyncIterator[Event]:
    """See `ExecutionController.follow`."""
    message = await rt.message(message_id)
    last = after_event_id
    handle = rt.runs.get(message_id)
    start_index = 0 if (from_start or handle is None) else len(handle.events)
    rows = await rt.store.events(message_id, after_event_id)
    for index, row in enumerate(rows):
        event = stored_event(message, row)
        last = event.event_id
        yield event
        if event.is_final:
            more = index < len(rows) - 1
            if event.type == "permission_request" and (more or message_id in rt.runs):
                continue  # an older pause, already answered (or being answered here)
            return
    handle = rt.runs.get(message_id)
    if handle is not None:
        async for event in handle.follow(last, start_index=start_index):
            last = max(last, event.event_id)
            yield event
        return
    async for event in _poll(rt, message_id, last):
        yield event


async def _poll(rt: Runtime, message_id: str, last: int) -> AsyncIterator[Event]:
    """Another process may own the run: poll the log until the message stops running."""
    grace = 0
    while True:
        current = await rt.message(message_id)
        rows = await rt.store.events(message_id, last)
        for index, row in enumerate(rows):
            event = stored_event(current, row)
            last = event.event_id
            yield event
            if event.is_final and not (event.type == "permission_request" and index < len(rows) - 1):
                return
        if current["status"] != "running" or rt.lease_expired(current):
            # The owner updates the status just before storing the final event: allow the
            # event a moment to land, then stop.
            grace += 1
            if grace > POLL_GRACE:
                return
        await asyncio.sleep(POLL_SECONDS)

"""Reading a message's events: replay from the log, then follow the live run.

A run in this process is followed through its `LiveRun` (`live.py`) (events handed over by `event_id`,
so nothing is lost or repeated at the switch). A run owned by another process is followed
through the bus on PostgreSQL (`bus.py`: LISTEN/NOTIFY, token deltas
included, the log filling any gap; the subscription is taken before the log is read, so
nothing falls between them), or by polling the log on SQLite. A stream ends at a final event
(`complete`, `error`, `cancelled`, or a `permission_request` that is still the latest word).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from ...events.envelope import EPHEMERAL_TYPES, Event
from ..store.rows import MessageRow
from .eventlog import stored_event
from .live import LiveRun
from .runtime import Runtime

POLL_SECONDS = 0.25
POLL_GRACE = 8  # polls after the owner stopped running, for its final event to land
QUIET_SECONDS = 1.0  # bus: re-read the log after this long without news
QUIET_GRACE = 2  # bus: quiet checks after the owner stopped running


async def follow(
    rt: Runtime,
    message_id: str,
    after_event_id: int = 0,
    *,
    from_start: bool = False,
    started: LiveRun | None = None,
) -> AsyncIterator[Event]:
    """Replay stored events after `after_event_id`, then follow the live run until its final
    event (`complete`, `error`, `cancelled`, or a `permission_request` that is still the latest
    word). `from_start` also delivers chunks already published by a run this caller just
    started; `started` is that run's `LiveRun`, taken when it started: a run that finished
    before the first read is gone from `rt.runs`, and its chunks (never stored) live only in it."""
    handle = rt.runs.get(message_id)
    own = (started or handle) if from_start else None
    if own is not None and not own.lost:
        async for event in _from_segment_start(rt, own, after_event_id):
            yield event
        return
    message = await rt.message(message_id)
    last = after_event_id
    start_index = 0 if (from_start or handle is None) else len(handle.events)
    queue = rt.bus.subscribe(message_id) if rt.bus.live and handle is None else None
    try:
        if queue is not None and message["status"] == "running":
            await rt.bus.watch(message_id)
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
        source = _listen(rt, message, last, queue) if queue is not None else _poll(rt, message_id, last)
        async for event in source:
            yield event
    finally:
        if queue is not None:
            rt.bus.unsubscribe(message_id, queue)


async def _from_segment_start(rt: Runtime, handle: LiveRun, after_event_id: int) -> AsyncIterator[Event]:
    """Every event of a segment the caller started here, its chunks included, however late
    the first read comes. The handle holds everything the segment stored (stored first, then
    published); only what was stored before the segment began (a resume's own records) is
    read from the log."""
    first = handle.first_stored()
    if not handle.whole and (first is None or first > after_event_id + 1):
        message = await rt.message(handle.message_id)
        rows = await rt.store.events(handle.message_id, after_event_id)
        for row in rows:
            if first is not None and row["event_id"] >= first:
                break
            event = stored_event(message, row)
            after_event_id = event.event_id
            yield event
    async for event in handle.follow(after_event_id):
        yield event


def _item_row(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": item["t"], "event_id": item["i"], "timestamp": item["s"], "agent": item["a"],
            "data": item["d"]}


class _Log:
    """A follower's reads of the stored log; `last` is the id of the newest event it passed on."""

    def __init__(self, rt: Runtime, message_id: str, last: int) -> None:
        self.rt = rt
        self.message_id = message_id
        self.last = last
        self.current: MessageRow  # the message as of the latest read
        self.read_any = False  # the latest read found events
        self.ended = False  # an event that ends the stream has been passed on

    async def read(self) -> AsyncIterator[Event]:
        """The stored events after `last`, up to one that ends the stream (a
        `permission_request` does only as the last one stored)."""
        self.current = await self.rt.message(self.message_id)
        rows = await self.rt.store.events(self.message_id, self.last)
        self.read_any = bool(rows)
        for index, row in enumerate(rows):
            event = stored_event(self.current, row)
            self.last = event.event_id
            yield event
            if event.is_final and not (event.type == "permission_request" and index < len(rows) - 1):
                self.ended = True
                return


async def _listen(
    rt: Runtime, message: MessageRow, last: int, queue: asyncio.Queue[list[dict[str, Any]]]
) -> AsyncIterator[Event]:
    """Another worker owns the run: take its events from the bus, reading from the log what
    travelled by id only or was missed, until a final event."""
    message_id = message["id"]
    log = _Log(rt, message_id, last)
    quiet = 0
    while True:
        try:
            items = await asyncio.wait_for(queue.get(), QUIET_SECONDS)
        except TimeoutError:
            # Nothing heard for a while: the log is the truth (a lost notification, or an
            # owner that died without a final event).
            async for event in log.read():
                yield event
            if log.ended:
                return
            current = log.current
            if log.read_any:
                quiet = 0
            elif current["status"] != "running" or rt.lease_expired(current):
                quiet += 1
                if quiet > QUIET_GRACE:
                    return
            if current["status"] == "running":
                await rt.bus.watch(message_id)  # a run started or recovered since may not know
            continue
        quiet = 0
        for item in items:
            if item.get("t") in EPHEMERAL_TYPES:
                if item["i"] >= log.last:
                    yield stored_event(message, _item_row(item))
                continue
            wanted = item["i"]
            if wanted <= log.last:
                continue
            if wanted == log.last + 1 and "t" in item:
                events = [stored_event(message, _item_row(item))]
            else:  # by id only, or a gap: read up to it from the log
                rows = await rt.store.events(message_id, log.last)
                events = [stored_event(message, r) for r in rows if r["event_id"] <= wanted]
            for event in events:
                log.last = event.event_id
                yield event
                if event.is_final:
                    return


async def _poll(rt: Runtime, message_id: str, last: int) -> AsyncIterator[Event]:
    """Another process may own the run: poll the log until the message stops running."""
    log = _Log(rt, message_id, last)
    grace = 0
    while True:
        async for event in log.read():
            yield event
        if log.ended:
            return
        if log.current["status"] != "running" or rt.lease_expired(log.current):
            # The owner updates the status just before storing the final event: allow the
            # event a moment to land, then stop.
            grace += 1
            if grace > POLL_GRACE:
                return
        await asyncio.sleep(POLL_SECONDS)

"""The live side of runs in this process: `LiveRun`, the fan-out of a running message's
events to any number of readers, and `EventSink`, which persists a run's events, then
publishes them.

A run appends each event here after persisting it, so a reader that replays the event log and
then follows the live run can switch over by `event_id` without loss or duplicates. Chunks
(never persisted) are delivered live to readers attached at the time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from ...errors import StoreUnavailableError
from ...events.envelope import EPHEMERAL_TYPES, Event
from ..metrics import METRIC_FIELDS
from ..store.faults import UNAVAILABLE
from ..store.group_commit import group_commit_for
from ..store.outage_retry import is_outage, through_outage

log = logging.getLogger("artifactflow")


@dataclass
class LiveRun:
    """A run in flight in this process: its task and the events it published."""

    message_id: str
    task: asyncio.Task[None] | None = None
    events: list[Event] = field(default_factory=list)
    done: bool = False
    cancel_requested: bool = False
    started: bool = False  # the run's task has entered its body (a cancel may interrupt it)
    finishing: bool = False  # its final status is stored: a cancel must not rewrite it
    lost: bool = False  # another process took the message over: the run stopped writing
    watched: bool = False  # a reader on another worker follows it: announce on the bus
    whole: bool = False  # the message's first segment (`launch(fresh=True)`): `events` is its whole log
    unstored_ending: bool = False  # its final write failed and is retried (`outage.py`)
    closing: bool = False  # the process is stopping: an ending the store refuses is marked (`endings.py`)
    # The stored (JSON) form of its metric events by event id, as the sink wrote them: the
    # run's metrics read these instead of serialising each event again (`Segment._metrics`).
    stored_forms: dict[int, dict[str, Any]] = field(default_factory=dict)
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    def first_stored(self) -> int | None:
        """The id of the first event stored and published, None before any."""
        return next((e.event_id for e in self.events if e.type not in EPHEMERAL_TYPES), None)

    def last_stored(self) -> int:
        """The id of the last event stored and published."""
        return next((e.event_id for e in reversed(self.events) if e.type not in EPHEMERAL_TYPES), 0)

    async def publish(self, event: Event) -> None:
        async with self._changed:
            self.events.append(event)
            self._changed.notify_all()

    async def publish_all(self, events: list[Event]) -> None:
        """Publish a stored batch at once (one wake-up of the readers, not one per event)."""
        async with self._changed:
            self.events.extend(events)
            self._changed.notify_all()

    async def finish(self) -> None:
        async with self._changed:
            self.done = True
            self._changed.notify_all()

    async def follow(self, after_event_id: int, *, start_index: int = 0) -> AsyncIterator[Event]:
        """Yield live events with `event_id > after_event_id` (chunks from `start_index`)."""
        index = start_index
        last = after_event_id
        while True:
            async with self._changed:
                while index >= len(self.events) and not self.done:
                    await self._changed.wait()
                batch = self.events[index:]
                index = len(self.events)
                finished = self.done
            for event in batch:
                if event.type == "llm_chunk":
                    if event.event_id >= last:
                        yield event
                    continue
                if event.event_id <= last:
                    continue
                last = event.event_id
                yield event
            if finished and index >= len(self.events):
                return


class EventSink:
    """Persists a run's events in order, then publishes them — with group commit.

    Events that arrive while a write is in flight are committed together in the next
    transaction, so a burst (agent_complete, tool_start, …) costs one commit instead of one per
    event, while a lone event is still written at once; the batches of all runs waiting at the
    same moment share one transaction (`store/group_commit.py`). Nothing is published before it is
    stored; chunks (never stored) keep their place in the order. With a live `bus` (several
    workers on PostgreSQL) each stored batch, chunks included, is also announced to the other
    workers; a failed announcement is only logged (their readers fill gaps from the log).
    """

    def __init__(
        self, store: Any, handle: LiveRun, *, run_token: str | None = None, bus: Any = None
    ) -> None:
        self._store = store
        self._handle = handle
        self._run_token = run_token  # written only while it owns the message (LeaseLostError)
        self._bus = bus if bus is not None and bus.live else None
        self._queue: asyncio.Queue[Event] = asyncio.Queue()
        self._held = asyncio.Event()  # set while a batch waits for the database (`_append`)
        self.last_put = 0  # the id of the last event handed over to be stored
        self._task = asyncio.create_task(self._drain(), name=f"artifactflow-events-{handle.message_id}")

    def put(self, event: Event) -> None:
        if self._task.done():
            self._task.result()  # re-raise a storage failure in the run
        if event.type not in EPHEMERAL_TYPES:
            self.last_put = event.event_id
        self._queue.put_nowait(event)

    @property
    def holding(self) -> bool:
        """Whether a batch waits for the database to come back."""
        return self._held.is_set()

    @property
    def failed(self) -> bool:
        """Whether storing stopped (`put` raises its error)."""
        return self._task.done()

    async def flush(self) -> None:
        """Wait until everything put so far is stored and published."""
        join = asyncio.ensure_future(self._queue.join())
        done, _ = await asyncio.wait({join, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if self._task in done:
            join.cancel()
            self._task.result()

    async def settle(self, *, wait_out_outage: bool = True) -> None:
        """`flush`; without `wait_out_outage`, a batch held for the database (now, or as soon
        as a write in flight fails) raises instead (a run ending `failed` or `cancelled` tells
        its readers now: `outage.end_after_outage`)."""
        if wait_out_outage:
            await self.flush()
            return
        flushed = asyncio.ensure_future(self.flush())
        held = asyncio.ensure_future(self._held.wait())
        try:
            await asyncio.wait({flushed, held}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            held.cancel()
            if not flushed.done():
                flushed.cancel()
        if not flushed.cancelled() and flushed.done():
            flushed.result()
            return
        raise StoreUnavailableError(
            f"{UNAVAILABLE}: events of message {self._handle.message_id} wait for the database",
            reason=UNAVAILABLE,
        )

    async def settle_now(self) -> None:
        """`settle` for a run ending `failed` or `cancelled` (it does not wait out an outage)."""
        await self.settle(wait_out_outage=False)

    async def close(self) -> None:
        try:
            await self.flush()
        finally:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _append(self, stored: list[dict[str, Any]]) -> None:
        """Store a batch. On PostgreSQL an outage does not drop it: it is written once the
        database is back (`store/outage_retry.py`), in order, the batches behind it waiting;
        a retry first leaves out the events an earlier attempt did store (its reply lost)."""
        message_id = self._handle.message_id
        commit = group_commit_for(self._store)

        async def attempt(again: bool) -> None:
            batch = stored
            try:
                if again:
                    last = await self._store.last_event_id(message_id)
                    batch = [e for e in stored if e["event_id"] > last]
                if batch:
                    await commit.append(message_id, batch, run_token=self._run_token)
            except Exception as exc:
                if is_outage(exc):
                    self._held.set()
                raise

        if self._store.is_sqlite:  # a full disk or a locked file fails at once (the CLI exits)
            await attempt(False)
            return
        try:
            await through_outage(attempt, what=f"run {message_id}: events")
        finally:
            self._held.clear()

    def _announce(self, bus: Any) -> bool:
        if not self._handle.watched and bus.watched(self._handle.message_id):
            self._handle.watched = True  # the watch arrived before the run started
        return self._handle.watched

    async def _drain(self) -> None:
        while True:
            batch = [await self._queue.get()]
            while not self._queue.empty():
                batch.append(self._queue.get_nowait())
            try:
                stored = []
                for event in batch:
                    if event.type not in EPHEMERAL_TYPES:
                        stored.append(form := event.model_dump(mode="json"))
                        if event.type in METRIC_FIELDS:
                            self._handle.stored_forms[event.event_id] = form
                if stored:
                    await self._append(stored)
                if self._bus is not None and self._announce(self._bus):
                    try:
                        await self._bus.publish(self._handle.message_id, batch)
                    except Exception:
                        log.warning("run %s: could not announce events", self._handle.message_id, exc_info=True)
                await self._handle.publish_all(batch)
            finally:
                for _ in batch:
                    self._queue.task_done()

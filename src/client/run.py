"""`Run`: one handle on a message's run, wherever it runs; `RunResult`: where a segment ended.

A handle reads the message's events from its cursor (the id of the last stored event it
yielded): stored ones first, then live ones, until the segment's final event (`complete`,
`error`, `cancelled`, or a `permission_request` when it pauses). Any process can make one
(`client.runs.get(id, after_event_id=N)`), so a reader that lost its connection reattaches
where it stopped.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..core.run.follow import follow
from ..core.run.resume import resume_cursor
from ..events.envelope import EPHEMERAL_TYPES, Event
from ..events.payloads import MessageStatus
from ..shapes import AskedCall

if TYPE_CHECKING:
    from ..core.engine import Engine
    from ..core.metrics import RunMetrics
    from .requests import Decisions


@dataclass
class RunResult:
    """Where a run segment ended: the message's status and, when it completed, its answer."""

    conversation_id: str
    message_id: str
    thread_id: str
    status: MessageStatus
    response: str | None
    outcome: str | None
    metrics: RunMetrics | None
    pending_calls: list[AskedCall] | None  # when waiting: the calls to decide on
    error: str | None
    events: list[Event]  # the segment's events this handle read (no chunks)


class Run:
    """A message's run: `async for event in run`, `await run.result()`, `await run.cancel()`,
    and, when it pauses, `await run.respond(decisions)`.

    `async with run:` cancels the run when the block exits before the segment ended, if this
    handle started it; iteration that stops early leaves the run going (iterate again to
    continue where it stopped).
    """

    def __init__(
        self, engine: Engine, message: Mapping[str, Any], *, after_event_id: int, started: bool
    ) -> None:
        self._engine = engine
        self.message_id: str = message["id"]
        self.conversation_id: str = message["conversation_id"]
        self.thread_id: str = message["thread_id"]
        # The workflow's own name (a `WorkflowTask` may name its file) when this handle started one.
        self.workflow: str | None = message.get("workflow")
        self.events_seen = 0  # non-chunk events this handle yielded
        self._cursor = after_event_id
        self._started = started  # this handle started the current segment
        self._fresh = started  # its first read also takes the chunks published so far
        self._ended = False  # the current segment's final event was yielded
        self._segment: list[Event] = []
        # the segment this handle started, held so its chunks outlive a run that ends first
        self._live = engine.rt.runs.get(self.message_id) if started else None

    def __repr__(self) -> str:
        return f"Run(message_id={self.message_id!r}, events_seen={self.events_seen})"

    @property
    def cursor(self) -> int:
        """The event id iteration continues after: the last stored event this handle read
        or, just after `respond`, the pause's `permission_request` (another process reads
        the same events with `runs.get(message_id, after_event_id=cursor)`)."""
        return self._cursor

    def __aiter__(self) -> AsyncIterator[Event]:
        return self._read()

    async def _read(self) -> AsyncIterator[Event]:
        if self._ended:
            return
        fresh, self._fresh = self._fresh, False
        async for event in follow(
            self._engine.rt, self.message_id, self._cursor, from_start=fresh, started=self._live
        ):
            if event.type not in EPHEMERAL_TYPES:
                self._cursor = event.event_id
                self.events_seen += 1
                self._segment.append(event)
                self._ended = event.is_final
            yield event
        self._ended = True

    async def result(self) -> RunResult:
        """Read to the segment's end, then where it stands."""
        if not self._ended:
            async for _ in self:
                pass
        message = await self._engine.rt.message(self.message_id)
        waiting = message.get("waiting_for") or {}
        status = MessageStatus(message["status"])
        return RunResult(
            conversation_id=message["conversation_id"],
            message_id=self.message_id,
            thread_id=message["thread_id"],
            status=status,
            response=message.get("response"),
            outcome=message.get("outcome"),
            metrics=message.get("metrics"),
            pending_calls=waiting.get("calls") if status is MessageStatus.WAITING else None,
            error=message.get("error"),
            events=list(self._segment),
        )

    async def finished_here(self) -> bool:
        """Wait for the segment this handle started in this process to end, without reading
        its events (a watcher that only needs to know it ended); False at once when there is
        none here to wait for (then `result()` follows it from the log)."""
        live = self._live
        if live is None or live.task is None:
            return False
        await asyncio.wait({live.task})  # its own failure is the run's, not the waiter's
        return True

    async def respond(self, decisions: Decisions) -> Run:
        """Answer the pause (`InvalidResumeError` for decisions that do not fit it,
        `ResumeConflictError` when it is not waiting or was answered elsewhere) and continue on
        this handle: iterating again yields the resumed segment's events."""
        await self._engine.resume(self.message_id, decisions)
        self._resumed(await resume_cursor(self._engine.rt, self.message_id))
        return self

    def _resumed(self, cursor: int) -> None:
        self._cursor = cursor  # just after the pause's permission_request
        self._started = self._fresh = True
        self._ended = False
        self._segment = []
        self._live = self._engine.rt.runs.get(self.message_id)

    async def cancel(self) -> bool:
        """Stop the run (here or on the worker that owns it), or close it while paused. False
        if it is neither running nor paused."""
        return await self._engine.cancel(self.message_id)

    async def __aenter__(self) -> Run:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._started and not self._ended:
            await self.cancel()

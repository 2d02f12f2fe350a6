"""In-process fan-out of a running message's events to any number of readers.

A run appends each event here after persisting it, so a reader that replays the event log and
then follows the live run can switch over by `event_id` without loss or duplicates. Chunks
(never persisted) are delivered live to readers attached at the time.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from .events import Event


@dataclass
class RunHandle:
    message_id: str
    task: asyncio.Task[None] | None = None
    events: list[Event] = field(default_factory=list)
    done: bool = False
    cancel_requested: bool = False
    _changed: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def publish(self, event: Event) -> None:
        async with self._changed:
            self.events.append(event)
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

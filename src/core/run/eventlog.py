"""The one place that builds `Event` objects for a message.

Three sources: events a live run emits (`new_event`), rows read back from the log
(`stored_event`), and single events written outside a run — a cancel while paused, a failed
recovery, gc abandoning a pause (`append_event`). Keeping them together means the event's
envelope (ids, timestamp) and payload typing change in one file.
"""

from __future__ import annotations

import time
from typing import Any

from ..events import Event


def new_event(
    message: dict[str, Any], type_: str, event_id: int, agent: str | None, data: dict[str, Any]
) -> Event:
    """An event emitted now by `message`'s run (its data checked against its type)."""
    return Event.build(
        type_,
        data,
        event_id=event_id,
        timestamp=time.time(),
        agent=agent,
        conversation_id=message["conversation_id"],
        message_id=message["id"],
        thread_id=message["thread_id"],
    )


def stored_event(message: dict[str, Any], row: dict[str, Any]) -> Event:
    """An event read back from `message`'s log."""
    return Event(
        type=row["type"],
        event_id=row["event_id"],
        timestamp=row["timestamp"],
        agent=row["agent"],
        conversation_id=message["conversation_id"],
        message_id=message["id"],
        thread_id=message["thread_id"],
        data=row["data"],
    )


async def append_event(
    store: Any, message: dict[str, Any], type_: str, agent: str | None, data: dict[str, Any]
) -> Event:
    """Store one event after `message`'s last (no run is writing to its log)."""
    event_id = await store.last_event_id(message["id"]) + 1
    event = new_event(message, type_, event_id, agent, data)
    await store.append_event(message["id"], event.model_dump(mode="json"))
    return event

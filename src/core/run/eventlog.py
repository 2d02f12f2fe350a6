"""The one place that builds `Event` objects for a message.

Three sources: events a live run emits (`new_event`), rows read back from the log
(`stored_event`), and events that record a status change (`change_status`): a run's final
event, a cancel while paused, a failed recovery, gc abandoning a pause. Those go through the
store's compare-and-set, which writes the status and the event in one transaction and
allocates the event id under the message's row lock, so racing writers never collide.
Keeping them together means the event's envelope (ids, timestamp) and payload typing change
in one file.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from ...events.envelope import Event
from ...events.payloads import EventData
from ..store.rows import MessageRow


def new_event(message: MessageRow, data: EventData, event_id: int, agent: str | None = None) -> Event:
    """An event emitted now by `message`'s run (its payload names its type)."""
    return Event.build(
        data,
        event_id=event_id,
        timestamp=time.time(),
        agent=agent,
        **_ids(message),
    )


def stored_event(message: MessageRow, row: Mapping[str, Any]) -> Event:
    """An event read back from `message`'s log."""
    return Event(
        type=row["type"],
        event_id=row["event_id"],
        timestamp=row["timestamp"],
        agent=row["agent"],
        data=row["data"],
        **_ids(message),
    )


def _ids(message: MessageRow) -> dict[str, str]:
    """The ids an event carries of the message whose run it belongs to."""
    return {
        "conversation_id": message["conversation_id"],
        "message_id": message["id"],
        "thread_id": message["thread_id"],
    }


async def change_status(
    store: Any,
    message: MessageRow,
    data: EventData,
    *,
    agent: str | None = None,
    **change: Any,
) -> Event | None:
    """`store.change_status` of `message` with the event of `data` (by `agent`) recorded with
    it; the stored event, or None when the expected status or run token no longer held."""
    draft = new_event(message, data, 0, agent)  # typed and checked; the store numbers it
    result = await store.change_status(message["id"], event=draft.model_dump(mode="json"), **change)
    if not result.won:
        return None
    return stored_event(message, result.event)

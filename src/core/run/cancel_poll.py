"""Seeing a cancel recorded by another process at the run's next step (SQLite).

A cancel from another process is recorded on the message (`cancel.py`). On PostgreSQL the bus
tells the owner at once; on SQLite there is no bus, and the owner used to see the flag only at
its next approved tool, status change or lease renewal (a third of `run.lease_seconds`): a
run cancelled from a second terminal kept calling the model for up to ten seconds. Now the
segment asks at every step boundary (after each model call or tool round), so a cancel takes
effect within one model call or tool step. The question is one indexed read of one row, and
it is asked at most every `MIN_INTERVAL_SECONDS`, so a burst of short steps pays little.
"""

from __future__ import annotations

import time
from typing import Any

MIN_INTERVAL_SECONDS = 0.2


class CancelPoll:
    """Asks the store whether a cancel was recorded for `message_id` (only without a bus)."""

    def __init__(self, store: Any, message_id: str, *, enabled: bool) -> None:
        self._store = store
        self._message_id = message_id
        self.enabled = enabled
        self._last = time.monotonic()

    async def requested(self) -> bool:
        """Whether a cancel is recorded (False between polls, and when disabled)."""
        if not self.enabled:
            return False
        now = time.monotonic()
        if now - self._last < MIN_INTERVAL_SECONDS:
            return False
        self._last = now
        return bool(await self._store.cancel_requested(self._message_id))

"""Stopping a run in this process, or closing a paused message (`segment.cancel`).

The local half of a cancel: `cancel.py` records a cancel in the database first, then asks the
owner; when the owner is this process, this stops its task (or closes the pause with one
compare-and-set that a racing resume may win instead).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid

from ...events.payloads import CancelledData
from .eventlog import change_status
from .maintenance import cleanup_checkpoints
from .runtime import Runtime


async def cancel(rt: Runtime, message_id: str) -> bool:
    """Stop a run in this process, or close a paused message. False if neither applies."""
    handle = rt.runs.get(message_id)
    if handle is not None and handle.task is not None and handle.finishing:
        # Its final event is out: only cleanup is left, and a cancel must not rewrite the outcome.
        with contextlib.suppress(BaseException):
            await asyncio.shield(handle.task)
    if handle is None or handle.task is None or handle.task.done():
        message = await rt.message(message_id)
        if message["status"] != "waiting":
            return False
        # Ordered against a resume (and another cancel): one compare-and-set wins.
        closed = await change_status(
            rt.store, message, CancelledData(reason="cancelled while paused"),
            expected_status="waiting", expected_run_token=message["run_token"],
            status="cancelled", run_token=uuid.uuid4().hex, waiting_for=None,
        )
        if closed is None:
            return False
        await cleanup_checkpoints(rt, message)
        return True
    if not handle.cancel_requested:
        handle.cancel_requested = True
        if handle.started:  # otherwise the task's first line sees the request
            handle.task.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.shield(handle.task)
    return True

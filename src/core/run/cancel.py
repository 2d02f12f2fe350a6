"""Cancelling a message from any worker, at any moment, without losing the cancel.

A cancel is decided in the database, by a compare-and-set that races the run's own status
changes, so it either takes effect or says why it could not:

- **Paused** (`waiting`): `waiting → cancelled`, closed here. A resume racing it loses its claim.
- **Running**: `cancel_requested_at` is set while the status is still `running` (`request_cancel`).
  From then on the run's owner — in this process, on another worker, or one that claimed the
  message a moment ago — cannot miss it: a segment reads it before it drives the graph; an
  approved tool's ledger start refuses to begin after it (`ledger_begin`); the run's own final
  change to `completed`, `waiting` or `failed` is conditional on it, so a run that reaches its
  end first ends `cancelled` instead; a recovery ends the run rather than continuing it; and
  the owner renews its lease only after checking it. The owner hears at once through the bus
  (`af_control`); the durable flag covers the moments the bus cannot (the run is not registered
  yet, a notification is lost). An owner whose lease expired is dead: the run is ended here.
- **Ended** (`completed`, `failed`): the cancel lost; `CancelOutcome.reason` says why (HTTP 409).
  An already `cancelled` message is not cancelled again (`cancelled` False, no reason).

A cancel then waits briefly (`CANCEL_WAIT_SECONDS`) for the run to stop, so a delete that follows
usually removes rows nobody writes any more; a run that has not stopped by then (a sync tool
that cannot be interrupted) still ends `cancelled` at its next step.
"""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

from ...events.payloads import CancelledData
from ..store.rows import MessageRow
from . import segment
from .eventlog import change_status
from .maintenance import cleanup_checkpoints
from .runtime import Runtime

CANCEL_WAIT_SECONDS = 2.0
POLL_SECONDS = 0.02
ATTEMPTS = 5  # each retry follows one status change that beat the cancel (waiting → running, …)

_LOST = {
    "completed": "it has completed",
    "failed": "it has failed",
}


@dataclass(frozen=True)
class CancelOutcome:
    """What a cancel did: `cancelled` True once it is accepted (the run stops, or stopped);
    `status` is the message's status when the cancel answered; `reason` why it could not."""

    cancelled: bool
    status: str
    reason: str | None = None


async def cancel(rt: Runtime, message_id: str) -> CancelOutcome:
    """Cancel `message_id` wherever it runs; see the module docstring."""
    for _ in range(ATTEMPTS):
        message = await rt.message(message_id)
        status = message["status"]
        if status == "waiting":
            if await segment.cancel(rt, message_id):
                return CancelOutcome(True, (await rt.message(message_id))["status"])
            continue  # a resume claimed it first: it is running now
        if status != "running":
            return CancelOutcome(False, status, refusal(message_id, status))
        if (await rt.store.request_cancel(message_id, now=rt.clock())).won:
            return await _stop(rt, message)
    status = (await rt.message(message_id))["status"]
    return CancelOutcome(False, status, refusal(message_id, status))


def refusal(message_id: str, status: str) -> str | None:
    """Why a message with `status` cannot be cancelled (None: it is cancelled already)."""
    if status == "cancelled":
        return None
    why = _LOST.get(status, f"its status is {status}")
    return f"message {message_id} cannot be cancelled: {why}"


async def _stop(rt: Runtime, message: MessageRow) -> CancelOutcome:
    """The cancel is recorded: make the owner stop now, and wait a little for it."""
    message_id = message["id"]
    if rt.running_here(message_id):
        await segment.cancel(rt, message_id)
    elif rt.lease_expired(message):
        await end_orphan(rt, message)
    else:
        await rt.bus.control({"op": "cancel", "m": message_id})
    loop = asyncio.get_running_loop()
    deadline = loop.time() + CANCEL_WAIT_SECONDS
    status = "running"
    while True:
        status = (await rt.message(message_id))["status"]
        if status != "running" or loop.time() >= deadline:
            break
        await asyncio.sleep(POLL_SECONDS)
    return CancelOutcome(True, status)


async def end_orphan(rt: Runtime, message: MessageRow) -> bool:
    """End a cancelled `running` message whose owner died (lease expired) here, rather than
    continue it; False if someone else changed it first."""
    ended = await change_status(
        rt.store,
        message,
        CancelledData(reason="cancelled by request (its process had stopped)"),
        expected_status="running",
        expected_run_token=message["run_token"],
        stale_before=rt.clock(),
        status="cancelled",
        run_token=uuid.uuid4().hex,
        lease_expires_at=None,
    )
    if ended is None:
        return False
    await cleanup_checkpoints(rt, message)
    return True

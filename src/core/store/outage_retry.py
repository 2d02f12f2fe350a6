"""Waiting out a PostgreSQL outage instead of dropping work that is already done.

A run whose model has answered while the database was away (a restart, a network blip) used to
fail: its event batch could not be written, the sink stopped, and the run ended `failed` with
"could not store its last events" although nothing was wrong with the run. Writes that carry
produced work (a run's event batches, its checkpoints, its final `completed` or `waiting`
status) now go through `through_outage`: a failure that means the database is unreachable
(`faults.UNAVAILABLE`, never a full disk or a read-only file: those stay fast failures, the CLI
must exit on them) is retried with a short backoff, capped at `MAX_DELAY_SECONDS`, so the
database's return is noticed within about a second (a refused connect fails at once; a silent
host within the connect timeout, `unit_of_work.CONNECT_TIMEOUT_SECONDS`).

The wait is bounded: after `HOLD_SECONDS` the last error is raised, and the run ends `failed`
as before (that ending is itself stored when the database returns: `run/outage.py`). While a
run waits its graph waits too (its checkpoint cannot be written), so what a run holds in memory
is at most one step's events.

Retrying must not write twice. Event batches are retried only after reading which of their ids
are stored already (`run/live.py`); checkpoint statements are upserts; a final status change is
a compare-and-set whose lost retry is checked against the row (`run/outage.py`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from .faults import UNAVAILABLE, store_fault

log = logging.getLogger("artifactflow.store")

T = TypeVar("T")

HOLD_SECONDS = 300.0  # how long produced work waits for the database before the run fails
FIRST_DELAY_SECONDS = 0.1
MAX_DELAY_SECONDS = 1.0  # between attempts: the database's return is noticed within this


def is_outage(exc: BaseException) -> bool:
    """Whether `exc` says the database cannot be reached (down, restarting, refusing)."""
    fault = store_fault(exc)
    return fault is not None and fault.reason == UNAVAILABLE


async def through_outage(
    attempt: Callable[[bool], Awaitable[T]],
    *,
    what: str,
    patience: float | None = None,
) -> T:
    """`await attempt(again)` until it succeeds; `again` is False the first time and True for
    every retry after an outage (so the attempt can check what an earlier one did). Errors
    that are not an outage, and an outage longer than `patience` seconds (`HOLD_SECONDS`
    unless given; 0: none, as before this module), are raised."""
    patience = HOLD_SECONDS if patience is None else patience
    deadline: float | None = None
    delay = FIRST_DELAY_SECONDS
    again = False
    while True:
        try:
            result = await attempt(again)
        except Exception as exc:
            if not is_outage(exc) or patience <= 0:
                raise
            now = time.monotonic()
            if deadline is None:
                deadline = now + patience
                log.warning("%s: %s; retried until the database is back (up to %g s)",
                            what, store_fault(exc), patience)
            elif now >= deadline:
                log.error("%s: the database stayed away for %g s; giving up", what, patience)
                raise
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_DELAY_SECONDS)
            again = True
            continue
        if again:
            log.info("%s: stored after the database came back", what)
        return result

"""Stopping a process's runs when its engine closes, whatever state the database is in.

Closing used to ask the store to cancel each run in flight (`cancel.cancel`, a write) and let
the first failure end `aclose` there: on a full disk the cancel's own write failed, the store
and the checkpoint saver were never closed, their connection threads kept the interpreter
alive, and a command line printed its final `error` and then never exited. Now:

- every run is told the process is stopping (`LiveRun.closing`): an ending the store refuses
  from then on is left as a durable marker (`endings.py`) instead of being retried for minutes;
- a run whose final write is already being retried (`LiveRun.unstored_ending`), or whose
  cancel cannot be written, is stopped here in this process (its task is cancelled) — the
  store is not asked for anything;
- each run gets at most `STOP_SECONDS` to finish its cleanup, then its task is cancelled again
  until it ends; nothing a run does can keep the engine from closing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from . import cancel as run_cancel
from . import segment
from .runtime import Runtime

log = logging.getLogger("artifactflow")

STOP_SECONDS = 5.0
CANCEL_SECONDS = 5.0


async def stop_runs(rt: Runtime, *, cancel_running: bool = True) -> None:
    """Stop (or, without `cancel_running`, wait for) every run in flight in this process."""
    handles = [h for h in list(rt.runs.values()) if h.task is not None and not h.task.done()]
    for handle in handles:
        handle.closing = True
    for handle in handles:
        task = handle.task
        if task is None or task.done():
            continue
        if cancel_running:
            if handle.unstored_ending:
                task.cancel()  # its ending is marked as the task stops (`outage.py`)
            else:
                try:  # not under a timeout: cutting a statement short can spoil its connection
                    await run_cancel.cancel(rt, handle.message_id)  # waits 2 s at most for the run
                except Exception as exc:  # the store refused the cancel: stop it here
                    log.warning("run %s: could not record its cancel (%s); stopping it here", handle.message_id, exc)
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(segment.cancel(rt, handle.message_id), CANCEL_SECONDS)
        await _until_done(task, STOP_SECONDS if cancel_running else None)


async def _until_done(task: asyncio.Task[None], patience: float | None) -> None:
    """Wait for `task`; after `patience` seconds, cancel it until it ends."""
    with contextlib.suppress(BaseException):
        await asyncio.wait_for(asyncio.shield(task), patience)
    while not task.done():
        task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(asyncio.shield(task), 1.0)

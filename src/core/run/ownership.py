"""Checkpoints are written only by the run that owns the message.

A process paused past its lease (a suspended laptop, a stopped container) wakes up inside a
graph step; meanwhile another process recovered the message and maybe finished it. Its events
are refused by the store (`append_events(run_token=...)`), but LangGraph would still write
its checkpoints. So the process's saver is guarded: while a run drives the graph
(`owned_by`, a context variable that LangGraph's tasks inherit), every checkpoint (`aput`, once
per step) first checks that the run's token still owns the message and raises
`LeaseLostError` if not; the step's pending writes (`aput_writes`, one per task) are not
checked, which would cost a read each for rows that only matter next to a checkpoint. Writes
outside a run (tests, tools) are not checked. What slips through — those pending writes, or a
takeover between the check and the write — is removed by `gc` (checkpoint rows of messages
that are no longer resumable).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Awaitable, Callable, Iterator
from contextvars import ContextVar
from typing import Any

from ...errors import LeaseLostError

Owner = tuple[Any, str, str]  # (store, message_id, run_token)

_OWNER: ContextVar[Owner | None] = ContextVar("artifactflow_run_owner", default=None)


@contextlib.contextmanager
def owned_by(store: Any, message_id: str, run_token: str) -> Iterator[None]:
    """Checkpoint writes made in this context (and tasks started in it) need the token."""
    reset = _OWNER.set((store, message_id, run_token))
    try:
        yield
    finally:
        _OWNER.reset(reset)


async def _check() -> None:
    owner = _OWNER.get()
    if owner is None:
        return
    store, message_id, run_token = owner
    if not await store.holds_run(message_id, run_token):
        raise LeaseLostError(
            f"message {message_id} is no longer owned by this run; its checkpoint was not written",
            message_id=message_id,
        )


def _guarded(write: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    @functools.wraps(write)
    async def guarded(*args: Any, **kwargs: Any) -> Any:
        await _check()
        return await write(*args, **kwargs)

    return guarded


def guard_saver(saver: Any) -> Any:
    """Make `saver`'s checkpoints (`aput`) check the owning run."""
    if not getattr(saver, "_artifactflow_guarded", False):
        saver.aput = _guarded(saver.aput)
        saver._artifactflow_guarded = True
    return saver

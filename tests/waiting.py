"""Wait for observable state, not for time: the one polling helper the tests share.

A test that needs something to have happened in another task, thread or process polls for
it with `wait_until` (or `wait_until_sync` outside an event loop) instead of sleeping a
guessed amount: it goes on as soon as the state is there and fails with a clear message
when it never comes. Lease expiry is not waited for at all: move the controller's `clock`.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

TIMEOUT = 10.0
INTERVAL = 0.01


async def wait_until(
    check: Callable[[], T | Awaitable[T]],
    *,
    timeout: float = TIMEOUT,  # noqa: ASYNC109 - a polling budget, not a cancel scope
    interval: float = INTERVAL,
    what: str = "condition",
) -> T:
    """Poll `check` (sync or async) until it returns something truthy, and return that.

    Raises AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if inspect.isawaitable(value):
            value = await value
        if value:
            return value  # type: ignore[return-value]
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not reached in {timeout:g} s")
        await asyncio.sleep(interval)


def wait_until_sync(
    check: Callable[[], T],
    *,
    timeout: float = TIMEOUT,
    interval: float = INTERVAL,
    what: str = "condition",
) -> T:
    """`wait_until` for code that runs outside an event loop (threads, servers)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"{what} not reached in {timeout:g} s")
        time.sleep(interval)

"""Wait for observable state, not for time: the one polling helper the tests share.

A test that needs something to have happened in another task, thread or process polls for
it with `wait_until` (or `wait_until_sync` outside an event loop) instead of sleeping a
guessed amount: it goes on as soon as the state is there and fails with a clear message
when it never comes. Lease expiry is not waited for at all: move the controller's `clock`.

Ceilings only catch hangs. A busy two-core machine can be ten times slower than an idle one,
so every ceiling is generous (minutes) and scaled by `SLOWNESS`: a calibration measured once
when the test run starts (a fixed pure-Python workload against its time on an idle reference
machine), or `AF_TEST_SLOWNESS` when set. A passing wait returns as soon as its state is there,
so a long ceiling costs nothing; only a test that waits for something to *not* happen uses a
short fixed time, and says so.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")

# seconds the calibration workload takes on an idle reference machine (2 cores, 2026-11)
_REFERENCE_SECONDS = 0.05


def _calibrate() -> float:
    """How many times slower than the reference this machine runs now (at least 1)."""
    forced = os.environ.get("AF_TEST_SLOWNESS")
    if forced:
        return max(1.0, float(forced))
    best = float("inf")
    for _ in range(3):  # the best of three: a single preemption is not the machine's speed
        start = time.perf_counter()
        total = 0
        for i in range(400_000):
            total += i * i
        best = min(best, time.perf_counter() - start)
    return min(20.0, max(1.0, best / _REFERENCE_SECONDS))


SLOWNESS = _calibrate()


def ceiling(seconds: float) -> float:
    """A ceiling of `seconds` on an idle machine, scaled to this one's measured slowness."""
    return seconds * SLOWNESS


TIMEOUT = ceiling(120.0)
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

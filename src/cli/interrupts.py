"""Ctrl-C and SIGTERM: the first one cancels cleanly, a second one exits at once.

SIGTERM (systemd, `timeout`, `docker stop`) is handled exactly like Ctrl-C, only the exit code
differs (143 = 128 + SIGTERM, 130 = 128 + SIGINT). One guard covers a whole command, from
opening the client to closing it (`app.execute`), with handlers on the event loop
(`loop.add_signal_handler`), so they run between steps:

- While a run is driven, the first signal goes to the session (`handling`), which schedules
  `client.runs.cancel(message_id)`: the run records itself as cancelled with its partial answer
  and its stream ends with a `cancelled` event, which the renderer prints as one line with the
  message id (meanwhile a terminal's spinner says "cancelling").
- Otherwise the first signal cancels the command's task (nothing of a run is lost) and
  `report_stopped` prints one line. Before a guard exists (the command line still loading or
  parsing), Ctrl-C is a KeyboardInterrupt that `main` turns into one line and 130.
- Once the command's outcome is known (`settle`), a signal can no longer change it: a run that
  completed exits 0 even if Ctrl-C lands while the client closes.

A second signal calls `os._exit`; a run then keeps status `running` until its lease expires,
after which `artifactflow resume` recovers it. At prompts the loop handlers are suspended
(`suspended()`): either signal raises KeyboardInterrupt there, which the prompt turns into
"left paused".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from types import FrameType
from typing import Any

from rich.console import Console

from .exitcodes import CANCELLED, TERMINATED

SIGNALS = (signal.SIGINT, signal.SIGTERM)
# What `signal.getsignal` returns and `signal.signal` takes back.
SignalHandler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None
EXIT_CODES = {signal.SIGINT: CANCELLED, signal.SIGTERM: TERMINATED}
_CURRENT: ContextVar[InterruptGuard | None] = ContextVar("artifactflow_interrupt_guard", default=None)


def current_guard(err: Console) -> InterruptGuard:
    """The guard of the running command (a fresh one, not installed, outside `execute`)."""
    return _CURRENT.get() or InterruptGuard(err)


class InterruptGuard:
    def __init__(self, err: Console) -> None:
        self.err = err
        self.count = 0
        self.signum: int | None = None  # the first signal that was acted on
        self.settled: int | None = None  # the command's exit code, once known
        self._target: Callable[[], None] | None = None
        self._task: asyncio.Task[object] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._previous: dict[int, SignalHandler] = {}

    @property
    def interrupted(self) -> bool:
        return self.signum is not None

    @property
    def exit_code(self) -> int:
        """The code for a cancelled command: 130 after Ctrl-C, 143 after SIGTERM."""
        return EXIT_CODES.get(self.signum, CANCELLED)  # type: ignore[call-overload]

    def report_stopped(self) -> None:
        """The one line for a command stopped by the signal before its outcome was known."""
        what = "interrupted (Ctrl-C)" if self.signum == signal.SIGINT else "terminated (SIGTERM)"
        self.err.print(f"[yellow]✗ {what}: stopped[/yellow]")

    def settle(self, code: int) -> None:
        """The outcome is final: later signals no longer change the exit code."""
        if self.settled is None:
            self.settled = code

    # --- handling ---------------------------------------------------------------------------

    def _handle(self, signum: int) -> None:
        self.count += 1
        if self.settled is not None:
            if self.count > 1:
                os._exit(self.settled)
            return  # finished already: only closing is left
        if self.count > 1:
            self.err.print("[red]interrupted again: exiting now[/red]")
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(EXIT_CODES.get(signum, CANCELLED))  # type: ignore[call-overload]
        self.signum = signum
        if self._target is not None:
            # The session cancels the run and prints one line once it is cancelled (the
            # message id, the partial answer); meanwhile a terminal's spinner says so.
            self._target()
        elif self._task is not None:
            self._task.cancel()

    @contextlib.contextmanager
    def handling(self, target: Callable[[], None]) -> Iterator[None]:
        """Send the first signal to `target` (a session's cancel) for the duration."""
        previous, self._target = self._target, target
        try:
            yield
        finally:
            self._target = previous

    # --- installation -----------------------------------------------------------------------

    def _add(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            for signum in SIGNALS:
                loop.add_signal_handler(signum, self._handle, signum)
        except (NotImplementedError, RuntimeError, ValueError):  # no signals here (Windows, thread)
            return
        self._loop = loop

    def _remove(self) -> None:
        if self._loop is not None:
            for signum in SIGNALS:
                self._loop.remove_signal_handler(signum)  # SIGINT: KeyboardInterrupt again
            self._loop = None

    def __enter__(self) -> InterruptGuard:
        """Install for the current task (called inside the command's coroutine)."""
        self._task = asyncio.current_task()
        self._token = _CURRENT.set(self)
        self._previous = {signum: signal.getsignal(signum) for signum in SIGNALS}
        self._add()
        return self

    def __exit__(self, *exc: object) -> None:
        self._remove()
        for signum, handler in self._previous.items():  # a host application's handlers
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signum, handler)
        _CURRENT.reset(self._token)

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """KeyboardInterrupt semantics for both signals for the duration (around prompts)."""
        active = self._loop is not None
        self._remove()
        previous = signal.getsignal(signal.SIGTERM)
        with contextlib.suppress(ValueError):  # not the main thread: leave SIGTERM alone
            signal.signal(signal.SIGTERM, self._term_at_prompt)
        try:
            yield
        finally:
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(signal.SIGTERM, previous)
            if active:
                self._add()

    def _term_at_prompt(self, signum: int, frame: FrameType | None) -> None:
        self.count += 1
        self.signum = signum
        raise KeyboardInterrupt

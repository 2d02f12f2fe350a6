"""Ctrl-C during a run: the first press cancels cleanly, a second one exits at once.

The handler is installed on the event loop (`loop.add_signal_handler`), so it runs between
steps and can schedule `controller.cancel(message_id)`: the run then records itself as
cancelled with its partial answer, and its stream ends with a `cancelled` event. A second
press calls `os._exit(130)`; the message keeps status `running` until its lease expires, after
which `artifactflow resume` can recover it. At prompts the handler is suspended
(`suspended()`), so Ctrl-C there is a plain KeyboardInterrupt the prompt turns into "left
paused".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Iterator

from rich.console import Console

from .exitcodes import CANCELLED


class InterruptGuard:
    def __init__(self, on_first: Callable[[], None], err: Console) -> None:
        self.on_first = on_first
        self.err = err
        self.count = 0
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def interrupted(self) -> bool:
        return self.count > 0

    def _handle(self) -> None:
        self.count += 1
        if self.count > 1:
            self.err.print("[red]interrupted again: exiting now[/red]")
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(CANCELLED)
        self.on_first()
        self.err.print("[yellow]cancelling… (press Ctrl-C again to quit at once)[/yellow]")

    def _add(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            loop.add_signal_handler(signal.SIGINT, self._handle)
        except (NotImplementedError, RuntimeError, ValueError):  # no signals here (Windows, thread)
            return
        self._loop = loop

    def _remove(self) -> None:
        if self._loop is not None:
            self._loop.remove_signal_handler(signal.SIGINT)  # back to KeyboardInterrupt
            self._loop = None

    def __enter__(self) -> InterruptGuard:
        self._add()
        return self

    def __exit__(self, *exc: object) -> None:
        self._remove()

    @contextlib.contextmanager
    def suspended(self) -> Iterator[None]:
        """Plain KeyboardInterrupt semantics for the duration (used around prompts)."""
        active = self._loop is not None
        self._remove()
        try:
            yield
        finally:
            if active:
                self._add()

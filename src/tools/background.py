"""Sync tools on their own threads, and the calls we stopped waiting for.

Python cannot stop a thread. When a sync tool outlives its timeout, or the cancel of its run,
it keeps running and its effect may still happen. So instead of pretending it failed:

- each sync call runs on a daemon thread (a hung tool never blocks the process from exiting),
  and the event loop learns its result through a future. Threads are kept for the next call
  (`_Threads`): `Thread.start` waits until the new thread runs, which blocked the event loop
  for a millisecond or more per call under load; a call never waits for a busy thread;
- a call we stop waiting for is recorded here, per message, with its outcome (`timed_out`,
  `abandoned`) and, once the thread ends, its late result (and a log line saying so);
- by default a call runs at most once: an identical call (same tool, same arguments) in the
  same message is not run again while the first one's effect is unknown, and gets the late
  result once it is known. Tools declared `idempotent=True` are simply run again;
- calls abandoned by a cancel are handed to whoever records the run's end
  (`take_abandoned`), so the log can say `tool_complete … abandoned` instead of nothing.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import queue
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .base import ToolResult

log = logging.getLogger("artifactflow.tools")

# Enough to cover every message in flight; the oldest records go first.
MAX_RECORDS = 1000


def call_key(tool: str, args: dict[str, Any]) -> str:
    """What makes two calls 'the same call': the tool and its validated arguments."""
    return tool + ":" + json.dumps(args, sort_keys=True, default=str)


class _Threads:
    """Daemon threads that run one job at a time and wait for the next: a job goes to an idle
    thread, or to a new one when all are busy (a hung tool holds its thread, never another
    call). At most `IDLE` threads wait; more end when their job is done."""

    IDLE = 16

    def __init__(self) -> None:
        self._idle: list[queue.SimpleQueue[tuple[Callable[[], None], str]]] = []
        self._lock = threading.Lock()

    def submit(self, job: Callable[[], None], name: str) -> None:
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name=name, daemon=True).start()
        inbox.put((job, name))

    def _serve(self, inbox: queue.SimpleQueue[tuple[Callable[[], None], str]]) -> None:
        while True:
            job, name = inbox.get()
            threading.current_thread().name = name
            job()
            with self._lock:
                if len(self._idle) >= self.IDLE:
                    return
                self._idle.append(inbox)


_THREADS = _Threads()


class ThreadCall:
    """One sync call on a daemon thread; `future` (on the loop) gets its result."""

    def __init__(self, func: Callable[..., Any], kwargs: dict[str, Any], name: str) -> None:
        self.loop = asyncio.get_running_loop()
        self.future: asyncio.Future[Any] = self.loop.create_future()
        # Nobody may be waiting when the result arrives (we stopped waiting): never warn.
        self.future.add_done_callback(lambda f: f.cancelled() or f.exception())
        self._on_done: list[Callable[[asyncio.Future[Any]], None]] = []
        context = contextvars.copy_context()

        def target() -> None:
            try:
                outcome: tuple[bool, Any] = (True, context.run(func, **kwargs))
            except BaseException as exc:  # reported to the loop, never lost in the thread
                outcome = (False, exc)
            try:
                self.loop.call_soon_threadsafe(self._settle, outcome)
            except RuntimeError:  # the loop is closed: nobody is left to tell
                pass

        _THREADS.submit(target, f"artifactflow-tool-{name}")

    def _settle(self, outcome: tuple[bool, Any]) -> None:
        ok, value = outcome
        if not self.future.done():
            if ok:
                self.future.set_result(value)
            else:
                self.future.set_exception(value)

    @property
    def done(self) -> bool:
        return self.future.done()


@dataclass
class Stray:
    """A call still running (or finished late) after we stopped waiting for it."""

    message_id: str
    tool_call_id: str
    tool: str
    key: str
    outcome: str  # timed_out | abandoned
    result: ToolResult  # what was recorded when we stopped waiting
    since: float = field(default_factory=time.monotonic)
    late: ToolResult | None = None  # the result, once the thread ended
    taken: bool = False  # handed to the run's end record (abandoned calls only)

    def record(self) -> dict[str, Any]:
        return {
            "tool_call_id": self.tool_call_id,
            "tool": self.tool,
            "outcome": self.outcome,
            "may_still_take_effect": self.late is None,
            "result": self.result.to_dict(),
        }


class BackgroundCalls:
    """Per tool registry (so per process): the stray calls of every message."""

    def __init__(self) -> None:
        self._strays: OrderedDict[tuple[str, str], Stray] = OrderedDict()

    def note(self, stray: Stray, call: ThreadCall, to_result: Callable[[Any], ToolResult]) -> None:
        self._strays[(stray.message_id, stray.key)] = stray
        while len(self._strays) > MAX_RECORDS:
            self._strays.popitem(last=False)

        def finished(future: asyncio.Future[Any]) -> None:
            if future.cancelled():
                return
            exc = future.exception()
            stray.late = (
                ToolResult.fail(f"{type(exc).__name__}: {exc}") if exc else to_result(future.result())
            )
            log.warning(
                "tool '%s' (call %s of message %s) finished %.1f s after it %s; %s",
                stray.tool, stray.tool_call_id, stray.message_id, time.monotonic() - stray.since,
                "timed out" if stray.outcome == "timed_out" else "was abandoned by a cancel",
                "its effect happened" if stray.late.success else f"it failed: {stray.late.error}",
            )

        call.future.add_done_callback(finished)

    def find(self, message_id: str, key: str) -> Stray | None:
        return self._strays.get((message_id, key))

    def take_abandoned(self, message_id: str) -> list[dict[str, Any]]:
        """Calls of `message_id` abandoned by a cancel and not yet recorded (each once), as
        `tool_complete` data: tool_call_id, tool, outcome, may_still_take_effect, result."""
        out = []
        for stray in self._strays.values():
            if stray.message_id == message_id and stray.outcome == "abandoned" and not stray.taken:
                stray.taken = True
                out.append(stray.record())
        return out

    def repeat_result(self, stray: Stray) -> ToolResult:
        """What an identical call gets instead of running a second time."""
        ago = time.monotonic() - stray.since
        if stray.late is None:
            return ToolResult.unknown(
                f"not run again: an identical call of '{stray.tool}' in this message "
                f"{'timed out' if stray.outcome == 'timed_out' else 'was abandoned'} "
                f"{ago:.0f} s ago and is still running; its effect is still unknown. Check "
                "whether it happened before asking for it again.",
                "not_repeated",
            )
        late = stray.late
        note = (
            f"not run again: an identical call of '{stray.tool}' in this message did not "
            "finish in time but completed afterwards"
        )
        if late.success:
            data = late.data if isinstance(late.data, str) else json.dumps(late.data, default=str)
            return ToolResult(success=True, data=f"{note}; its result: {data}",
                              metadata={"outcome": "not_repeated"})
        return ToolResult.fail(f"{note}, with an error: {late.error}", outcome="not_repeated")

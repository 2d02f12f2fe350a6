"""Branch races: which path wins, in this process.

A branch runs its paths as parallel `Send` tasks; the first path to succeed wins. The race
lives on the run's `RunContext` (one run segment, one process): the winner sets `won`, and the
other paths' running steps watch it and stop. Across a restart the shared state decides
instead: the merge keeps the earliest success and ignores later arrivals.
"""

from __future__ import annotations

import asyncio

from langgraph.runtime import Runtime

from ..core.context import RunContext


class Race:
    """The paths of one branch racing in this process (lives as long as the run segment).

    `won` is set by the first path to succeed: paths still running are cancelled. A path that
    pauses for permission first waits until the race is decided: if another path wins, its
    pause is dropped (it lost; nobody needs to approve its tool); if every other path has
    finished or paused too, the pause stands.
    """

    def __init__(self) -> None:
        self.won = asyncio.Event()
        self.running = 0
        self.changed = asyncio.Event()

    def enter(self) -> None:
        self.running += 1

    def leave(self) -> None:
        self.running -= 1
        self.changed.set()

    async def decided_by_another(self) -> bool:
        """After this path paused: True once another path won, False once none is running."""
        while not self.won.is_set() and self.running > 0:
            self.changed.clear()
            waiters = {asyncio.ensure_future(self.won.wait()), asyncio.ensure_future(self.changed.wait())}
            try:
                await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for waiter in waiters:
                    waiter.cancel()
        return self.won.is_set()


def race_for(runtime: Runtime[RunContext], group: str) -> Race:
    """The race of branch `group` in this run segment (kept on the run's context)."""
    registry = runtime.context.__dict__.setdefault("_workflow_races", {})
    return registry.setdefault(group, Race())

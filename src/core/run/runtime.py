"""What every phase of a run shares: the process's services and checkpoint saver, the graph
(compiled once), the runs in flight in this process, and the lease arithmetic.

Ownership of a message is a run token plus a lease in the app store: the owner renews the
lease while it runs (`maintenance.keep_lease`); a `running` message whose lease expired
belongs to a dead process and may be recovered (`resume.recover`). Lease arithmetic reads
`clock` (default `time.time`), so tests expire a lease by moving a clock, not by sleeping.
`bus` carries live events and control requests between workers (`bus.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...errors import NotFoundError
from ..runs import RunHandle
from ..store.rows import MessageRow
from .bus import NullBus

if TYPE_CHECKING:
    from ..checkpoints import CheckpointStore
    from ..context import Services
    from ..store.repository import AppStore


@dataclass
class Runtime:
    services: Services
    checkpoints: CheckpointStore
    graph: Any
    runs: dict[str, RunHandle] = field(default_factory=dict)
    workflow_graphs: dict[str, Any] = field(default_factory=dict)  # compiled, by file digest
    bus: Any = field(default_factory=NullBus)
    clock: Callable[[], float] = time.time

    @property
    def store(self) -> AppStore:
        return self.services.store

    def lease(self) -> float:
        """When a lease taken now expires."""
        return self.clock() + self.services.settings.run.lease_seconds

    def lease_expired(self, message: MessageRow) -> bool:
        expires = message.get("lease_expires_at")
        return expires is not None and expires < self.clock()

    def running_here(self, message_id: str) -> bool:
        handle = self.runs.get(message_id)
        return handle is not None and handle.task is not None and not handle.task.done()

    async def graph_for(self, message: MessageRow) -> Any:
        """The graph `message` runs on: the chat graph, or the workflow it was started with.

        `af_workflow_runs` keeps the workflow file's text, so a resume in any process runs the
        graph the run paused in. The workflow engine builds on core; it is imported only here,
        for a workflow message, so chat-only programs never load it."""
        row = await self.store.get_workflow_run(message["id"])
        if row is None:
            return self.graph
        from ...workflows.runner import graph_for_run

        return graph_for_run(self, row)

    async def pending_calls(self, message: MessageRow, graph: Any, config: dict[str, Any]) -> list[dict[str, Any]]:
        """The tool calls a paused run waits on, as the agent made them (hooks read their
        rounds): in the chat graph's state, or in a workflow's nested steps."""
        if graph is self.graph:
            return (await graph.aget_state(config)).values.get("pending_tool_calls") or []
        from ...workflows.runner import pending_calls

        return await pending_calls(self, message["thread_id"])

    async def message(self, message_id: str) -> MessageRow:
        message = await self.store.get_message(message_id)
        if message is None:
            raise NotFoundError(f"message {message_id} not found")
        return message

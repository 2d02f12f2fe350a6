"""What every phase of a run shares: the process's services and checkpoint saver, the chat
graph (compiled once), the graphs registered from above, the runs in flight in this process,
and the lease arithmetic.

Ownership of a message is a run token plus a lease in the app store: the owner renews the
lease while it runs (`maintenance.keep_lease`); a `running` message whose lease expired
belongs to a dead process and may be recovered (`resume.recover`). Lease arithmetic reads
`clock` (default `time.time`), so tests expire a lease by moving a clock, not by sleeping.
`bus` carries live events and control requests between workers (`bus.py`).

The engine runs any compiled graph a `GraphProvider` hands it: the workflow engine (a layer
above) registers one, so a workflow message resumes on its own graph in any process, while
`core` never imports `workflows`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ...errors import ArtifactFlowError, NotFoundError
from ..store.rows import MessageRow
from .bus import NullBus
from .live import LiveRun

if TYPE_CHECKING:
    from ..checkpoints import CheckpointStore
    from ..context import Services
    from ..store.repository import AppStore
    from .endings import Spare
    from .upkeep import QuietUpkeep


class GraphProvider(Protocol):
    """Hands the engine the graph a stored message runs on, when it is not the chat graph."""

    async def graph_for(self, rt: Runtime, message: MessageRow) -> Any | None:
        """The compiled graph `message` runs on, or None when the message is not this
        provider's (the next provider, or the chat graph, is asked)."""
        ...

    async def pending_calls(self, rt: Runtime, message: MessageRow, graph: Any) -> list[dict[str, Any]] | None:
        """The tool calls a paused run of `graph` waits on, or None when `graph` is not one
        of this provider's."""
        ...


class ServicesProvider(Protocol):
    """Hands the engine the services one stored message runs with, when they are not the
    process's own: a run started with its own agent configuration (an assistant's model,
    prompt, tools, permissions) keeps it across a pause and a resume in any process."""

    async def services_for(self, rt: Runtime, message: MessageRow) -> Services | None:
        """The services `message` runs with, or None for the process's own."""
        ...


@dataclass
class Runtime:
    services: Services
    checkpoints: CheckpointStore
    graph: Any
    runs: dict[str, LiveRun] = field(default_factory=dict)
    graph_providers: list[GraphProvider] = field(default_factory=list)
    bus: Any = field(default_factory=NullBus)
    clock: Callable[[], float] = time.time
    upkeep: QuietUpkeep | None = None  # storage upkeep at quiet moments, set by the engine
    spare: Spare | None = None  # space and markers for endings the store refused (`endings.py`)
    services_providers: list[ServicesProvider] = field(default_factory=list)

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

    def register(self, provider: GraphProvider) -> None:
        """Let `provider` hand out graphs for the messages it started (e.g. workflows)."""
        if provider not in self.graph_providers:
            self.graph_providers.append(provider)

    async def graph_for(self, message: MessageRow) -> Any:
        """The graph `message` runs on: a registered provider's, or the chat graph.

        A workflow message with no provider registered is refused rather than run on the
        chat graph (its state would not fit)."""
        for provider in self.graph_providers:
            graph = await provider.graph_for(self, message)
            if graph is not None:
                return graph
        if not self.graph_providers and await self.store.get_workflow_run(message["id"]) is not None:
            raise ArtifactFlowError(
                f"message {message['id']} is a workflow run, and this engine was opened without "
                "the workflow engine (open it through artifactflow.Client)"
            )
        return self.graph

    async def services_for(self, message: MessageRow) -> Services:
        """The services `message` runs with: a provider's (its own agent configuration), else
        the process's. No read at all when no provider is registered."""
        for provider in self.services_providers:
            services = await provider.services_for(self, message)
            if services is not None:
                return services
        return self.services

    async def pending_calls(self, message: MessageRow, graph: Any, config: dict[str, Any]) -> list[dict[str, Any]]:
        """The tool calls a paused run waits on, as the agent made them (hooks read their
        rounds): in the chat graph's state, or as the graph's provider finds them."""
        if graph is not self.graph:
            for provider in self.graph_providers:
                calls = await provider.pending_calls(self, message, graph)
                if calls is not None:
                    return calls
        return (await graph.aget_state(config)).values.get("pending_tool_calls") or []

    async def message(self, message_id: str) -> MessageRow:
        message = await self.store.get_message(message_id)
        if message is None:
            raise NotFoundError(f"message {message_id} not found")
        return message

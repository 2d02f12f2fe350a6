"""The facade's nouns: `client.runs`, `client.conversations`, `client.artifacts`,
`client.workflows`, `client.admin`. Each is a thin view over the engine (`core/engine.py`) and
the stored data (`core/run/data.py`); `user_id`, where taken, restricts a lookup to that user's
resources (another user's answers `NotFoundError` exactly like a missing one).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..artifacts.records import ArtifactSummary, ArtifactView, VersionSummary
from ..core.run import follow, maintenance, retry, workers
from ..core.run.maintenance import GcReport
from ..errors import UserError
from ..events.envelope import Event
from ..replay.export import export_session
from ..tools.registry import ToolDescription
from ..version import __version__
from ..workflows import launch
from .requests import Request, Resume, Retry, Task, WorkflowTask
from .run import Run

if TYPE_CHECKING:
    from ..core.checkpoints import CheckpointStore
    from ..core.context import Services
    from ..core.conversations import ConversationTree
    from ..core.engine import Engine
    from ..core.run.data import StoredData
    from ..core.store.repository import AppStore
    from ..core.store.rows import ConversationRow, LineageRow, MessageRow, WorkflowRunSummary
    from ..replay.session import Session
    from ..workflows.spec import WorkflowSpec


class _View:
    def __init__(self, engine: Engine, data: StoredData) -> None:
        self._engine = engine
        self._data = data


class Runs(_View):
    """Start, reattach to, read, cancel and export runs."""

    async def start(self, request: str | Request, *, user_id: str | None = None) -> Run:
        """Start what `request` asks (a string is a `Task`) and return its `Run`."""
        engine, rt = self._engine, self._engine.rt
        if isinstance(request, str):
            request = Task(request)
        if isinstance(request, Task):
            ids = await engine.start(
                request.content, request.conversation_id, request.parent_message_id, user_id=user_id
            )
        elif isinstance(request, Retry):
            ids = await retry.retry(rt, engine.conversations, request.message_id, user_id=user_id)
        elif isinstance(request, WorkflowTask):
            ids = await launch.start_workflow(
                rt, engine.conversations, request.name,
                None if request.input is None else dict(request.input),
                conversation_id=request.conversation_id, user_id=user_id,
            )
        elif isinstance(request, Resume):
            message = await self._data.get_message(request.message_id, user_id=user_id)
            run = Run(engine, message, after_event_id=0, started=False)
            return await run.respond(request.decisions)
        else:
            raise UserError(f"runs.start takes a str, Task, Resume, Retry or WorkflowTask, not {type(request).__name__}")
        message = {"id": ids["message_id"], "conversation_id": ids["conversation_id"], "thread_id": ids["thread_id"],
                   "workflow": ids["workflow"] if isinstance(request, WorkflowTask) else None}
        return Run(engine, message, after_event_id=0, started=True)

    async def get(self, message_id: str, after_event_id: int = 0, *, user_id: str | None = None) -> Run:
        """A handle on an existing message's run (in this process or any other), reading its
        events after `after_event_id`; `NotFoundError` if there is no such message."""
        message = await self._data.get_message(message_id, user_id=user_id)
        return Run(self._engine, message, after_event_id=after_event_id, started=False)

    async def events(self, message_id: str, after_event_id: int | None = None) -> list[Event]:
        """The message's stored events after `after_event_id` (no waiting)."""
        return await follow.events(self._engine.rt, message_id, after_event_id)

    async def last_event_id(self, message_id: str) -> int:
        """The id of the message's last stored event (0 when none)."""
        return await self._data.last_event_id(message_id)

    async def cancel(self, message_id: str) -> bool:
        """As `Run.cancel`, by id."""
        return await self._engine.cancel(message_id)

    async def pending(self) -> list[MessageRow]:
        """Messages paused for a permission decision."""
        return await self._data.pending()

    async def export(self, message_id: str, path: str | Path | None = None, *, full_messages: bool = False) -> Session:
        """The recorded run of `message_id` as a replayable `Session` (see `replay/`); with
        `path`, also written there as a session file."""
        engine = self._engine
        session = await export_session(engine.store, engine.conversations, message_id, version=__version__)
        if path is not None:
            await asyncio.to_thread(session.write, path, full_messages=full_messages)
        return session


class Conversations(_View):
    """Conversations and their message trees."""

    async def list(self, *, user_id: str | None = None, limit: int = 20, offset: int = 0) -> list[ConversationRow]:
        """Conversations, most recently active first."""
        return await self._data.list_conversations(user_id=user_id, limit=limit, offset=offset)

    async def count(self, *, user_id: str | None = None) -> int:
        return await self._data.count_conversations(user_id=user_id)

    async def get(self, conversation_id: str, *, user_id: str | None = None) -> ConversationRow:
        """The conversation record (`NotFoundError` if missing)."""
        return await self._data.get_conversation(conversation_id, user_id=user_id)

    async def tree(self, conversation_id: str, *, user_id: str | None = None) -> ConversationTree:
        """The conversation with its messages as a tree; `active` marks the current branch."""
        return await self._data.conversation_tree(conversation_id, user_id=user_id)

    async def messages(self, conversation_id: str, *, user_id: str | None = None) -> builtins.list[MessageRow]:
        """Every message of the conversation, oldest first."""
        return await self._data.list_messages(conversation_id, user_id=user_id)

    async def message(self, message_id: str, *, user_id: str | None = None) -> MessageRow:
        """One message record (`NotFoundError` if missing)."""
        return await self._data.get_message(message_id, user_id=user_id)

    async def delete(self, conversation_id: str, *, user_id: str | None = None) -> None:
        """Cancel its runs (wherever they run), drop its checkpoints, then its rows."""
        await self._data.delete_conversation(conversation_id, user_id=user_id)


class Artifacts(_View):
    """A conversation's versioned artifacts (read side)."""

    async def list(self, conversation_id: str) -> list[ArtifactSummary]:
        return await self._data.list_artifacts(conversation_id)

    async def get(self, conversation_id: str, artifact_id: str, version: int | None = None) -> ArtifactView:
        return await self._data.get_artifact(conversation_id, artifact_id, version)

    async def versions(self, conversation_id: str, artifact_id: str) -> builtins.list[VersionSummary]:
        return await self._data.artifact_versions(conversation_id, artifact_id)

    async def diff(
        self, conversation_id: str, artifact_id: str, from_version: int, to_version: int | None = None
    ) -> str:
        return await self._data.artifact_diff(conversation_id, artifact_id, from_version, to_version)

    async def export(self, conversation_id: str, artifact_id: str, version: int | None = None) -> str:
        """The artifact as a standalone Markdown document."""
        return await self._data.export_artifact(conversation_id, artifact_id, version)

    async def export_to(
        self, path: str | Path, conversation_id: str, artifact_id: str, version: int | None = None
    ) -> Path:
        return await self._data.export_artifact_to(path, conversation_id, artifact_id, version)


class Workflows(_View):
    """Workflow files and their runs (start one with `runs.start(WorkflowTask(...))`)."""

    def list(self) -> list[dict[str, Any]]:
        """Every workflow file with its name, description and problems (valid ones have none)."""
        return launch.list_workflows(self._engine.services)

    def get(self, name: str) -> WorkflowSpec:
        """The validated workflow called `name` (`NotFoundError` if there is none)."""
        return launch.find_workflow(self._engine.services, name)

    async def runs(
        self, name: str | None = None, *, user_id: str | None = None, limit: int = 20, offset: int = 0
    ) -> builtins.list[WorkflowRunSummary]:
        """Workflow runs, newest first, with their message's status."""
        return await self._engine.store.list_workflow_runs(name, user_id=user_id, limit=limit, offset=offset)

    async def lineage(self, message_id: str) -> builtins.list[LineageRow]:
        """A workflow run's node executions with their parents, inputs and outputs."""
        return await launch.lineage_of(self._engine.rt, message_id)


class Admin(_View):
    """Operating the engine: upkeep, tokens, limits, and the internals tests reach for."""

    async def gc(self, retention_hours: float | None = None, *, dry_run: bool = False) -> GcReport:
        """Delete checkpoints no run needs any more (see `core/run/maintenance.py`)."""
        return await maintenance.gc(self._engine.rt, retention_hours, dry_run=dry_run)

    async def recover(self) -> list[str]:
        """Continue here every run whose owner died (lease expired); returns their ids."""
        return await workers.recover_dead_runs(self._engine.rt)

    async def create_token(self, user_name: str) -> tuple[str, str]:
        """Create (or reuse) the user and a new API token; returns (user_id, token)."""
        return await self._data.create_token(user_name)

    async def user_for_token(self, token: str) -> str | None:
        return await self._data.user_for_token(token)

    def run_slot(self, limit: int | None) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold while starting a run: `RunLimitReached` when `limit` runs are live in the
        database, across all workers (`run.max_runs_per_database`)."""
        return workers.database_slot(self._engine.rt, limit)

    def tools(self) -> builtins.list[ToolDescription]:
        """Every tool the agents can be given, by name: its `source` (builtin, plugin,
        langchain, `mcp:SERVER`), effective `permission`, `timeout`, `description`, JSON
        `schema`, and the `agents` whose files name it."""
        services = self._engine.services
        rows = services.tools.describe()
        for row in rows:
            row["agents"] = sorted(a.name for a in services.agents.values() if row["name"] in a.tools)
        return rows

    def active_run_count(self) -> int:
        """Runs in flight in this process."""
        return sum(1 for handle in self._engine.rt.runs.values() if not handle.done)

    async def wait(self, message_id: str) -> None:
        """Wait until the message's run segment in this process (if any) has finished."""
        await self._engine.wait(message_id)

    @property
    def clock(self) -> Callable[[], float]:
        """The clock leases are measured with (`time.time`); tests move it instead of sleeping."""
        return self._engine.rt.clock

    @clock.setter
    def clock(self, value: Callable[[], float]) -> None:
        self._engine.rt.clock = value

    @property
    def store(self) -> AppStore:
        return self._engine.store

    @property
    def services(self) -> Services:
        return self._engine.services

    @property
    def checkpoints(self) -> CheckpointStore:
        return self._engine.checkpoints

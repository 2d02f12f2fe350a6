"""The facade's nouns: `client.runs`, `client.conversations`, `client.artifacts`,
`client.workflows`, `client.admin`. Each is a thin view over the engine (`core/engine.py`) and
the stored data (`core/run/data.py`), extending the read-only nouns of `stored.py` (what a
`Reader` offers); `user_id`, where taken, restricts a lookup to that user's resources (another
user's answers `NotFoundError` exactly like a missing one).
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.run import maintenance, retry, workers
from ..core.run.maintenance import GcReport
from ..errors import NotFoundError, UserError
from ..replay.export import export_session
from ..tools.registry import ToolDescription
from ..version import __version__
from ..workflows import launch
from . import assistant_rows
from .agent_config import AgentConfig, RunConfigs, merged, run_services
from .requests import Request, Resume, Retry, Task, WorkflowTask
from .run import Run
from .stored import StoredConversations, StoredRuns, StoredView, StoredWorkflows

if TYPE_CHECKING:
    from ..core.checkpoints import CheckpointStore
    from ..core.context import Services
    from ..core.engine import Engine
    from ..core.run.data import StoredData
    from ..core.store.repository import AppStore
    from ..replay.session import Session
    from ..workflows.spec import WorkflowSpec


class _View(StoredView):
    def __init__(self, engine: Engine, data: StoredData) -> None:
        super().__init__(data)
        self._engine = engine
        self._data: StoredData = data


class Runs(_View, StoredRuns):
    """Start, reattach to, read, cancel and export runs."""

    async def start(self, request: str | Request, *, user_id: str | None = None) -> Run:
        """Start what `request` asks (a string is a `Task`) and return its `Run`."""
        engine, rt = self._engine, self._engine.rt
        if isinstance(request, str):
            request = Task(request)
        if isinstance(request, Task):
            config = await self._agent_config(request, user_id)
            services = None if config is None else run_services(engine.services, config)
            ids = await engine.start(
                request.content, request.conversation_id, request.parent_message_id,
                user_id=user_id, project=request.project, services=services,
                message_id=request.message_id,
            )
            if config is not None:  # before any pause: a resume anywhere finds it
                await RunConfigs(engine.store).save(ids["message_id"], config)
        elif isinstance(request, Retry):  # with the original's agent configuration, if any
            configs = RunConfigs(engine.store)
            config = await configs.load(request.message_id)
            services = None if config is None else run_services(engine.services, config)
            ids = await retry.retry(
                rt, engine.conversations, request.message_id, user_id=user_id, services=services
            )
            if config is not None:
                await configs.save(ids["message_id"], config)
        elif isinstance(request, WorkflowTask):
            ids = await launch.start_workflow(
                rt,
                engine.conversations,
                request.name,
                None if request.input is None else dict(request.input),
                conversation_id=request.conversation_id,
                user_id=user_id,
            )
        elif isinstance(request, Resume):
            message = await self._data.get_message(request.message_id, user_id=user_id)
            run = Run(engine, message, after_event_id=0, started=False)
            return await run.respond(request.decisions)
        else:
            raise UserError(
                f"runs.start takes a str, Task, Resume, Retry or WorkflowTask, not {type(request).__name__}"
            )
        message = {
            "id": ids["message_id"],
            "conversation_id": ids["conversation_id"],
            "thread_id": ids["thread_id"],
            "workflow": ids["workflow"] if isinstance(request, WorkflowTask) else None,
        }
        return Run(engine, message, after_event_id=0, started=True)

    async def _agent_config(self, task: Task, user_id: str | None) -> AgentConfig | None:
        """The task's agent configuration: its assistant's, then its own `config`; None when
        it has neither (the agent files as they are)."""
        if task.assistant is None and not task.config:
            return None
        base = None
        if task.assistant is not None:
            row = await assistant_rows.get(self._engine.store, task.assistant)
            row = row if row is not None and row.visible_to(user_id) else None  # another's: none
            base = row.agent_config.set() if row is not None else None
            if row is None and task.assistant != self._engine.services.lead.name:
                raise NotFoundError(f"assistant {task.assistant} not found")
        return merged(base, task.config)

    async def get(
        self, message_id: str, after_event_id: int = 0, *, user_id: str | None = None
    ) -> Run:
        """A handle on an existing message's run (in this process or any other), reading its
        events after `after_event_id`; `NotFoundError` if there is no such message."""
        message = await self._data.get_message(message_id, user_id=user_id)
        return Run(self._engine, message, after_event_id=after_event_id, started=False)

    async def cancel(self, message_id: str) -> bool:
        """As `Run.cancel`, by id."""
        return await self._engine.cancel(message_id)

    async def export(
        self, message_id: str, path: str | Path | None = None, *, full_messages: bool = False
    ) -> Session:
        """The recorded run of `message_id` as a replayable `Session` (see `replay/`); with
        `path`, also written there as a session file."""
        engine = self._engine
        session = await export_session(
            engine.store, engine.conversations, message_id, version=__version__
        )
        if path is not None:
            await asyncio.to_thread(session.write, path, full_messages=full_messages)
        return session


class Conversations(_View, StoredConversations):
    """Conversations and their message trees."""

    async def delete(self, conversation_id: str, *, user_id: str | None = None) -> None:
        """Cancel its runs (wherever they run), drop its checkpoints, then its rows."""
        await self._data.delete_conversation(conversation_id, user_id=user_id)


class Workflows(_View, StoredWorkflows):
    """Workflow files and their runs (start one with `runs.start(WorkflowTask(...))`)."""

    def list(self) -> list[dict[str, Any]]:
        """Every workflow file with its name, description and problems (valid ones have none)."""
        return launch.list_workflows(self._engine.services)

    def get(self, name: str) -> WorkflowSpec:
        """The validated workflow called `name` (`NotFoundError` if there is none)."""
        return launch.find_workflow(self._engine.services, name)


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
            row["agents"] = sorted(
                a.name for a in services.agents.values() if row["name"] in a.tools
            )
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

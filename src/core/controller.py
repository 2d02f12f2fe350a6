"""ExecutionController: the public entry point for runs and their stored data.

A short class that delegates by phase to `core/run/` (see its package docstring):
`runner` starts and drives a run, `resume` continues a paused or orphaned one, `follow`
replays and follows events, `maintenance` keeps leases, metrics and checkpoints, and `data`
(mixed in) reads conversations, messages, tokens and artifacts for the interfaces.

The path of a request: `stream_execute` → `start` → `run.runner.start_message` → `launch` →
`Run.drive` → `graph.astream` (`core/graph.py`) → `tool_execution` (`core/tool_node.py`) →
`ToolRegistry` (`tools/registry.py`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import ArtifactFlowError, UserError
from .checkpoints import CheckpointStore
from .context import Services
from .conversations import ACTIVE_BRANCH, ConversationManager
from .events import Event
from .graph import build_graph
from .run import follow as _follow
from .run import maintenance, resume, retry, runner, workers
from .run.data import StoredData
from .run.ownership import guard_saver
from .run.runtime import Runtime
from .store.rows import LineageRow, WorkflowRunSummary


@dataclass
class ExecutionResult:
    """What `execute()` returns: the outcome of one run segment."""

    conversation_id: str
    message_id: str
    thread_id: str
    status: str  # completed | waiting | failed | cancelled
    response: str | None
    outcome: str | None
    metrics: dict[str, Any] | None
    pending_calls: list[dict[str, Any]] | None
    error: str | None
    events: list[Event]


class ExecutionController(StoredData):
    def __init__(self, services: Services, checkpoints: CheckpointStore) -> None:
        self.services = services
        self.checkpoints = checkpoints
        self.store = services.store
        self.conversations = ConversationManager(services.store)
        self.graph = build_graph(guard_saver(checkpoints.saver))  # a stale run writes none
        self._rt = Runtime(services, checkpoints, self.graph)
        self._runs = self._rt.runs
        self._workers: workers.Workers | None = None

    @property
    def settings(self) -> Any:
        return self.services.settings

    # --- construction ------------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        settings: Any = None,
        *,
        extra_tools: list[Any] | None = None,
        hooks: Sequence[Any] = (),
        **overrides: Any,
    ) -> ExecutionController:
        """Build everything from settings (default: `load_settings()`); `extra_tools` are
        registered next to the built-ins and plugins; `hooks` (objects with hook methods, see
        `artifactflow.hooks`) run after those named in the config's `hooks:`."""
        from .engine import open_engine

        services, checkpoints = await open_engine(settings, extra_tools=extra_tools, hooks=hooks, **overrides)
        controller = cls(services, checkpoints)
        try:
            controller._workers = await workers.start(controller._rt)  # bus, recovery
        except BaseException:
            await controller.aclose()
            raise
        return controller

    async def __aenter__(self) -> ExecutionController:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self, *, cancel_running: bool = True) -> None:
        """Stop background runs (they stay resumable from their checkpoints) and close."""
        for handle in list(self._runs.values()):
            if handle.task and not handle.task.done():
                if cancel_running:
                    await self.cancel(handle.message_id)
                with contextlib.suppress(BaseException):
                    await handle.task
        if self._workers is not None:
            await self._workers.stop()
        await self.services.llm.aclose()
        await self.services.tools.aclose()  # stops MCP servers
        await self.services.hooks.aclose()  # ends open spans, flushes exporters
        await self.checkpoints.close()
        await self.store.close()

    # --- runs --------------------------------------------------------------------------------

    async def start(
        self,
        content: str,
        conversation_id: str | None = None,
        parent_message_id: Any = ACTIVE_BRANCH,
        *,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Create the message and start its run in the background; return its ids."""
        return await runner.start_message(
            self._rt, self.conversations, content, conversation_id, parent_message_id, user_id=user_id
        )

    async def retry(self, message_id: str, *, user_id: str | None = None) -> dict[str, Any]:
        """Run a failed or cancelled message again as a new sibling (same conversation, parent
        and content) and return its ids, as `start` does; follow it with `follow(message_id,
        from_start=True)`. A completed, paused or running message is a `ResumeConflictError`."""
        return await retry.retry(self._rt, self.conversations, message_id, user_id=user_id)

    async def stream_execute(
        self,
        content: str | None = None,
        conversation_id: str | None = None,
        parent_message_id: Any = ACTIVE_BRANCH,
        *,
        message_id: str | None = None,
        resume_data: Any = None,
        after_event_id: int | None = None,
        user_id: str | None = None,
        cancel_on_exit: bool = True,
    ) -> AsyncIterator[Event]:
        """Run a new message, resume a paused one (`message_id` + `resume_data`), or attach to
        a running or finished message (`message_id`, optionally `after_event_id`).

        Leaving the iteration early cancels a run this call started (`cancel_on_exit`).
        """
        started = False
        if message_id is not None and resume_data is not None:
            await self.resume_start(message_id, resume_data)
            started = True
            after = after_event_id if after_event_id is not None else await self.resume_cursor(message_id)
        elif message_id is not None:
            after = after_event_id or 0
        else:
            if content is None:
                raise UserError("stream_execute needs content (or a message_id to attach to)")
            ids = await self.start(content, conversation_id, parent_message_id, user_id=user_id)
            message_id = ids["message_id"]
            started = True
            after = 0
        finished = False
        try:
            async for event in self.follow(message_id, after_event_id=after, from_start=started):
                yield event
            finished = True
        finally:
            if started and cancel_on_exit and not finished:
                await self.cancel(message_id)

    async def resume(self, message_id: str, resume_data: Any) -> AsyncIterator[Event]:
        """Continue a paused message; yields the events of the resumed segment."""
        async for event in self.stream_execute(message_id=message_id, resume_data=resume_data):
            yield event

    async def execute(self, content: str, conversation_id: str | None = None, **kwargs: Any) -> ExecutionResult:
        """Run to the end (or to a pause) and return the final response with metrics."""
        events = [e async for e in self.stream_execute(content, conversation_id, **kwargs)]
        return await self._result(events)

    async def execute_resume(self, message_id: str, resume_data: Any) -> ExecutionResult:
        events = [e async for e in self.resume(message_id, resume_data)]
        return await self._result(events, message_id=message_id)

    async def resume_start(self, message_id: str, resume_data: Any) -> None:
        """Validate decisions, claim the paused message, and start the resumed run (or recover
        a run whose process died)."""
        await resume.resume_start(self._rt, message_id, resume_data)

    async def resume_cursor(self, message_id: str) -> int:
        """Where a resumed stream starts: just after the pause's permission_request."""
        return await resume.resume_cursor(self._rt, message_id)

    async def cancel(self, message_id: str) -> bool:
        """Stop a running message at the next safe point, or close a paused one. A run owned
        by another worker (PostgreSQL) is asked to stop, and this waits until it has. False if
        the message is neither running nor paused."""
        if await workers.cancel_elsewhere(self._rt, message_id):
            return True
        return await runner.cancel(self._rt, message_id)

    def run_slot(self, limit: int | None) -> contextlib.AbstractAsyncContextManager[None]:
        """Hold while starting a run: `RunLimitReached` when `limit` runs are live in the
        database, across all workers (`run.max_runs_per_database`)."""
        return workers.database_slot(self._rt, limit)

    async def wait(self, message_id: str) -> None:
        """Wait until the message's run in this process (if any) has finished."""
        handle = self._runs.get(message_id)
        if handle and handle.task:
            with contextlib.suppress(BaseException):
                await asyncio.shield(handle.task)

    async def recover(self) -> list[str]:
        """Continue here every run whose owner died (status running, lease expired); returns
        their ids. Workers with `run.recover_on_start` do this at start and every half lease."""
        return await workers.recover_dead_runs(self._rt)

    @property
    def clock(self) -> Callable[[], float]:
        """The clock leases are measured with (`time.time`); tests move it instead of sleeping."""
        return self._rt.clock

    @clock.setter
    def clock(self, value: Callable[[], float]) -> None:
        self._rt.clock = value

    def active_run_count(self) -> int:
        """Runs in flight in this process (new messages and resumes)."""
        return sum(1 for handle in self._runs.values() if not handle.done)

    # --- workflows (artifactflow.workflows, imported on first use) ----------------------------

    async def start_workflow(
        self,
        name: str,
        input: dict[str, Any] | None = None,
        *,
        conversation_id: str | None = None,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Validate the workflow `name` and its input, and start its run in the background."""
        from ..workflows import runner as workflows

        return await workflows.start_workflow(
            self._rt, self.conversations, name, input, conversation_id=conversation_id, user_id=user_id
        )

    def run_workflow(self, name: str, input: dict[str, Any] | None = None, **kwargs: Any) -> AsyncIterator[Event]:
        """Run the workflow `name` (config/workflows/NAME.yaml); yields the same `Event`s as
        `stream_execute`, and leaving early cancels the run (`cancel_on_exit`)."""
        from ..workflows import runner as workflows

        return workflows.run_workflow(self, name, input, **kwargs)

    def workflows(self) -> list[dict[str, Any]]:
        """Every workflow file with its name, description and problems (valid ones have none)."""
        from ..workflows import runner as workflows

        return workflows.list_workflows(self.services)

    def workflow(self, name: str) -> Any:
        """The validated `WorkflowSpec` called `name` (NotFoundError if there is none)."""
        from ..workflows import runner as workflows

        return workflows.find_workflow(self.services, name)

    async def workflow_runs(
        self, name: str | None = None, *, user_id: str | None = None, limit: int = 20, offset: int = 0
    ) -> list[WorkflowRunSummary]:
        """Workflow runs, newest first, with their message's status (only `user_id`'s if given)."""
        return await self.store.list_workflow_runs(name, user_id=user_id, limit=limit, offset=offset)

    async def lineage(self, message_id: str) -> list[LineageRow]:
        """A workflow run's node executions with their parents, inputs and outputs."""
        from ..workflows import runner as workflows

        return await workflows.lineage_of(self._rt, message_id)

    # --- events ------------------------------------------------------------------------------

    async def events(self, message_id: str, after_event_id: int | None = None) -> list[Event]:
        """The message's stored events after `after_event_id`."""
        return await _follow.events(self._rt, message_id, after_event_id)

    def follow(
        self, message_id: str, after_event_id: int = 0, *, from_start: bool = False
    ) -> AsyncIterator[Event]:
        """Replay stored events after `after_event_id`, then follow the live run until its
        final event (`complete`, `error`, `cancelled`, or a `permission_request` that is still
        the latest word). `from_start` also delivers chunks already published by a run this
        caller just started."""
        return _follow.follow(self._rt, message_id, after_event_id, from_start=from_start)

    # --- record and replay ----------------------------------------------------------------------

    async def export_session(
        self, message_id: str, path: Any = None, *, full_messages: bool = False
    ) -> Any:
        """The recorded run of `message_id` as a replayable `Session` (see `replay/`); with
        `path`, also written there as a session file."""
        from ..replay.export import export_session

        session = await export_session(self, message_id)
        if path is not None:
            await asyncio.to_thread(session.write, path, full_messages=full_messages)
        return session

    # --- maintenance -------------------------------------------------------------------------

    async def gc(self, retention_hours: float | None = None, *, dry_run: bool = False) -> dict[str, Any]:
        """Delete checkpoints no run needs any more.

        Finished messages (completed, failed, cancelled) lose theirs at once; paused or
        orphaned-running messages idle for longer than the retention window are abandoned:
        their checkpoints go and they are marked failed. Returns what was (or would be) done.
        """
        return await maintenance.gc(self._rt, retention_hours, dry_run=dry_run)

    async def _result(self, events: list[Event], message_id: str | None = None) -> ExecutionResult:
        if not events and message_id is None:
            raise ArtifactFlowError("the run produced no events")
        mid = message_id or events[0].message_id
        message = await self._rt.message(mid)
        waiting = message.get("waiting_for") or {}
        return ExecutionResult(
            conversation_id=message["conversation_id"],
            message_id=mid,
            thread_id=message["thread_id"],
            status=message["status"],
            response=message.get("response"),
            outcome=message.get("outcome"),
            metrics=message.get("metrics"),
            pending_calls=waiting.get("calls") if message["status"] == "waiting" else None,
            error=message.get("error"),
            events=[e for e in events if e.type != "llm_chunk"],
        )

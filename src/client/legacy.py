"""`ExecutionController`: the pre-`Client` entry point, kept as a thin shim while the CLI, the
HTTP API and the tests move to `Client` (see CHANGELOG.md: every member and what replaces it).

It drives the same engine pieces as `Client` (`core/engine.py`, `core/run/*`), never the
`Client` itself, and goes when its last caller has moved.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from ..core.conversations import ACTIVE_BRANCH
from ..core.engine import Engine
from ..core.permissions import decisions_from_body
from ..core.run import follow as _follow
from ..core.run import maintenance, resume, retry, workers
from ..core.run.data import StoredData
from ..errors import ArtifactFlowError, UserError
from ..events.envelope import Event
from ..events.payloads import MessageStatus
from ..replay.export import export_session
from ..replay.recording import recording
from ..version import __version__
from ..workflows import launch
from .run import RunResult

ExecutionResult = RunResult  # the old name of a segment's result


class ExecutionController(StoredData):
    def __init__(self, engine: Engine) -> None:
        super().__init__(engine.rt, engine.conversations)
        self._engine = engine
        self.services = engine.services
        self.graph = engine.graph
        self._runs = engine.rt.runs

    @property
    def settings(self) -> Any:
        return self.services.settings

    @classmethod
    async def open(
        cls,
        settings: Any = None,
        *,
        extra_tools: list[Any] | None = None,
        hooks: Sequence[Any] = (),
        **overrides: Any,
    ) -> ExecutionController:
        engine = await Engine.open(
            settings, extra_tools=extra_tools, hooks=hooks, model_wrap=recording,
            graphs=[launch.WorkflowGraphs()], **overrides,
        )
        return cls(engine)

    async def __aenter__(self) -> ExecutionController:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self, *, cancel_running: bool = True) -> None:
        await self._engine.aclose(cancel_running=cancel_running)

    # --- runs --------------------------------------------------------------------------------

    async def start(
        self, content: str, conversation_id: str | None = None, parent_message_id: Any = ACTIVE_BRANCH,
        *, user_id: str | None = None,
    ) -> dict[str, Any]:
        return await self._engine.start(content, conversation_id, parent_message_id, user_id=user_id)

    async def retry(self, message_id: str, *, user_id: str | None = None) -> dict[str, Any]:
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
        started = False
        mid: str
        if message_id is not None and resume_data is not None:
            mid = message_id
            await self.resume_start(message_id, resume_data)
            started = True
            after = after_event_id if after_event_id is not None else await self.resume_cursor(message_id)
        elif message_id is not None:
            mid = message_id
            after = after_event_id or 0
        else:
            if content is None:
                raise UserError("stream_execute needs content (or a message_id to attach to)")
            ids = await self.start(content, conversation_id, parent_message_id, user_id=user_id)
            mid = ids["message_id"]
            started = True
            after = 0
        finished = False
        try:
            async for event in self.follow(mid, after_event_id=after, from_start=started):
                yield event
            finished = True
        finally:
            if started and cancel_on_exit and not finished:
                await self.cancel(mid)

    async def resume(self, message_id: str, resume_data: Any) -> AsyncIterator[Event]:
        async for event in self.stream_execute(message_id=message_id, resume_data=resume_data):
            yield event

    async def execute(self, content: str, conversation_id: str | None = None, **kwargs: Any) -> RunResult:
        events = [e async for e in self.stream_execute(content, conversation_id, **kwargs)]
        return await self._result(events)

    async def execute_resume(self, message_id: str, resume_data: Any) -> RunResult:
        events = [e async for e in self.resume(message_id, resume_data)]
        return await self._result(events, message_id=message_id)

    async def resume_start(self, message_id: str, resume_data: Any) -> None:
        await resume.resume_start(self._rt, message_id, decisions_from_body(resume_data))

    async def resume_cursor(self, message_id: str) -> int:
        return await resume.resume_cursor(self._rt, message_id)

    async def cancel(self, message_id: str) -> bool:
        return await self._engine.cancel(message_id)

    def run_slot(self, limit: int | None) -> contextlib.AbstractAsyncContextManager[None]:
        return workers.database_slot(self._rt, limit)

    async def wait(self, message_id: str) -> None:
        await self._engine.wait(message_id)

    async def recover(self) -> list[str]:
        return await workers.recover_dead_runs(self._rt)

    @property
    def clock(self) -> Callable[[], float]:
        return self._rt.clock

    @clock.setter
    def clock(self, value: Callable[[], float]) -> None:
        self._rt.clock = value

    def active_run_count(self) -> int:
        return sum(1 for handle in self._runs.values() if not handle.done)

    # --- workflows ---------------------------------------------------------------------------

    async def start_workflow(
        self, name: str, input: dict[str, Any] | None = None, *,
        conversation_id: str | None = None, user_id: str | None = None,
    ) -> dict[str, Any]:
        return await launch.start_workflow(
            self._rt, self.conversations, name, input, conversation_id=conversation_id, user_id=user_id
        )

    async def run_workflow(
        self, name: str, input: dict[str, Any] | None = None, *,
        conversation_id: str | None = None, user_id: str | None = None, cancel_on_exit: bool = True,
    ) -> AsyncIterator[Event]:
        ids = await self.start_workflow(name, input, conversation_id=conversation_id, user_id=user_id)
        finished = False
        try:
            async for event in self.follow(ids["message_id"], from_start=True):
                yield event
            finished = True
        finally:
            if cancel_on_exit and not finished:
                await self.cancel(ids["message_id"])

    def workflows(self) -> list[dict[str, Any]]:
        return launch.list_workflows(self.services)

    def workflow(self, name: str) -> Any:
        return launch.find_workflow(self.services, name)

    async def workflow_runs(
        self, name: str | None = None, *, user_id: str | None = None, limit: int = 20, offset: int = 0
    ) -> list[dict[str, Any]]:
        return await self.store.list_workflow_runs(name, user_id=user_id, limit=limit, offset=offset)

    async def lineage(self, message_id: str) -> list[dict[str, Any]]:
        return await launch.lineage_of(self._rt, message_id)

    # --- events ------------------------------------------------------------------------------

    async def events(self, message_id: str, after_event_id: int | None = None) -> list[Event]:
        return await _follow.events(self._rt, message_id, after_event_id)

    def follow(
        self, message_id: str, after_event_id: int = 0, *, from_start: bool = False
    ) -> AsyncIterator[Event]:
        return _follow.follow(self._rt, message_id, after_event_id, from_start=from_start)

    # --- record and replay, maintenance -----------------------------------------------------

    async def export_session(self, message_id: str, path: Any = None, *, full_messages: bool = False) -> Any:
        session = await export_session(self.store, self.conversations, message_id, version=__version__)
        if path is not None:
            await asyncio.to_thread(session.write, path, full_messages=full_messages)
        return session

    async def gc(self, retention_hours: float | None = None, *, dry_run: bool = False) -> dict[str, Any]:
        return await maintenance.gc(self._rt, retention_hours, dry_run=dry_run)

    async def _result(self, events: list[Event], message_id: str | None = None) -> RunResult:
        if not events and message_id is None:
            raise ArtifactFlowError("the run produced no events")
        mid = message_id or events[0].message_id
        message = await self._rt.message(mid)
        waiting = message.get("waiting_for") or {}
        return RunResult(
            conversation_id=message["conversation_id"],
            message_id=mid,
            thread_id=message["thread_id"],
            status=MessageStatus(message["status"]),
            response=message.get("response"),
            outcome=message.get("outcome"),
            metrics=message.get("metrics"),
            pending_calls=waiting.get("calls") if message["status"] == "waiting" else None,
            error=message.get("error"),
            events=[e for e in events if e.type != "llm_chunk"],
        )

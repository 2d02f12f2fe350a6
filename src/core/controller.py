"""ExecutionController: starts, resumes, follows and cancels runs; owns the event log.

A run is a background task (independent of any reader) that drives the compiled graph and
turns what the nodes write into `Event`s: each is persisted, then published to readers. The
controller — never a node — emits `permission_request` (from the interrupt payload) and
`permission_result` (from the validated decisions), so nothing repeats when LangGraph re-runs
the interrupted node.

Ownership of a message is a run token plus a lease in the app store. Claiming a paused
message is one conditional UPDATE, so of two racing resumes exactly one wins, across
processes. A run whose process died keeps status `running` with an expired lease; `resume()`
recovers it from its last checkpoint, and the tool ledger keeps tools from running twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from langgraph.types import Command

from ..errors import (
    ArtifactFlowError,
    LLMError,
    NotFoundError,
    ResumeConflictError,
    UserError,
)
from .checkpoints import CheckpointStore
from .context import RunContext, Services
from .conversations import ACTIVE_BRANCH, ConversationManager
from .events import Event
from .graph import build_graph
from .metrics import records_from_events, summarize
from .permissions import normalize_decisions
from .runs import EventSink, RunHandle
from .state import create_initial_state

POLL_SECONDS = 0.25
log = logging.getLogger("artifactflow")


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


class ExecutionController:
    def __init__(self, services: Services, checkpoints: CheckpointStore) -> None:
        self.services = services
        self.checkpoints = checkpoints
        self.store = services.store
        self.conversations = ConversationManager(services.store)
        self.graph = build_graph(checkpoints.saver)
        self._runs: dict[str, RunHandle] = {}
        self._owner = uuid.uuid4().hex[:12]

    # --- construction ------------------------------------------------------------------------

    @classmethod
    async def open(
        cls, settings: Any = None, *, extra_tools: list[Any] | None = None, **overrides: Any
    ) -> ExecutionController:
        """Build everything from settings (default: `load_settings()`); `extra_tools` are
        registered next to the built-ins and plugins."""
        from .engine import open_engine

        services, checkpoints = await open_engine(settings, extra_tools=extra_tools, **overrides)
        return cls(services, checkpoints)

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
        await self.services.llm.aclose()
        await self.checkpoints.close()
        await self.store.close()

    # --- public API ----------------------------------------------------------------------------

    async def start(
        self,
        content: str,
        conversation_id: str | None = None,
        parent_message_id: Any = ACTIVE_BRANCH,
        *,
        user_id: str | None = None,
    ) -> dict[str, Any]:
        """Create the message and start its run in the background; return its ids."""
        if not isinstance(content, str) or not content.strip():
            raise UserError("content must be a non-empty string")
        self._check_credentials()
        if conversation_id is None and isinstance(parent_message_id, str):
            parent = await self.store.get_message(parent_message_id)
            if parent is None:
                raise NotFoundError(f"parent message {parent_message_id} not found")
            conversation_id = parent["conversation_id"]  # a fork names its parent only
        if conversation_id is None:
            conversation = await self.conversations.start_conversation(user_id=user_id)
        else:
            conversation = await self.conversations.get(conversation_id, user_id=user_id)
        run_token = uuid.uuid4().hex
        message = await self.conversations.add_message(
            conversation["id"],
            content,
            parent_id=parent_message_id,
            run_token=run_token,
            lease_expires_at=self._lease(),
        )
        history = await self.conversations.format_conversation_history(message["parent_id"])
        state = create_initial_state(
            content,
            session_id=conversation["id"],
            thread_id=message["thread_id"],
            user_message_id=message["id"],
            conversation_history=history,
        )
        metadata = {
            "parent_message_id": message["parent_id"],
            "content": content,
            "lead_agent": self.services.lead.name,
        }
        self._launch(message, run_token, state, first_events=[("metadata", None, metadata)])
        return {
            "conversation_id": conversation["id"],
            "message_id": message["id"],
            "thread_id": message["thread_id"],
        }

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

    def run_workflow(self, name: str, input: dict[str, Any] | None = None, **kwargs: Any) -> AsyncIterator[Event]:
        """Run the workflow `name` (config/workflows/NAME.yaml); yields the same `Event`s."""
        from ..workflows.runner import run_workflow  # workflows build on core, not the reverse

        return run_workflow(self, name, input, **kwargs)

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

    async def events(self, message_id: str, after_event_id: int | None = None) -> list[Event]:
        message = await self._message(message_id)
        rows = await self.store.events(message_id, after_event_id)
        return [self._row_event(message, row) for row in rows]

    async def follow(
        self, message_id: str, after_event_id: int = 0, *, from_start: bool = False
    ) -> AsyncIterator[Event]:
        """Replay stored events after `after_event_id`, then follow the live run until its
        final event (`complete`, `error`, `cancelled`, or a `permission_request` that is still
        the latest word). `from_start` also delivers chunks already published by a run this
        caller just started."""
        message = await self._message(message_id)
        last = after_event_id
        handle = self._runs.get(message_id)
        start_index = 0 if (from_start or handle is None) else len(handle.events)
        rows = await self.store.events(message_id, after_event_id)
        for index, row in enumerate(rows):
            event = self._row_event(message, row)
            last = event.event_id
            yield event
            if event.is_final:
                more = index < len(rows) - 1
                if event.type == "permission_request" and (more or message_id in self._runs):
                    continue
                return
        handle = self._runs.get(message_id)
        if handle is not None:
            async for event in handle.follow(last, start_index=start_index):
                last = max(last, event.event_id)
                yield event
            return
        # Another process may own the run: poll the log until the message stops running.
        grace = 0
        while True:
            current = await self._message(message_id)
            rows = await self.store.events(message_id, last)
            for index, row in enumerate(rows):
                event = self._row_event(current, row)
                last = event.event_id
                yield event
                if event.is_final and not (
                    event.type == "permission_request" and index < len(rows) - 1
                ):
                    return
            if current["status"] != "running" or self._lease_expired(current):
                # The owner updates the status just before storing the final event: allow
                # the event a moment to land, then stop.
                grace += 1
                if grace > 8:
                    return
            await asyncio.sleep(POLL_SECONDS)

    async def cancel(self, message_id: str) -> bool:
        """Stop a running message at the next safe point. False if it is not running here."""
        handle = self._runs.get(message_id)
        if handle is None or handle.task is None or handle.task.done():
            message = await self.store.get_message(message_id)
            if message is None:
                raise NotFoundError(f"message {message_id} not found")
            if message["status"] == "waiting":
                await self.store.update_message(message_id, status="cancelled", waiting_for=None)
                await self._append(message, "cancelled", None, {"reason": "cancelled while paused"})
                await self._cleanup_checkpoints(message)
                return True
            return False
        handle.cancel_requested = True
        handle.task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.shield(handle.task)
        return True

    async def wait(self, message_id: str) -> None:
        handle = self._runs.get(message_id)
        if handle and handle.task:
            with contextlib.suppress(BaseException):
                await asyncio.shield(handle.task)

    async def gc(self, retention_hours: float | None = None, *, dry_run: bool = False) -> dict[str, Any]:
        """Delete checkpoints no run needs any more.

        Finished messages (completed, failed, cancelled) lose theirs at once; paused or
        orphaned-running messages idle for longer than the retention window are abandoned:
        their checkpoints go and they are marked failed. Returns what was (or would be) done.
        """
        hours = self.services.settings.checkpoints.retention_hours if retention_hours is None else retention_hours
        cutoff = time.time() - hours * 3600
        finished, abandoned = [], []
        for message in await self.store.messages_with_status(["completed", "failed", "cancelled"]):
            if not message["checkpoints_deleted"]:
                finished.append(message)
        for message in await self.store.messages_with_status(["waiting", "running"]):
            if message["id"] in self._runs or message["updated_at"] >= cutoff:
                continue
            if message["status"] == "running" and not self._lease_expired(message):
                continue
            abandoned.append(message)
        if not dry_run:
            for message in finished:
                await self.checkpoints.delete_thread(message["thread_id"])
                await self.store.update_message(message["id"], checkpoints_deleted=True)
            for message in abandoned:
                await self.checkpoints.delete_thread(message["thread_id"])
                await self.store.update_message(
                    message["id"],
                    status="failed",
                    error=f"abandoned: no activity for more than {hours:g} h (removed by gc)",
                    waiting_for=None,
                    checkpoints_deleted=True,
                )
                await self._append(message, "error", None, {"message": "abandoned; checkpoints removed by gc", "kind": "abandoned"})
            await self.store.ledger_clear_finished()
            await self.checkpoints.vacuum()
        return {
            "finished": [m["id"] for m in finished],
            "abandoned": [m["id"] for m in abandoned],
            "dry_run": dry_run,
        }

    def active_run_count(self) -> int:
        """Runs in flight in this process (new messages and resumes)."""
        return sum(1 for handle in self._runs.values() if not handle.done)

    async def pending(self) -> list[dict[str, Any]]:
        return await self.store.messages_with_status(["waiting"])

    # --- resume --------------------------------------------------------------------------------

    async def resume_start(self, message_id: str, resume_data: Any) -> None:
        """Validate decisions, claim the paused message, and start the resumed run."""
        message = await self._message(message_id)
        status = message["status"]
        if status == "running" and message_id not in self._runs and self._lease_expired(message):
            await self._recover(message)
            return
        if status != "waiting":
            detail = {
                "running": "it is running",
                "completed": "it has completed",
                "failed": "it has failed",
                "cancelled": "it was cancelled",
            }.get(status, f"its status is {status}")
            raise ResumeConflictError(
                f"message {message_id} is not waiting for a decision: {detail}", message_id=message_id
            )
        waiting = message["waiting_for"] or {}
        decisions = normalize_decisions(resume_data, waiting.get("calls", []), self.services.tools)
        run_token = uuid.uuid4().hex
        won = await self.store.claim_message(
            message_id,
            expected_status="waiting",
            expected_run_token=message["run_token"],
            run_token=run_token,
            lease_expires_at=self._lease(),
        )
        if not won:
            raise ResumeConflictError(
                f"message {message_id} was already resumed by another request", message_id=message_id
            )
        always = [
            c["tool"] for c in waiting.get("calls", []) if decisions[c["tool_call_id"]]["action"] == "always"
        ]
        if always:
            await self.store.allow_always(message["conversation_id"], always)
        await self.store.update_message(message_id, waiting_for=None)
        results = [
            {
                "tool_call_id": c["tool_call_id"],
                "tool": c["tool"],
                "action": decisions[c["tool_call_id"]]["action"],
                "reason": decisions[c["tool_call_id"]].get("reason"),
                "arguments": decisions[c["tool_call_id"]].get("arguments"),
            }
            for c in waiting.get("calls", [])
        ]
        ids = waiting.get("interrupt_ids") or [waiting["interrupt_id"]]
        command = Command(resume=dict.fromkeys(ids, decisions))
        self._launch(
            message,
            run_token,
            command,
            first_events=[("permission_result", None, {"decisions": results})],
        )

    async def _recover(self, message: dict[str, Any]) -> None:
        """Continue a run whose process died, from its last checkpoint."""
        run_token = uuid.uuid4().hex
        won = await self.store.claim_message(
            message["id"],
            expected_status="running",
            expected_run_token=message["run_token"],
            run_token=run_token,
            lease_expires_at=self._lease(),
            stale_before=time.time(),
        )
        if not won:
            raise ResumeConflictError(f"message {message['id']} is being recovered elsewhere")
        if not await self.checkpoints.has_checkpoint(message["thread_id"]):
            await self.store.update_message(
                message["id"], status="failed", error="the process died before the first checkpoint"
            )
            await self._append(message, "error", None, {"message": "the run's process died before its first checkpoint; nothing to recover", "kind": "recovery"})
            raise ResumeConflictError(f"message {message['id']} cannot be recovered: no checkpoint")
        self._launch(message, run_token, None, first_events=[("metadata", None, {"recovered": True})])

    async def resume_cursor(self, message_id: str) -> int:
        """Where a resumed stream starts: just after the pause's permission_request."""
        rows = await self.store.events(message_id)
        last_request = 0
        for row in rows:
            if row["type"] == "permission_request":
                last_request = row["event_id"]
        return last_request

    # --- the run -------------------------------------------------------------------------------

    def _launch(
        self,
        message: dict[str, Any],
        run_token: str,
        graph_input: Any,
        *,
        first_events: list[tuple[str, str | None, dict[str, Any]]],
    ) -> None:
        if message["id"] in self._runs and not self._runs[message["id"]].done:
            raise ResumeConflictError(f"message {message['id']} is already running in this process")
        handle = RunHandle(message["id"])
        self._runs[message["id"]] = handle
        handle.task = asyncio.create_task(
            self._run(handle, message, run_token, graph_input, first_events),
            name=f"artifactflow-run-{message['id']}",
        )

    async def _run(
        self,
        handle: RunHandle,
        message: dict[str, Any],
        run_token: str,
        graph_input: Any,
        first_events: list[tuple[str, str | None, dict[str, Any]]],
    ) -> None:
        started = time.perf_counter()
        counter = [await self.store.last_event_id(message["id"])]
        context = RunContext(self.services, message["conversation_id"], message["id"])
        config = {
            "configurable": {"thread_id": message["thread_id"]},
            "recursion_limit": self.services.settings.run.recursion_limit,
        }
        partial: list[str] = []
        lease_task = asyncio.create_task(self._keep_lease(message["id"], run_token))
        interrupts: list[Any] = []

        sink = EventSink(self.store, handle)

        async def emit(type_: str, agent: str | None, data: dict[str, Any]) -> Event:
            if type_ != "llm_chunk":
                counter[0] += 1
            event = self._event(message, type_, counter[0], agent, data)
            sink.put(event)
            if event.is_final:
                await sink.flush()
            return event

        try:
            for type_, agent, data in first_events:
                await emit(type_, agent, data)
            graph = await self._graph_for(message)
            async for mode, chunk in graph.astream(
                graph_input,
                config,
                context=context,
                stream_mode=["custom", "updates"],
                durability="sync",
            ):
                if mode == "custom":
                    kind = chunk.get("type")
                    if kind == "llm_chunk" and chunk.get("data", {}).get("invocation") == "lead":
                        partial.append(chunk["data"].get("delta", ""))
                    elif kind == "agent_start" and chunk.get("data", {}).get("invocation") == "lead":
                        partial.clear()
                    await emit(kind, chunk.get("agent"), chunk.get("data") or {})
                elif mode == "updates" and "__interrupt__" in chunk:
                    interrupts.extend(chunk["__interrupt__"])
            if interrupts:
                await self._pause(message, run_token, interrupts, emit, started)
            else:
                await self._complete(message, run_token, config, started, emit, graph)
        except asyncio.CancelledError:
            text = "".join(partial)
            await self.store.update_message(
                message["id"], status="cancelled", response=text or None, run_token=run_token
            )
            await emit("cancelled", None, {"partial_response": text, "reason": "cancelled by request"})
            await self._cleanup_checkpoints(message)
        except Exception as exc:  # the run failed: record it, never crash the process
            if not isinstance(exc, ArtifactFlowError):
                log.exception("run %s failed", message["id"])
            kind = "llm" if isinstance(exc, LLMError) else type(exc).__name__
            text = str(exc) if isinstance(exc, ArtifactFlowError) else f"{type(exc).__name__}: {exc}"
            await self.store.update_message(
                message["id"], status="failed", error=text, run_token=run_token
            )
            await emit("error", getattr(exc, "agent", None), {"message": text, "kind": kind})
        finally:
            lease_task.cancel()
            with contextlib.suppress(BaseException):
                await lease_task
            try:
                await sink.close()
            except Exception:
                log.exception("run %s: could not store its last events", message["id"])
            await handle.finish()
            if self._runs.get(message["id"]) is handle:
                del self._runs[message["id"]]

    async def _pause(
        self, message: dict[str, Any], run_token: str, interrupts: list[Any], emit: Any, started: float
    ) -> None:
        # The tool node raises one interrupt per round; several would come from parallel
        # branches and are answered together in a later version.
        intr = interrupts[0]
        payload = intr.value if isinstance(intr.value, dict) else {"calls": []}
        calls = [c for i in interrupts if isinstance(i.value, dict) for c in i.value.get("calls", [])]
        waiting = {"interrupt_id": intr.id, "kind": payload.get("kind"), "calls": calls,
                   "interrupt_ids": [i.id for i in interrupts]}
        await self.store.update_message(
            message["id"],
            status="waiting",
            waiting_for=waiting,
            metrics=await self._metrics(message["id"], started),
            run_token=run_token,
            lease_expires_at=None,
        )
        await emit("permission_request", None, waiting)

    async def _complete(
        self, message: dict[str, Any], run_token: str, config: dict[str, Any], started: float, emit: Any,
        graph: Any = None,
    ) -> None:
        snapshot = await (graph or self.graph).aget_state(config)
        values = snapshot.values
        metrics = await self._metrics(message["id"], started)
        response = values.get("graph_response") or ""
        outcome = values.get("outcome") or "completed"
        await self.store.update_message(
            message["id"],
            status="completed",
            response=response,
            outcome=outcome,
            metrics=metrics,
            run_token=run_token,
            lease_expires_at=None,
        )
        await self.store.touch_conversation(message["conversation_id"])
        summary = {k: v for k, v in metrics.items() if k != "calls"}
        await emit("complete", None, {"response": response, "outcome": outcome, "metrics": summary})
        await self._cleanup_checkpoints(message)

    async def _graph_for(self, message: dict[str, Any]) -> Any:
        """The chat graph, or the compiled workflow a workflow message runs on."""
        from ..workflows.runner import graph_for_message

        return await graph_for_message(self, message) or self.graph

    async def _metrics(self, message_id: str, started: float) -> dict[str, Any]:
        previous = (await self._message(message_id)).get("metrics") or {}
        wall = (time.perf_counter() - started) * 1000 + float(previous.get("wall_ms", 0.0))
        return summarize(records_from_events(await self.store.events(message_id)), wall)

    async def _cleanup_checkpoints(self, message: dict[str, Any]) -> None:
        await self.store.ledger_clear(message["id"])
        if self.services.settings.checkpoints.keep_completed:
            return
        await self.checkpoints.delete_thread(message["thread_id"])
        await self.store.update_message(message["id"], checkpoints_deleted=True)

    async def _keep_lease(self, message_id: str, run_token: str) -> None:
        period = self.services.settings.run.lease_seconds / 3
        while True:
            await asyncio.sleep(period)
            await self.store.update_message(
                message_id, run_token=run_token, lease_expires_at=self._lease()
            )

    # --- helpers -------------------------------------------------------------------------------

    def _check_credentials(self) -> None:
        for agent in self.services.agents.values():
            self.services.models.resolve(agent.model)

    def _lease(self) -> float:
        return time.time() + self.services.settings.run.lease_seconds

    @staticmethod
    def _lease_expired(message: dict[str, Any]) -> bool:
        expires = message.get("lease_expires_at")
        return expires is not None and expires < time.time()

    async def _message(self, message_id: str) -> dict[str, Any]:
        message = await self.store.get_message(message_id)
        if message is None:
            raise NotFoundError(f"message {message_id} not found")
        return message

    @staticmethod
    def _event(message: dict[str, Any], type_: str, event_id: int, agent: str | None, data: dict[str, Any]) -> Event:
        return Event(
            type=type_,  # type: ignore[arg-type]
            event_id=event_id,
            timestamp=time.time(),
            agent=agent,
            conversation_id=message["conversation_id"],
            message_id=message["id"],
            thread_id=message["thread_id"],
            data=data,
        )

    @staticmethod
    def _row_event(message: dict[str, Any], row: dict[str, Any]) -> Event:
        return Event(
            type=row["type"],
            event_id=row["event_id"],
            timestamp=row["timestamp"],
            agent=row["agent"],
            conversation_id=message["conversation_id"],
            message_id=message["id"],
            thread_id=message["thread_id"],
            data=row["data"],
        )

    async def _append(self, message: dict[str, Any], type_: str, agent: str | None, data: dict[str, Any]) -> Event:
        event_id = await self.store.last_event_id(message["id"]) + 1
        event = self._event(message, type_, event_id, agent, data)
        await self.store.append_event(message["id"], event.model_dump(mode="json"))
        return event

    async def _result(self, events: list[Event], message_id: str | None = None) -> ExecutionResult:
        if not events and message_id is None:
            raise ArtifactFlowError("the run produced no events")
        mid = message_id or events[0].message_id
        message = await self._message(mid)
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


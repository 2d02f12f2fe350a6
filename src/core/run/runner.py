"""Starting a message and driving one run of it.

A run is a background task, independent of any reader. It drives the compiled graph with
`astream` and turns what the nodes write (custom stream chunks) into `Event`s: each is
persisted, then published to readers (`EventSink`). The run — never a node — emits
`permission_request` from the interrupt payload, so nothing repeats when LangGraph re-runs the
interrupted node. A run ends in exactly one final event: `complete`, `permission_request`
(paused), `cancelled` or `error`.

Path of a run: `start_message` → `launch` → `Run.drive` → `graph.astream` (see `core/graph.py`:
`lead_agent` → `tool_execution` → tools).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from typing import TYPE_CHECKING, Any

from langgraph.errors import GraphRecursionError

from ...errors import ArtifactFlowError, LLMError, NotFoundError, ResumeConflictError, UserError
from ...hooks import runs as hook_runs
from ...hooks.types import RunEnd, RunInfo
from ..context import RunContext
from ..conversations import ConversationManager
from ..event_payloads import Outcome
from ..events import Event
from ..runs import EventSink, RunHandle
from ..state import create_initial_state
from .eventlog import append_event, new_event
from .history import history_for
from .limits import Spending, preflight, step_limit, step_limit_error
from .maintenance import cleanup_checkpoints, keep_lease, run_metrics
from .runtime import Runtime

if TYPE_CHECKING:
    from ..window import BudgetExceeded

log = logging.getLogger("artifactflow")

FirstEvents = list[tuple[str, str | None, dict[str, Any]]]


async def start_message(
    rt: Runtime,
    conversations: ConversationManager,
    content: str,
    conversation_id: str | None,
    parent_message_id: Any,
    *,
    user_id: str | None,
) -> dict[str, Any]:
    """Store the user message, build the initial state, and launch its run."""
    if not isinstance(content, str) or not content.strip():
        raise UserError("content must be a non-empty string")
    for agent in rt.services.agents.values():  # missing credentials fail before anything is stored
        rt.services.models.resolve(agent.model)
    preflight(rt.services)  # summary model credentials; prices when a cost budget is set
    if conversation_id is None and isinstance(parent_message_id, str):
        parent = await rt.store.get_message(parent_message_id)
        if parent is None:
            raise NotFoundError(f"parent message {parent_message_id} not found")
        conversation_id = parent["conversation_id"]  # a fork names its parent only
    conversation = None if conversation_id is None else await conversations.get(conversation_id, user_id=user_id)
    conversation_id = conversation["id"] if conversation else uuid.uuid4().hex
    run_token, message_id = uuid.uuid4().hex, uuid.uuid4().hex
    if rt.services.hooks.wants("before_run"):  # the original content is never stored
        stub = {"id": message_id, "conversation_id": conversation_id}
        run = hook_runs.run_info(stub, rt.services.lead.name, content=content, user_id=user_id)
        content = await rt.services.hooks.before_run(run, content)
    if conversation is None:  # created after before_run: a failing hook leaves nothing behind
        conversation = await conversations.start_conversation(conversation_id, user_id=user_id)
    message = await conversations.add_message(
        conversation["id"],
        content,
        parent_id=parent_message_id,
        run_token=run_token,
        lease_expires_at=rt.lease(),
        message_id=message_id,
    )
    history, compacted = await history_for(rt.services, conversations, message["parent_id"])
    state = create_initial_state(content, conversation_history=history)
    metadata = {
        "parent_message_id": message["parent_id"],
        "content": content,
        "lead_agent": rt.services.lead.name,
    }
    info = hook_runs.run_info(message, rt.services.lead.name, user_id=user_id)
    first: FirstEvents = [("metadata", None, metadata), *([compacted] if compacted else [])]
    launch(rt, message, run_token, state, first_events=first, info=info)
    return {
        "conversation_id": conversation["id"],
        "message_id": message["id"],
        "thread_id": message["thread_id"],
    }


def launch(
    rt: Runtime, message: dict[str, Any], run_token: str, graph_input: Any, *, first_events: FirstEvents,
    info: RunInfo | None = None, decisions: list[dict[str, Any]] | None = None,
) -> None:
    """Start `message`'s run as a background task (`graph_input`: an initial state, a resume
    `Command`, or None to continue from the last checkpoint). `info` is the segment as hooks
    see it; `decisions` the permission results a resume starts with."""
    if message["id"] in rt.runs and not rt.runs[message["id"]].done:
        raise ResumeConflictError(f"message {message['id']} is already running in this process")
    handle = RunHandle(message["id"])
    rt.runs[message["id"]] = handle
    run = Run(rt, handle, message, run_token, info, decisions)
    handle.task = asyncio.create_task(
        run.drive(graph_input, first_events), name=f"artifactflow-run-{message['id']}"
    )


async def cancel(rt: Runtime, message_id: str) -> bool:
    """Stop a run in this process, or close a paused message. False if neither applies."""
    handle = rt.runs.get(message_id)
    if handle is not None and handle.task is not None and handle.events and handle.events[-1].is_final:
        # Its final event is out: only cleanup is left, and a cancel must not rewrite the outcome.
        with contextlib.suppress(BaseException):
            await asyncio.shield(handle.task)
    if handle is None or handle.task is None or handle.task.done():
        message = await rt.message(message_id)
        if message["status"] != "waiting":
            return False
        await rt.store.update_message(message_id, status="cancelled", waiting_for=None)
        await append_event(rt.store, message, "cancelled", None, {"reason": "cancelled while paused"})
        await cleanup_checkpoints(rt, message)
        return True
    handle.cancel_requested = True
    handle.task.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.shield(handle.task)
    return True


class Run:
    """One segment of a message's run, from its first event to its final one."""

    def __init__(
        self, rt: Runtime, handle: RunHandle, message: dict[str, Any], run_token: str,
        info: RunInfo | None = None, decisions: list[dict[str, Any]] | None = None,
    ) -> None:
        self.rt = rt
        self.hooks = rt.services.hooks
        self.info = info or hook_runs.run_info(message, rt.services.lead.name)
        self.decisions = decisions
        self.store = rt.store
        self.handle = handle
        self.message = message
        self.run_token = run_token
        self.config = {
            "configurable": {"thread_id": message["thread_id"]},
            "recursion_limit": step_limit(rt.services),
        }
        self.started = time.perf_counter()
        self.partial: list[str] = []  # the lead's streamed text, kept for a cancel
        self.graph: Any = rt.graph  # a workflow message's own graph, set in `drive`
        self._last_id = 0
        self._sink = EventSink(rt.store, handle)
        self.spending = Spending(rt.services, [])

    async def emit(self, type_: str, agent: str | None, data: dict[str, Any]) -> Event:
        """Number, persist, then publish an event (`llm_chunk`: published only)."""
        if type_ != "llm_chunk":
            self._last_id += 1
        event = new_event(self.message, type_, self._last_id, agent, data)
        self.spending.add(type_, agent, data)
        self._sink.put(event)
        if event.is_final:
            await self._sink.flush()
        return event

    async def drive(self, graph_input: Any, first_events: FirstEvents) -> None:
        message_id = self.message["id"]
        self._last_id = await self.store.last_event_id(message_id)
        self.spending = await Spending.load(self.rt, message_id)
        context = RunContext(self.rt.services, self.message["conversation_id"], message_id, self.info)
        lease = asyncio.create_task(keep_lease(self.rt, message_id, self.run_token))
        interrupts: list[Any] = []
        stopped = None  # a budget crossed between two steps
        try:
            for type_, agent, data in first_events:
                await self.emit(type_, agent, data)
            self.graph = await self.rt.graph_for(self.message)
            await hook_runs.run_started(self.hooks, self.info, self.decisions)
            stream = self.graph.astream(
                graph_input,
                self.config,
                context=context,
                stream_mode=["custom", "updates"],
                durability="sync",
            )
            try:
                async for mode, chunk in stream:
                    if mode == "custom":
                        await self._relay(chunk)
                    elif mode == "updates" and "__interrupt__" in chunk:
                        interrupts.extend(chunk["__interrupt__"])
                    elif mode == "updates" and (stopped := self.spending.stop_after(chunk)):
                        break  # the next step never starts
            finally:
                await stream.aclose()
            if interrupts:
                await self._pause(interrupts)
            else:
                await self._complete(stopped)
        except asyncio.CancelledError:
            await self._cancelled()
        except Exception as exc:  # the run failed: record it, never crash the process
            await self._failed(exc)
        finally:
            lease.cancel()
            with contextlib.suppress(BaseException):
                await lease
            try:
                await self._sink.close()
            except Exception:
                log.exception("run %s: could not store its last events", message_id)
            await self.handle.finish()
            if self.rt.runs.get(message_id) is self.handle:
                del self.rt.runs[message_id]

    async def _relay(self, chunk: dict[str, Any]) -> None:
        kind = chunk.get("type")
        data = chunk.get("data") or {}
        if data.get("invocation") == "lead":
            if kind == "llm_chunk":
                self.partial.append(data.get("delta", ""))
            elif kind == "agent_start":
                self.partial.clear()
        await self.emit(kind, chunk.get("agent"), data)  # type: ignore[arg-type]

    async def _pause(self, interrupts: list[Any]) -> None:
        # The tool node raises one interrupt per round; parallel workflow steps raise one each,
        # and their calls are asked (and resumed, by id: `resume.resume_command`) together.
        intr = interrupts[0]
        payload = intr.value if isinstance(intr.value, dict) else {"calls": []}
        calls = [c for i in interrupts if isinstance(i.value, dict) for c in i.value.get("calls", [])]
        waiting = {"interrupt_id": intr.id, "kind": payload.get("kind"), "calls": calls}
        if len(interrupts) > 1:
            waiting["interrupt_ids"] = [i.id for i in interrupts]
        waiting = await hook_runs.run_paused(self.hooks, self.info, waiting, self._pending_calls)  # + trace
        await self._sink.flush()  # the metrics below are read from the log
        await self.store.update_message(
            self.message["id"],
            status="waiting",
            waiting_for=waiting,
            metrics=await run_metrics(self.rt, self.message["id"], self.started),
            run_token=self.run_token,
            lease_expires_at=None,
        )
        await hook_runs.run_ended(self.hooks, self.info, RunEnd("waiting"))
        await self.emit("permission_request", None, hook_runs.event_view(waiting))

    async def _pending_calls(self) -> list[dict[str, Any]]:
        return await self.rt.pending_calls(self.message, self.graph, self.config)

    async def _complete(self, stopped: BudgetExceeded | None = None) -> None:
        values = (await self.graph.aget_state(self.config)).values
        await self._sink.flush()  # metrics are read from the log: group-committed events first
        metrics = await run_metrics(self.rt, self.message["id"], self.started)
        response = values.get("graph_response") or ""
        outcome = values.get("outcome") or "completed"
        if stopped is not None:
            response, outcome = self.spending.partial_answer(stopped), Outcome.BUDGET_EXCEEDED.value
        await self.store.update_message(
            self.message["id"],
            status="completed",
            response=response,
            outcome=outcome,
            metrics=metrics,
            error=stopped.message if stopped else None,
            run_token=self.run_token,
            lease_expires_at=None,
        )
        await self.store.touch_conversation(self.message["conversation_id"])
        summary = {k: v for k, v in metrics.items() if k != "calls"}
        await hook_runs.run_ended(self.hooks, self.info, RunEnd("completed", response, outcome))
        data = {"response": response, "outcome": outcome, "metrics": summary}
        await self.emit("complete", None, {**data, **({"reason": stopped.message} if stopped else {})})
        await cleanup_checkpoints(self.rt, self.message)

    async def _cancelled(self) -> None:
        text = "".join(self.partial)
        await self.store.update_message(
            self.message["id"], status="cancelled", response=text or None, run_token=self.run_token
        )
        await hook_runs.run_ended(self.hooks, self.info, RunEnd("cancelled"))
        await self.emit("cancelled", None, {"partial_response": text, "reason": "cancelled by request"})
        await cleanup_checkpoints(self.rt, self.message)

    async def _failed(self, exc: Exception) -> None:
        if isinstance(exc, GraphRecursionError):  # LangGraph's text is no reason for a user
            exc = step_limit_error(self.config["recursion_limit"])
        if not isinstance(exc, ArtifactFlowError):
            log.exception("run %s failed", self.message["id"])
        kind = "llm" if isinstance(exc, LLMError) else type(exc).__name__
        text = str(exc) if isinstance(exc, ArtifactFlowError) else f"{type(exc).__name__}: {exc}"
        await self.store.update_message(
            self.message["id"], status="failed", error=text, run_token=self.run_token
        )
        data = {"message": text, "kind": kind, **hook_runs.error_fields(exc)}  # a hook's: kind "hook"
        await hook_runs.run_failed(self.hooks, self.info, exc, text, data["kind"])
        await self.emit("error", getattr(exc, "agent", None), data)

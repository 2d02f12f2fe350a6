"""Driving one segment of a message's run, and cancelling it.

A segment is a background task, independent of any reader. It drives the compiled graph with
`astream` and turns what the nodes write (custom stream chunks) into `Event`s: each is
persisted, then published to readers (`EventSink`). The segment — never a node — emits
`permission_request` from the interrupt payload, so nothing repeats when LangGraph re-runs the
interrupted node. A segment ends in exactly one final event: `complete`, `permission_request`
(paused), `cancelled` or `error`, written with its status change as one compare-and-set on
the run's token (`eventlog.change_status`).

Ownership: every event batch is written only while the run's token still owns the message,
and so is every checkpoint (`ownership.owned_by`). A run that lost its message (its lease ran
out and another process recovered it, or it was cancelled elsewhere) stops quietly with a
warning and writes nothing more. A cancel that lands before the run's task has started is
seen by the task's first line, so its cleanup always runs and its slot is always freed; a
cancel recorded on the message (from any worker, `cancel.py`) is read there too, and the run's
own final change to `completed`, `waiting` or `failed` loses to it.

Path of a run: `start.start_message` (or `resume.resume_start`, `resume.recover`, a workflow's
start) → `launch.launch` → `Segment.drive` → `graph.astream` (see `core/graph.py`: `lead_agent` →
`tool_execution` → tools).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from langgraph.errors import GraphRecursionError

from ...errors import (
    ArtifactFlowError,
    CancelRequested,
    LeaseLostError,
    LLMError,
    StoreUnavailableError,
    scrub_secrets,
)
from ...events.envelope import Emitted, Event, EventType
from ...events.payloads import (
    CancelledData,
    CompleteData,
    ErrorData,
    EventData,
    LLMChunkData,
    Outcome,
    PermissionRequestData,
    ToolCompleteData,
)
from ...hooks import runs as hook_runs
from ...hooks.types import RunEnd, RunInfo
from ...shapes import AskedCall, PauseRecord, RecordedDecision
from ..context import RunContext, Services
from ..metrics import METRIC_FIELDS, RunMetrics, metric_view
from ..state import LEAD
from ..store.faults import store_fault
from ..store.rows import MessageRow
from .cancel_poll import CancelPoll
from .eventlog import new_event
from .interrupted import mark_interrupted
from .limits import Spending, step_limit, step_limit_error, time_exceeded, time_limit
from .live import EventSink, LiveRun
from .local_stop import cancel as cancel  # re-exported: `segment.cancel`
from .maintenance import cleanup_checkpoints, final_metrics, keep_lease, run_metrics
from .outage import KEPT_ENDINGS, end_after_outage, store_ending
from .ownership import owned_by
from .runtime import Runtime

if TYPE_CHECKING:
    from ..window import BudgetExceeded

log = logging.getLogger("artifactflow")

_ENDING = ("graph_response", "outcome", "outcome_reason")  # what `_complete` reads of the state

FirstEvents = list[Emitted]


class Segment:
    """One segment of a message's run, from its first event to its final one (a run that
    pauses and resumes has several)."""

    def __init__(
        self, rt: Runtime, handle: LiveRun, message: MessageRow, run_token: str,
        info: RunInfo | None = None, decisions: list[RecordedDecision] | None = None,
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
        self._sink = EventSink(rt.store, handle, run_token=run_token, bus=rt.bus)
        self.spending = Spending(rt.services, [])
        self.fresh = False  # see `launch`
        self.services: Services | None = None  # see `launch`
        # what `_complete` reads of the final state, as the nodes wrote it (`_watch`); None
        # once an update comes in a shape that is not a node's dict of writes
        self._ending: dict[str, Any] | None = {}
        self.context: RunContext | None = None  # set in `drive`
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()

    async def emit(self, data: EventData, agent: str | None = None) -> Event:
        """Number, persist, then publish an event (`llm_chunk`: published only)."""
        event = self._emit(data, agent)
        if event.is_final:
            await self._sink.flush()
        return event

    def _emit(self, data: EventData, agent: str | None) -> Event:
        """Number an event and hand it to the sink (stored, then published, in order)."""
        if not isinstance(data, LLMChunkData):
            self._last_id += 1
        event = new_event(self.message, data, self._last_id, agent)
        if event.type in Spending.COUNTED:  # the others would be dumped for nothing
            self.spending.add(event.type, agent, data.to_dict())
        self._sink.put(event)
        return event

    def relay_now(self, chunk: Emitted) -> None:
        """A node's event, handed over at once (`RunContext.emit_now`): what `_relay` does
        with one from the stream. A storage failure of an earlier batch is raised here, in
        the node, as the stream's relay raised it in the segment; a token delta (never stored)
        is dropped then instead, so a model call does not mistake the failure for its own.
        From another thread (a sync tool emitting through its `ToolContext`) the event is
        handed to the event loop first, as LangGraph's stream writer did."""
        if threading.get_ident() != self._loop_thread:
            self._loop.call_soon_threadsafe(self._relay_from_thread, chunk)
            return
        if isinstance(chunk.data, LLMChunkData) and self._sink.failed:
            return
        self._track_partial(chunk)
        self._emit(*chunk)

    def _relay_from_thread(self, chunk: Emitted) -> None:
        with contextlib.suppress(Exception):  # a storage failure surfaces at the next flush
            self.relay_now(chunk)

    async def drive(self, graph_input: Any, first_events: FirstEvents) -> None:
        self.handle.started = True  # no await before the try: cleanup always runs
        message_id = self.message["id"]
        lease: asyncio.Task[None] | None = None
        interrupts: list[Any] = []
        stopped = None  # a budget crossed between two steps
        try:
            try:
                if self.handle.cancel_requested:  # cancelled before the task started (`cancel.py`)
                    raise asyncio.CancelledError
                services = self.services or self.rt.services
                if self.services is None and not self.fresh:  # a fresh one was handed its own
                    services = await self.rt.services_for(self.message)
                if not self.fresh:  # a message stored a moment ago has no log, spending or cancel yet
                    if await self.store.cancel_requested(message_id):
                        raise asyncio.CancelledError  # recorded by another worker (`cancel.py`)
                    self._last_id = await self.store.last_event_id(message_id)
                    self.spending = await Spending.load(self.rt, message_id)
                if services is not self.rt.services:  # its own agents' budgets
                    self.spending = Spending(services, await self.store.events(message_id))
                context = self.context = RunContext(
                    services, self.message["conversation_id"], message_id, self.info,
                    fresh=self.fresh, stored_events=self.handle.events, settle_events=self._sink.flush,
                )
                lease = asyncio.create_task(keep_lease(self.rt, message_id, self.run_token))
                for first in first_events:
                    await self.emit(*first)
                self.graph = self.rt.graph if self.fresh else await self.rt.graph_for(self.message)
                if self.graph is self.rt.graph:  # the chat graph's nodes all emit through `Emitter`
                    context.emit_now = self.relay_now
                await hook_runs.run_started(self.hooks, self.info, self.decisions)
                poll = CancelPoll(self.store, message_id, enabled=not self.rt.bus.live)
                with owned_by(self.store, message_id, self.run_token):
                    stream = self.graph.astream(
                        graph_input,
                        self.config,
                        context=context,
                        # no custom stream for nodes emitting to `relay_now` (no waiter task per step)
                        stream_mode=["updates"] if context.emit_now else ["custom", "updates"],
                        durability="sync",
                    )
                    seconds = time_limit(services)
                    clock = asyncio.timeout(seconds)  # when it runs out: stops the step in progress
                    try:
                        async with clock:
                            async for mode, chunk in stream:
                                if mode == "custom":
                                    await self._relay(chunk)
                                elif mode == "updates" and "__interrupt__" in chunk:
                                    interrupts.extend(chunk["__interrupt__"])
                                elif mode == "updates":
                                    self._watch(chunk)
                                    if stopped := self.spending.stop_after(chunk):
                                        break  # the next step never starts
                                    if await poll.requested():  # recorded by another process
                                        raise CancelRequested(message_id)
                    except TimeoutError:
                        if seconds is None or not clock.expired():
                            raise
                        stopped, interrupts = time_exceeded(seconds), []
                    finally:
                        await stream.aclose()
                await self._store_cut_off()
                if interrupts:
                    await self._pause(interrupts)
                else:
                    await self._complete(stopped)
            except (asyncio.CancelledError, CancelRequested):
                await self._end_cancelled()
            except LeaseLostError:
                raise
            except Exception as exc:  # the run failed: record it, never crash the process
                try:
                    await self._failed(exc)
                except CancelRequested:  # a cancel was accepted before the failure was stored
                    await self._end_cancelled()
        except LeaseLostError:
            self._lost()
        except Exception as exc:  # the final write failed: the database is away (outage.py)
            ended = lambda text: hook_runs.run_ended(self.hooks, self.info, RunEnd("failed", error=text))  # noqa: E731
            try:
                await end_after_outage(self.store, self.message, self.run_token, self.handle, exc, spare=self.rt.spare, on_stored=ended, sink=self._sink)
            except LeaseLostError:
                self._lost()
        finally:
            if lease is not None:
                lease.cancel()
                with contextlib.suppress(BaseException):
                    await lease
            try:
                await self._sink.close()
            except LeaseLostError:
                self._lost()
            except Exception as exc:  # an outage in one line; a traceback for anything else
                log.warning("run %s: could not store its last events (%s)", message_id, store_fault(exc) or exc, exc_info=store_fault(exc) is None)
            await self.handle.finish()
            if self.rt.runs.get(message_id) is self.handle:
                del self.rt.runs[message_id]

    def _lost(self) -> None:
        if not self.handle.lost:
            self.handle.lost = True
            log.warning("run %s stopped: this process no longer owns message %s (its lease ran out and another "
                        "process took it over, or it was cancelled elsewhere); nothing more was written",
                        self.run_token, self.message["id"])

    async def _finish(
        self, status: str, data: EventData, agent: str | None = None, *, end: RunEnd,
        failure: Exception | None = None, **fields: Any,
    ) -> Event:
        """End the run: `status` and its final event in one compare-and-set on the run token
        (after every earlier event is stored); then `on_run_end` — only once the ending is
        decided, so a cancel racing the run's own end makes one of them final and the hooks
        hear that one, once — then this process's readers get the event. `LeaseLostError` if
        the run no longer owns it; `CancelRequested` if a cancel was accepted first."""
        await self._sink.settle(wait_out_outage=status in KEPT_ENDINGS)  # else told at once
        if self.context is not None and self.context.settle_recording is not None:
            await self.context.settle_recording()  # the last recorded call's row (never raises)
        guarded = status != "cancelled"  # an accepted cancel wins over any other ending
        event = await store_ending(  # `completed`, `waiting`: through an outage on PostgreSQL
            self.store, self.message, data, agent=agent, unless_cancel_requested=guarded,
            expected_status="running", expected_run_token=self.run_token, status=status, **fields,
        )
        if event is None and guarded and await self.store.holds_run(self.message["id"], self.run_token):
            raise CancelRequested(self.message["id"])  # still ours, so the cancel flag stopped it
        if event is None:
            raise LeaseLostError(
                f"message {self.message['id']} is no longer owned by this run",
                message_id=self.message["id"],
            )
        self._last_id = event.event_id
        self.handle.finishing = True  # from here a cancel only waits for the cleanup
        await asyncio.shield(hook_runs.run_end(self.hooks, self.info, end, failure, data))  # uncut
        await self.handle.publish(event)
        return event

    async def _relay(self, chunk: Emitted) -> None:
        self._track_partial(chunk)
        await self.emit(*chunk)

    def _track_partial(self, chunk: Emitted) -> None:
        data = chunk.data
        if getattr(data, "invocation", None) == LEAD:
            if isinstance(data, LLMChunkData):
                self.partial.append(data.delta)
            elif data.type is EventType.AGENT_START:
                self.partial.clear()

    async def _pause(self, interrupts: list[Any]) -> None:
        # The tool node raises one interrupt per round; parallel workflow steps raise one each,
        # and their calls are asked (and resumed, by id: `resume.resume_command`) together.
        intr = interrupts[0]
        payload: Mapping[str, Any] = intr.value if isinstance(intr.value, dict) else {}
        calls: list[AskedCall] = [c for i in interrupts if isinstance(i.value, dict) for c in i.value.get("calls", [])]
        waiting: PauseRecord = {"interrupt_id": intr.id, "kind": payload.get("kind"), "calls": calls}
        if len(interrupts) > 1:
            waiting["interrupt_ids"] = [i.id for i in interrupts]
        waiting["calls"] = await mark_interrupted(self.rt, self.message["id"], waiting["calls"], self._pending_calls)
        waiting = await hook_runs.run_paused(self.hooks, self.info, waiting, self._pending_calls)  # + trace
        await self._sink.flush()  # the metrics below are read from the log
        metrics = await self._metrics()
        await self._finish(
            "waiting", PermissionRequestData.model_validate(hook_runs.event_view(waiting)),
            end=RunEnd("waiting"), waiting_for=waiting, metrics=metrics, lease_expires_at=None, decisions=None,
        )

    async def _metrics(self) -> RunMetrics:
        """The run's metrics. A fresh message's first segment published its whole log to its
        handle (stored first), so its events and its row are at hand, not read back."""
        if self.fresh and self.handle.whole and not self.handle.lost:
            forms = self.handle.stored_forms
            events = [
                forms.get(e.event_id) or metric_view(e)
                for e in self.handle.events
                if e.type in METRIC_FIELDS
            ]
            return await run_metrics(self.rt, self.message["id"], self.started, events=events, message=self.message)
        return await run_metrics(self.rt, self.message["id"], self.started)

    async def _pending_calls(self) -> list[dict[str, Any]]:
        return await self.rt.pending_calls(self.message, self.graph, self.config)

    def _watch(self, chunk: Any) -> None:
        """Keep the last value each node wrote to the fields `_complete` reads (plain
        last-value channels: the final state holds the last write)."""
        ending = self._ending
        if ending is None:
            return
        for writes in chunk.values():
            if writes is None:
                continue
            if not isinstance(writes, dict):
                self._ending = None  # not a shape this knows: `_complete` reads the state
                return
            for key in _ENDING:
                if key in writes:
                    ending[key] = writes[key]

    async def _final_values(self) -> Mapping[str, Any]:
        """The fields of the final state `_complete` needs. A fresh chat message's only
        segment saw every write since its initial state (where they are all None) in its
        `updates` stream, so they are not read back from the checkpoint (which would load
        and decode the whole state: several trips to the saver's thread)."""
        if self.fresh and self.graph is self.rt.graph and self._ending is not None:
            return self._ending
        return (await self.graph.aget_state(self.config)).values

    async def _complete(self, stopped: BudgetExceeded | None = None) -> None:
        values = await self._final_values()
        await self._sink.flush()  # metrics are read from the log: group-committed events first
        metrics = await self._metrics()
        response = values.get("graph_response") or ""
        outcome = values.get("outcome") or "completed"
        if stopped is not None:
            response, outcome = self.spending.partial_answer(stopped), Outcome.BUDGET_EXCEEDED.value
        summary = {k: v for k, v in metrics.items() if k != "calls"}
        data = CompleteData(response=response, outcome=outcome, metrics=summary)
        data.reason = stopped.message if stopped else values.get("outcome_reason")
        await self._finish(
            "completed", data, end=RunEnd("completed", response, outcome),
            response=response, outcome=outcome, metrics=metrics,
            error=stopped.message if stopped else None, lease_expires_at=None,
        )
        await cleanup_checkpoints(self.rt, self.message, touch=True)  # + touch_conversation

    async def _end_cancelled(self) -> None:
        """End the run `cancelled`, whatever else asks to cancel it meanwhile.

        A cancel reaches a run by several paths: the flag read at the start, before an approved
        tool or in the final compare-and-set (`CancelRequested`), and the bus or the lease
        check, which cancel the task. A second one arriving while the first is being written
        must not cut the final write short (the message would stay `running`): from here on the
        handle says a cancel is in hand, so `segment.cancel` no longer cancels the task, and a
        cancellation sent just before that is absorbed."""
        self.handle.cancel_requested = True
        task = asyncio.current_task()
        for _ in range(3):
            while task is not None and task.cancelling():
                task.uncancel()  # what was asked is being done; timeouts inside must work
            try:
                if self.handle.finishing:  # stored by an attempt cut short after its write
                    await cleanup_checkpoints(self.rt, self.message)
                else:
                    await self._cancelled()
                return
            except asyncio.CancelledError:
                continue  # a cancel sent before the handle said so, delivered now
        await self._cancelled()

    async def _store_cut_off(self) -> None:
        """Store the `llm_complete` of model calls a cancel cut off (usage estimated, see
        `agent_nodes._cut_off_call`), so the final metrics and budgets count their tokens."""
        if self.context is None or not self.context.cut_off_calls:
            return
        calls = list(self.context.cut_off_calls)
        self.context.cut_off_calls.clear()
        for chunk in calls:
            await self.emit(*chunk)

    async def _cancelled(self) -> None:
        await self._store_cut_off()
        text = "".join(self.partial)
        # Sync tools still running on their threads: say so, rather than nothing.
        for record in self.rt.services.tools.background.take_abandoned(self.message["id"]):
            await self.emit(ToolCompleteData.model_validate({**record, "success": False, "duration_ms": 0.0}))
        await self._finish(
            "cancelled", CancelledData(partial_response=text, reason="cancelled by request"),
            end=RunEnd("cancelled"), response=text or None, lease_expires_at=None, **await final_metrics(self.rt, self.message["id"], self.started, self._sink.settle_now),
        )
        await cleanup_checkpoints(self.rt, self.message)

    async def _failed(self, exc: Exception) -> None:
        with contextlib.suppress(Exception):  # the store may be why the run failed
            await self._store_cut_off()
        if not isinstance(exc, ArtifactFlowError):  # a database outage is named as such
            exc = store_fault(exc) or exc
        if isinstance(exc, GraphRecursionError):  # LangGraph's text is no reason for a user
            exc = step_limit_error(self.config["recursion_limit"])
        if not isinstance(exc, ArtifactFlowError):
            log.exception("run %s failed", self.message["id"])
        kind = "llm" if isinstance(exc, LLMError) else type(exc).__name__
        if isinstance(exc, StoreUnavailableError):
            kind = "storage"  # as when the final write itself has to wait (outage.py)
        text = str(exc) if isinstance(exc, ArtifactFlowError) else scrub_secrets(f"{type(exc).__name__}: {exc}")
        data = ErrorData.model_validate({"message": text, "kind": kind, **hook_runs.error_fields(exc)})  # a hook's: kind "hook"
        await self._finish("failed", data, getattr(exc, "agent", None), end=RunEnd("failed", error=text),
                           failure=exc, error=text, lease_expires_at=None, **await final_metrics(self.rt, self.message["id"], self.started, self._sink.settle_now))

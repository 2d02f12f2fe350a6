"""Recording every model request of a run, so the run can be exported and replayed.

The event log has each model *response* (`llm_complete`) but not what was sent: the exact
messages and tool specs. `RecordingModel` wraps whatever `Model` serves an agent (the
`ModelPicker` of every engine is built with `wrap=recording`, in core/engine.py) and, when the
call happens inside a run, stores the request with its response or error in the app store
(`af_model_calls`, see `store.py`).

Storage. A request repeats the whole history of its invocation, so storing requests whole is
quadratic in the run's length. Each row keeps a prefix delta instead (`delta.py`): the longest
prefix shared with one of the last few requests of the same message, plus the new messages;
the tool specs only when they differ from that base's. That is linear: one tool round costs
its assistant message and tool results once (figures: `benchmarks/replay_recording.py`). A
tool result already stored in the event log is not stored again: the row refers to its
`tool_complete` event (`result_refs.py`).
A table rather than a new event type: requests are bulk internal data no reader of the event
log (SSE, CLI, web page) wants streamed, event ids keep their meaning, and a delta refers to
earlier rows. The first call of a message in a process also stores the configuration it ran
under (agents, tools, settings that matter), so an export describes the run, not today's files.

Recording never breaks a run: a failed write is logged and the call's result is returned.
Calls made outside a run (no LangGraph runtime) are not recorded, nor any call when the
setting `run.record_requests` is false.
"""

from __future__ import annotations

import asyncio
import logging
import time
import weakref
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..agents.model.base import DeltaCallback, Model, ModelRequest, ModelResponse
from ..shapes import JsonObject
from . import delta, result_refs
from . import store as calls
from .records import (
    CallData,
    ConfigSnapshot,
    ErrorRecord,
    ResponseRecord,
    TargetError,
    TargetInfo,
    ToolInfo,
)

if TYPE_CHECKING:
    from ..core.context import RunContext, Services
    from ..core.store.repository import AppStore

log = logging.getLogger("artifactflow.replay")

RECENT = 8  # earlier requests of a message considered as delta bases
MESSAGES = 64  # messages whose recent requests are kept in memory


def recording(model: Model) -> Model:
    """`model` behind the recorder (the `wrap` of `ModelPicker`)."""
    if isinstance(model, RecordingModel):
        return model
    return RecordingModel(model)


def current_run() -> RunContext | None:
    """The run this code executes in (inside a graph node), or None."""
    from langgraph.runtime import get_runtime

    from ..core.context import RunContext

    try:
        context = get_runtime().context
    except (RuntimeError, AttributeError, KeyError):
        return None
    return context if isinstance(context, RunContext) else None


class RecordingModel:
    """A `Model` that stores each request and its outcome when called inside a run."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:  # `api`, `requests`, … of the wrapped model
        return getattr(self.inner, name)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def complete(
        self, request: ModelRequest, on_delta: DeltaCallback | None = None
    ) -> ModelResponse:
        run = current_run()
        if run is None or not run.services.settings.run.record_requests:
            return await self.inner.complete(request, on_delta)
        recorder = recorder_for(run.services.store)
        started = time.perf_counter()
        seq = await recorder.begin(run, request)
        try:
            response = await self.inner.complete(request, on_delta)
        except Exception as exc:
            await recorder.finish(run, seq, request, None, exc, started)
            raise
        await recorder.finish(run, seq, request, response, None, started)
        return response


_RECORDERS: weakref.WeakKeyDictionary[Any, RequestRecorder] = weakref.WeakKeyDictionary()


def recorder_for(store: AppStore) -> RequestRecorder:
    recorder = _RECORDERS.get(store)
    if recorder is None:
        recorder = _RECORDERS[store] = RequestRecorder(store)
    return recorder


@dataclass
class _Message:
    """What the recorder keeps in memory about one message: its next row number and its
    latest stored requests (delta bases)."""

    next_seq: int | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    recent: deque[tuple[int, str | None, list[Any], list[Any] | None]] = field(
        default_factory=lambda: deque(maxlen=RECENT)
    )
    results: result_refs.StoredResults = field(default_factory=result_refs.StoredResults)
    storing: _Put | None = None  # the latest call row, until its commit is known


@dataclass
class _Put:
    """A call row handed to the group commit without waiting (`store.put_soon`)."""

    future: asyncio.Future[None]
    entry: tuple[int, str | None, list[Any], list[Any] | None]  # its place in `recent`
    size: int
    seen: bool = False


class RequestRecorder:
    """Numbers and stores the model calls of every run on one app store."""

    def __init__(self, store: AppStore) -> None:
        self.store = store
        self._messages: OrderedDict[str, _Message] = OrderedDict()
        self.bytes_written = 0
        self._warned = False

    def _state(self, run: RunContext) -> _Message:
        """The message's state, held by the run for as long as it lives: the memory of recent
        messages is bounded, and a live run whose state it dropped would number its calls from
        the start again (a duplicate row, failing the group commit it joined)."""
        state = run.recording
        if isinstance(state, _Message):
            return state
        state = run.recording = self._remembered(run.message_id)
        run.settle_recording = lambda: self._settle(state)  # awaited by the segment's end
        return state

    def _remembered(self, message_id: str) -> _Message:
        state = self._messages.get(message_id)
        if state is None:
            state = self._messages[message_id] = _Message()
            while len(self._messages) > MESSAGES:
                self._messages.popitem(last=False)
        else:
            self._messages.move_to_end(message_id)
        return state

    async def begin(self, run: RunContext, request: ModelRequest) -> int | None:
        """Reserve the call's row number, in the order the requests were made."""
        state = self._state(run)
        try:
            if state.next_seq is None:
                async with state.lock:
                    if state.next_seq is None:
                        # A message just stored by this run has no rows yet: no need to look.
                        seq = 1 if run.fresh else await calls.next_seq(self.store, run.message_id)
                        await self._put(run.message_id, seq, calls.CONFIG, None,
                                        config_snapshot(run.services))
                        state.next_seq = seq + 1
            seq = state.next_seq
            state.next_seq += 1
            return seq
        except Exception:
            self._warn(run.message_id)
            return None

    async def finish(
        self,
        run: RunContext,
        seq: int | None,
        request: ModelRequest,
        response: ModelResponse | None,
        error: BaseException | None,
        started: float,
    ) -> None:
        if seq is None:
            return
        state = self._state(run)
        await self._settle(state)  # a row is a delta base only once it is stored
        messages = list(request.messages)
        tools = list(request.tools) if request.tools else None
        base, keep, append = delta.encode(messages, ((s, m) for s, _, m, _ in state.recent))
        append, refs = await self._refer(run, state, append)
        data: CallData = {
            "agent": request.agent,
            "target": target_info(request.target),
            "base": base,
            "keep": keep,
            "append": append,
            "duration_ms": round((time.perf_counter() - started) * 1000, 2),
        }
        if refs:
            data["results"] = refs
        base_tools = next((tl for s, _, _, tl in state.recent if s == base), None)
        if base is not None and tools == base_tools:
            data["same_tools"] = True
        else:
            data["tools"] = tools
        if response is not None:
            data["response"] = response_dict(response)
        else:
            data["error"] = error_dict(error)
        try:
            # Not waited for: the row joins the transaction of the events the node emits next
            # (`llm_complete`, …), one trip to the store instead of two. Its outcome is seen
            # by the next call (before it picks a delta base) and by the segment's end.
            size, future = calls.put_soon(self.store, run.message_id, seq, calls.CALL, request.agent, data)
        except Exception:
            self._warn(run.message_id)
            return
        entry = (seq, request.agent, messages, tools)
        state.recent.append(entry)
        put = state.storing = _Put(future, entry, size)
        future.add_done_callback(lambda _: self._stored(run.message_id, state, put))

    async def _settle(self, state: _Message) -> None:
        """Wait for the latest call row's commit (never raises: a failure was logged and the
        row is no delta base)."""
        put = state.storing
        if put is None:
            return
        if not put.future.done():
            await asyncio.wait([put.future])
        self._stored(None, state, put)

    def _stored(self, message_id: str | None, state: _Message, put: _Put) -> None:
        """A call row's commit is known: count it, or log its failure and forget it as a base."""
        if put.seen or not put.future.done():
            return
        put.seen = True
        if state.storing is put:
            state.storing = None
        error = None if put.future.cancelled() else put.future.exception()
        if error is None and not put.future.cancelled():
            self.bytes_written += put.size
            return
        for i, entry in enumerate(state.recent):
            if entry is put.entry:
                del state.recent[i]
                break
        self._warn(message_id or "?", error)

    async def _refer(
        self, run: RunContext, state: _Message, append: list[Any]
    ) -> tuple[list[Any], list[list[int]]]:
        """`append` with the tool results the event log holds replaced by references
        (`result_refs.py`). A result whose event is still on its way to the store (emitted
        before this request was made) is waited for: the wait is short and rare."""
        state.results.update(run.stored_events)
        if run.settle_events is not None and result_refs.unseen(append, state.results):
            try:
                await run.settle_events()
            except Exception:  # the run meets a storage failure itself; keep the text
                return append, []
            state.results.update(run.stored_events)
        return result_refs.shrink(append, state.results)

    async def _put(self, message_id: str, seq: int, kind: str, agent: str | None, data: Any) -> None:
        self.bytes_written += await calls.put(self.store, message_id, seq, kind, agent, data)

    def _warn(self, message_id: str, error: BaseException | None = None) -> None:
        if not self._warned:
            self._warned = True
            log.warning(
                "could not record a model request of message %s; the run goes on, but it "
                "cannot be exported for replay",
                message_id,
                exc_info=error or True,
            )


# --- what a row holds ---------------------------------------------------------------------


def target_info(target: Any) -> TargetInfo:
    """The model a request was for, without credentials or endpoints."""
    return {
        "profile": getattr(target, "profile", None),
        "model": getattr(target, "model", None),
        "api": getattr(target, "api", None),
    }


def response_dict(response: ModelResponse) -> ResponseRecord:
    usage = response.usage
    return {
        "content": response.content,
        "tool_calls": [call.copy() for call in response.tool_calls],
        "model": response.model,
        "usage": None
        if usage is None
        else {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens},
        "finish_reason": response.finish_reason,
        "attempts": response.attempts,
    }


def error_dict(error: BaseException | None) -> ErrorRecord:
    return {
        "kind": type(error).__name__ if error is not None else "Exception",
        "message": str(error) if error is not None else "",
    }


SETTINGS_THAT_MATTER = ("model", "permissions", "tools", "context", "budget", "run", "mcp_servers")


def config_snapshot(services: Services) -> ConfigSnapshot:
    """The configuration a run ran under: each agent's front matter and prompt, the tools
    they may call (source, effective permission, timeout), and the settings that change what
    the model sees or what runs. No credentials and no endpoints."""
    settings = services.settings
    agents: dict[str, JsonObject] = {}
    models: dict[str, TargetInfo | TargetError] = {}
    for name, spec in services.agents.items():
        agents[name] = spec.model_dump(mode="json")
        try:
            models[name] = target_info(services.models.resolve(spec.model))
        except Exception as exc:  # missing credentials: the run would not have started
            models[name] = {"error": str(exc)}
    tool_names = sorted({n for spec in services.agents.values() for n in spec.tools})
    tools: dict[str, ToolInfo] = {}
    for name in tool_names:
        tool = services.tools.get(name)
        if tool is None:
            continue
        tools[name] = {
            "source": services.tools.source(name),
            "permission": services.tools.permission(name).value,
            "timeout": tool.timeout,
            "description": tool.description,
            "schema": tool.json_schema(),
        }
    picked: JsonObject = {}
    dumped = settings.model_dump(mode="json")
    for key in SETTINGS_THAT_MATTER:
        value = dumped.get(key)
        if key == "mcp_servers":  # names and transports only: env and headers may be secret
            value = sorted(value or {})
        picked[key] = value
    return {"agents": agents, "models": models, "tools": tools, "settings": picked}

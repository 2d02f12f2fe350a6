"""A run's events as the Agent Protocol's server-sent events, per stream mode.

Every frame is `event: <mode>` / `data: <JSON>` / `id: <E>-<k>`: the k-th frame since our
stored event E (ids unique and increasing; the form of LangGraph's own `<ms>-<seq>`). A
reconnect with `Last-Event-ID: E-k` re-reads event E and sends what followed frame k; a plain
`E` resumes after event E, `-1` from the run's start. Token chunks are never stored, so the
ones a client missed are not sent again (the model call's full message follows in
`values`/`updates`). The first frame is `metadata {run_id, attempt}` (id `<start>-0`; on a reconnect the id the
client gave).

| mode | made from |
|---|---|
| values | the thread's messages after the input, each model call, each tool result, the end; `__interrupt__` when paused |
| updates | `{node: {"messages": [new]}}` per model call (`lead_agent`) and tool result (`tool_execution`); `{"__interrupt__": [...]}` |
| messages-tuple | `[AIMessageChunk, metadata]` per token chunk (event name `messages`), and each tool message |
| messages | `messages/metadata`, `messages/partial` (the text so far), `messages/complete` |
| events | `on_chat_model_start/stream/end`, `on_tool_start/end` |
| custom | every stored event of ours, as `{type, event_id, agent, data}` (artifacts, subagents, compactions, ...) |
| debug | `{type: "checkpoint" | "task_result", step, timestamp, payload}` |
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any

import anyio

from ..events.envelope import Event, EventType
from ..events.payloads import ToolCompleteData, ToolStartData
from .convert import LEAD, MessageBuilder, ai, ai_id, interrupt_of
from .views import NODE, checkpoint

MODES = (
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "events",
    "custom",
    "debug",
    "tasks",
    "checkpoints",
)
Frame = tuple[str, Any]
ResumeAt = tuple[int, int]  # (event id, index of the last frame seen in its group)


def modes_of(value: Any) -> list[str]:
    modes = [value] if isinstance(value, str) else list(value or ["values"])
    return [m for m in modes if m in MODES] or ["values"]


def sse(name: str, data: Any, event_id: str | None) -> bytes:
    lines = [] if event_id is None else [f"id: {event_id}"]
    lines += [f"event: {name}", "data: " + json.dumps(data, default=str, separators=(",", ":"))]
    return ("\n".join(lines) + "\n\n").encode()


class Frames:
    """Turns one run's events into protocol frames for `modes`."""

    def __init__(
        self,
        modes: Sequence[str],
        *,
        run_id: str,
        thread_id: str,
        message: dict[str, Any],
        base: list[dict[str, Any]],
        prior: Sequence[Event],
        graph_id: str,
        subgraphs: bool = False,
    ) -> None:
        self.subgraphs = subgraphs
        self.modes = set(modes)
        self.run_id, self.thread_id, self.graph_id = run_id, thread_id, graph_id
        self.message_id = message["id"]
        self.base = base
        self.builder = MessageBuilder(message)
        for event in prior:
            self.builder.add(event)
        self.partial: dict[str, str] = {}  # messages mode: the text so far per message id
        self.step = len(prior)

    def values(self) -> dict[str, Any]:
        return {"messages": self.base + self.builder.messages}

    def _meta(self, event: Event, node: str) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "thread_id": self.thread_id,
            "graph_id": self.graph_id,
            "langgraph_node": node,
            "langgraph_step": self.step,
            "langgraph_checkpoint_ns": "",
            "agent": event.agent,
            "ls_provider": "openai",
        }

    def start(self) -> list[Frame]:
        """The frames before the run's first event: the state it starts from."""
        return [("values", self.values())] if "values" in self.modes else []

    def event(self, event: Event) -> list[Frame]:
        frames: list[Frame] = []
        data = event.data
        invocation = getattr(data, "invocation", None) or LEAD
        node = "lead_agent" if invocation == LEAD else (event.agent or invocation)
        if event.type == EventType.LLM_CHUNK:
            if invocation != LEAD and not self.subgraphs:
                return frames  # a subagent's tokens: only with stream_subgraphs
            ns = "" if invocation == LEAD else f"|{node}:{invocation}"
            msg_id = (
                self.builder.current_ai_id
                if invocation == LEAD
                else ai_id(self.message_id, 0, invocation)
            )
            delta = data.delta  # type: ignore[attr-defined]
            chunk = ai(msg_id, delta, chunk=True)
            if "messages-tuple" in self.modes:
                frames.append(("messages" + ns, [chunk, self._meta(event, node)]))
            if "messages" in self.modes:
                if msg_id not in self.partial:
                    metadata = {msg_id: {"metadata": self._meta(event, node)}}
                    frames.append(("messages/metadata" + ns, metadata))
                self.partial[msg_id] = self.partial.get(msg_id, "") + delta
                frames.append(("messages/partial" + ns, [ai(msg_id, self.partial[msg_id])]))
            if "events" in self.modes:
                stream = self._lc_event("on_chat_model_stream", node, event, {"chunk": chunk})
                frames.append(("events" + ns, stream))
            return frames
        self.step += 1
        added = self.builder.add(event)
        if added and "updates" in self.modes:
            update_node = NODE if event.type == EventType.TOOL_COMPLETE else node
            frames.append(("updates", {update_node: {"messages": added}}))
        for message in added:
            if "messages-tuple" in self.modes and message["type"] == "tool":
                frames.append(("messages", [message, self._meta(event, NODE)]))
            if "messages" in self.modes and message["type"] == "ai":
                frames.append(("messages/complete", [message]))
        if "events" in self.modes:
            if event.type == EventType.AGENT_START and invocation == LEAD:
                frames.append(("events", self._lc_event("on_chat_model_start", node, event, {})))
            elif event.type == EventType.LLM_COMPLETE and added:
                frames.append(
                    (
                        "events",
                        self._lc_event("on_chat_model_end", node, event, {"output": added[0]}),
                    )
                )
            elif isinstance(data, ToolStartData):
                start = self._lc_event("on_tool_start", NODE, event, {"input": data.arguments})
                frames.append(("events", start))
            elif isinstance(data, ToolCompleteData):
                output = {"output": data.result.to_dict()}
                frames.append(("events", self._lc_event("on_tool_end", NODE, event, output)))
        if event.type == EventType.PERMISSION_REQUEST:
            interrupt = interrupt_of(data.to_dict())
            if "updates" in self.modes:
                frames.append(("updates", {"__interrupt__": [interrupt]}))
            if "values" in self.modes:
                frames.append(("values", {**self.values(), "__interrupt__": [interrupt]}))
        elif "values" in self.modes and (added or event.type == EventType.COMPLETE):
            frames.append(("values", self.values()))
        if event.type == EventType.ERROR:
            frames.append(
                (
                    "error",
                    {
                        "error": getattr(data, "kind", None) or "Error",
                        "message": getattr(data, "message", ""),
                    },
                )
            )
        if "custom" in self.modes and event.type not in (EventType.METADATA,):
            frames.append(
                (
                    "custom",
                    {
                        "type": str(event.type),
                        "event_id": event.event_id,
                        "agent": event.agent,
                        "data": data.to_dict(),
                    },
                )
            )
        if "debug" in self.modes and (added or event.is_final):
            frames.append(
                (
                    "debug",
                    {
                        "type": "checkpoint",
                        "step": self.step,
                        "timestamp": datetime.now(UTC).isoformat(),
                        "payload": {
                            "config": {"configurable": checkpoint(self.thread_id, self.message_id)},
                            "values": self.values(),
                            "metadata": {"source": "loop", "step": self.step},
                            "next": [],
                            "tasks": [],
                        },
                    },
                )
            )
        return frames

    def _lc_event(self, kind: str, node: str, event: Event, data: dict[str, Any]) -> dict[str, Any]:
        return {
            "event": kind,
            "name": node,
            "run_id": self.run_id,
            "tags": [],
            "metadata": self._meta(event, node),
            "data": data,
        }


async def frames_of(
    frames: Frames, events: AsyncIterator[Event], *, start: int, resume: ResumeAt | None
) -> AsyncIterator[bytes]:
    """The SSE bytes: `metadata` first (id `start-0`), then every frame with the id `E-k`: the
    k-th frame since stored event E (E = `start`, the run's cursor, for the frames before its
    first event; token chunks continue the count of the event before them). `resume` (E, k) skips
    the frames of group E up to index k, which the caller re-reads from event E."""
    group, index = start, 1  # index 0 of the start group is the `metadata` frame
    skip_group, skip_to = resume if resume is not None else (start, 0)
    # On a reconnect, `metadata` repeats the id the client gave: it stands where it stood.
    seen = f"{start}-0" if resume is None else f"{skip_group}-{min(skip_to, 2**31)}"
    yield sse("metadata", {"run_id": frames.run_id, "attempt": 1}, seen)

    def framed(items: list[Frame]) -> list[bytes]:
        nonlocal index
        out = []
        for name, data in items:
            if not (group == skip_group and index <= skip_to):
                out.append(sse(name, data, f"{group}-{index}"))
            index += 1
        return out

    if skip_group <= start:
        for chunk in framed(frames.start()):
            yield chunk
    async for event in events:
        if event.type != EventType.LLM_CHUNK:
            group, index = event.event_id, 0
        for chunk in framed(frames.event(event)):
            yield chunk


PING = b": ping\n\n"


async def with_heartbeat(body: AsyncIterator[bytes], seconds: float) -> AsyncIterator[bytes]:
    """`body`, with a comment line (`: ping`) after `seconds` without a frame (none if
    `seconds <= 0`): keeps proxies from closing a quiet stream (a long tool call). A producer
    task reads `body` into a queue, so a timeout never cancels the body mid-read."""
    if seconds <= 0:
        async for chunk in body:
            yield chunk
        return
    queue: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue()

    async def pump() -> None:
        try:
            async for chunk in body:
                await queue.put(chunk)
        except Exception as exc:  # re-raised by the consumer
            await queue.put(exc)
        else:
            await queue.put(None)

    producer = asyncio.create_task(pump(), name="artifactflow-protocol-sse")
    try:
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), seconds)
            except TimeoutError:
                yield PING
                continue
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        producer.cancel()
        with anyio.CancelScope(shield=True), contextlib.suppress(asyncio.CancelledError):
            await producer
        with anyio.CancelScope(shield=True):
            await body.aclose()  # type: ignore[attr-defined]

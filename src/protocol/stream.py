"""A run's events as the Agent Protocol's server-sent events, per stream mode.

Every frame is `event: <mode>` / `data: <JSON>` / `id: <E>-<k>`: the k-th frame since our
stored event E (ids unique and increasing; the form of LangGraph's own `<ms>-<seq>`). A
reconnect with `Last-Event-ID: E-k` re-reads event E and sends what followed frame k; a plain
`E` resumes after event E, `-1` from the run's start. Token chunks are never stored, so the
ones a client missed are not sent again (the model call's full message follows in
`values`/`updates`). The first frame is `metadata {run_id, attempt}` (id `<start>-0`; on a reconnect the id the
client gave).

| mode | made from (frames.py) |
|---|---|
| values | the state the run starts from, then the state after each step (node); `__interrupt__` when paused |
| updates | `{node: {"messages": writes}}` per finished node (`lead_agent`, `tool_execution`); `{"__interrupt__": [...]}` |
| messages-tuple | `[AIMessageChunk, metadata]` per token chunk (event name `messages`), the tool-calling AI message whole, each tool message |
| messages | `messages/metadata`, `messages/partial` (the text so far), `messages/complete` |
| events | `on_chain_start/end` for the graph and each node, `on_chat_model_start/stream/end`, `on_tool_start/end` |
| tasks | each node's start `{id, name, input, triggers}` and result `{id, name, error, result, interrupts}` |
| checkpoints | the checkpoint after the input and after each node (`<message>:<step>`) |
| custom | every stored event of ours, as `{type, event_id, agent, data}` (artifacts, subagents, compactions, ...) |
| debug | `{type: "checkpoint" | "task" | "task_result", step, timestamp, payload}` |

A database outage under a stream that has begun (its 200 and headers are sent: a 503 is no
longer possible) ends it with an `error` frame, `{"error": "DatabaseUnavailable", "message"}`
(LangGraph's own `error` event), and a clean end, never a cut without a word: the run goes on
once the database is back, and a join with `Last-Event-ID` reads the rest. A reader that
attaches while the database is away gets the route's 503 with `Retry-After`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import anyio

from ..client.faults import store_fault
from ..events.envelope import Event, EventType
from .frames import Frame, Frames

log = logging.getLogger("artifactflow.protocol")

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
# the modes whose frames carry a whole state (the branch before the run, then the run's own
# messages): only they need the branch read when a run's stream starts
STATE_MODES = frozenset({"values", "events", "checkpoints", "debug", "tasks"})
ResumeAt = tuple[int, int]  # (event id, index of the last frame seen in its group)


def modes_of(value: Any) -> list[str]:
    modes = [value] if isinstance(value, str) else list(value or ["values"])
    return [m for m in modes if m in MODES] or ["values"]


def sse(name: str, data: Any, event_id: str | None) -> bytes:
    lines = [] if event_id is None else [f"id: {event_id}"]
    lines += [f"event: {name}", "data: " + json.dumps(data, default=str, separators=(",", ":"))]
    return ("\n".join(lines) + "\n\n").encode()


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


async def told_of_outage(body: AsyncIterator[bytes], what: str) -> AsyncIterator[bytes]:
    """`body`, ended by an `error` frame when the database goes away under it (see the module
    docstring); any other error propagates."""
    async with contextlib.aclosing(body):  # type: ignore[type-var]
        try:
            async for chunk in body:
                yield chunk
        except Exception as exc:
            fault = store_fault(exc)
            if fault is None:
                raise
            log.warning("%s: stream ended by %s", what, fault)
            message = (
                f"{fault}; the stream ended here. The run goes on once the database is back: "
                "join its stream again with Last-Event-ID to read the rest"
            )
            yield sse("error", {"error": "DatabaseUnavailable", "message": message}, None)


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

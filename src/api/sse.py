"""Server-sent events: framing, heartbeats, and a response that races client disconnect.

Each stored event goes out as `id: <event_id>`, `event: <type>`, `data: <Event JSON>`, so a
client that reconnects sends `Last-Event-ID` and gets exactly what it missed. `llm_chunk`
events are sent *without* an `id:` line: they are never stored, carry the id of the last stored
event, and cannot be replayed, so they must not move the client's resume position. A client
that lost chunks gets the full text again from `llm_complete` and `complete`.

A comment line (`: ping`) goes out after `server.heartbeat_seconds` without an event, to keep
proxies from closing an idle stream and to notice dead clients.

Built on Starlette's `StreamingResponse` rather than sse-starlette (not a declared dependency,
and it patches uvicorn globally on import): a producer task reads the `Run` into a
queue; the generator consumes it with a heartbeat timeout; the response cancels it all when
the client disconnects or the server drains (`drain_streams`).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

import anyio
from starlette.responses import StreamingResponse

from ..events.envelope import Event, EventType

PING = b": ping\n\n"
RETRY_MS = 2000
SSE_HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}


def format_event(event: Event) -> bytes:
    lines = [] if event.type == EventType.LLM_CHUNK else [f"id: {event.event_id}"]
    lines += [f"event: {event.type}", f"data: {event.model_dump_json()}"]
    return ("\n".join(lines) + "\n\n").encode()


class _End:
    def __init__(self, error: BaseException | None = None) -> None:
        self.error = error


async def event_stream(
    run: AsyncIterable[Event], *, heartbeat: float, streams: set[asyncio.Queue[Any]]
) -> AsyncIterator[bytes]:
    """Frame the events of `run` (a `Run` handle) as SSE with heartbeats (none if
    `heartbeat <= 0`). `streams` registers the queue so a draining server can end the stream
    (`drain_streams`)."""
    events = aiter(run)
    queue: asyncio.Queue[Any] = asyncio.Queue()
    timeout = heartbeat if heartbeat > 0 else None

    async def pump() -> None:
        try:
            async for event in events:
                await queue.put(event)
        except Exception as exc:  # re-raised by the consumer
            await queue.put(_End(exc))
        else:
            await queue.put(_End())

    producer = asyncio.create_task(pump(), name="artifactflow-sse-pump")
    streams.add(queue)
    try:
        yield f"retry: {RETRY_MS}\n\n".encode()
        while True:
            try:
                item = await asyncio.wait_for(queue.get(), timeout)
            except TimeoutError:
                yield PING
                continue
            if isinstance(item, _End):
                if item.error is not None:
                    raise item.error
                return
            yield format_event(item)
    finally:
        streams.discard(queue)
        producer.cancel()
        with anyio.CancelScope(shield=True):  # clean up even while being cancelled
            with contextlib.suppress(asyncio.CancelledError):
                await producer
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()


def drain_streams(streams: set[asyncio.Queue[Any]]) -> None:
    """End every open stream (server shutdown); clients reconnect with Last-Event-ID."""
    for queue in list(streams):
        queue.put_nowait(_End())


class EventStreamResponse(StreamingResponse):
    """`text/event-stream` that always races the body against `http.disconnect`."""

    media_type = "text/event-stream"

    def __init__(
        self,
        content: AsyncIterator[bytes],
        status_code: int = 200,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(content, status_code, headers={**SSE_HEADERS, **(headers or {})})

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        try:
            async with anyio.create_task_group() as group:

                async def body() -> None:
                    await self.stream_response(send)
                    group.cancel_scope.cancel()

                group.start_soon(body)
                await self.listen_for_disconnect(receive)
                group.cancel_scope.cancel()
        except BaseExceptionGroup as group_error:  # surface the body's own error
            raise group_error.exceptions[0] from None

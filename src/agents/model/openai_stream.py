"""The fast wire path of `openai_chat`: JSON bodies encoded with orjson, and streamed chunks
parsed straight into dicts.

The SDK encodes a `post` body with the standard library's `json.dumps` and turns every SSE
chunk into a `ChatCompletionChunk` pydantic object; at 200 rounds the first was 14 % of a
run's CPU and the second most of the SDK's remainder. Here the body goes to `post` as ready
bytes (the SDK sends bytes as they are, with its usual headers), and `DictStream` keeps the
SDK's own SSE decoder, response handling and error types (an `error` object inside the stream
still raises `openai.APIError`) but yields each chunk as the dict orjson parsed, which
`openai_wire.Assembly.add_dict` folds in.
"""

from __future__ import annotations

import functools
import importlib
import json
import ssl
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from typing import Any

import anyio
import anyio.lowlevel
import openai
import orjson

# Newer SDKs run on httpx2: they map its transport errors while streaming and drain the body
# after `[DONE]`, and so do we. Which transport the SDK uses is read off its public default
# client class; the error tuples are built here from the transports' public exceptions (the
# SDK's own helpers for this live in a private module).
_DRAINS = any(cls.__module__.startswith("httpx2") for cls in openai.DefaultAsyncHttpxClient.__mro__)


@functools.cache
def _transport_errors() -> tuple[tuple[type[BaseException], ...], ...]:
    """(timeouts, request errors, stream-consumed errors) of the SDK's transport."""
    if not _DRAINS:  # pragma: no cover - older SDKs map nothing and close the response instead
        return (), (), ()
    import httpx
    import httpx2

    return (
        (httpx2.TimeoutException, httpx.TimeoutException),
        (httpx2.RequestError, ssl.SSLError, anyio.EndOfStream, httpx.RequestError),
        (httpx2.StreamConsumed, httpx.StreamConsumed),
    )


def timeout_exceptions() -> tuple[type[BaseException], ...]:
    return _transport_errors()[0]


def request_exceptions() -> tuple[type[BaseException], ...]:
    return _transport_errors()[1]


def stream_consumed_exceptions() -> tuple[type[BaseException], ...]:
    return _transport_errors()[2]


def dumps_body(body: Mapping[str, Any]) -> bytes:
    """`body` as the UTF-8 JSON the SDK would send (compact, non-ASCII kept, no NaN); the
    standard encoder takes over for what orjson refuses (an integer wider than 64 bits, a
    non-string key)."""
    try:
        return orjson.dumps(body)
    except TypeError:
        return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()


@functools.cache
def _default_ssl_context() -> ssl.SSLContext | None:
    """The SSL context the SDK's HTTP client would build (certifi / SSL_CERT_FILE), made once
    per process: building it loads the CA bundle, ~45 ms, which every new client paid."""
    base = openai.DefaultAsyncHttpxClient.__mro__[1]  # httpx(2).AsyncClient
    module = importlib.import_module(base.__module__.split(".")[0])
    create = getattr(module, "create_ssl_context", None)
    return create() if create is not None else None


def shared_http_client() -> Any:
    """A new HTTP client with the SDK's defaults and the process's one SSL context."""
    context = _default_ssl_context()
    if context is None:  # pragma: no cover - an HTTP library without the helper
        return None
    client = openai.DefaultAsyncHttpxClient(verify=context)
    _probe_cheaply(client)
    return client


# --- the connection pool's keep-alive probe -----------------------------------------------
#
# Before every request (and after every response) the pool checks each idle keep-alive
# connection for a server-side close: it asks the connection's stream whether its socket is
# readable. anyio answers by building a dict of every socket attribute, calling `getpeername`
# each time, to look up the raw socket. With 100 conversations at once (about 100 pooled
# connections) that was 11 probes per request and 6-8 % of the process's CPU. Here the stream
# keeps the raw socket it was connected with and probes it directly: the same `poll` of the
# same socket, the same answer.


@functools.cache
def _fast_probe_backend(library: str) -> Any:
    """The network backend of `library` (httpcore or its successor) with the cheap probe, as
    a class; None if the library is not shaped as this expects (the pool keeps its own)."""
    try:
        anyio_backend = importlib.import_module(f"{library}._backends.anyio")
        readable = importlib.import_module(f"{library}._utils").is_socket_readable
        import anyio.abc

        raw_socket = anyio.abc.SocketAttribute.raw_socket
        base_stream, base_backend = anyio_backend.AnyIOStream, anyio_backend.AnyIOBackend
    except (ImportError, AttributeError):  # pragma: no cover - another HTTP stack
        return None

    class Stream(base_stream):  # type: ignore[misc, valid-type]
        def __init__(self, stream: Any, sock: Any) -> None:
            super().__init__(stream)
            self._sock = sock

        def get_extra_info(self, info: str) -> Any:
            if info == "is_readable":
                return readable(self._sock)
            if info == "socket":
                return self._sock
            return super().get_extra_info(info)

        async def start_tls(self, *args: Any, **kwargs: Any) -> Any:
            wrapped = await super().start_tls(*args, **kwargs)
            return Stream(wrapped._stream, self._sock)  # the TLS stream's socket is this one

    class Backend(base_backend):  # type: ignore[misc, valid-type]
        async def connect_tcp(self, *args: Any, **kwargs: Any) -> Any:
            stream = await super().connect_tcp(*args, **kwargs)
            inner = stream._stream
            return Stream(inner, inner.extra(raw_socket, None))

    return Backend


def _probe_cheaply(client: Any) -> None:
    """Give `client`'s own connection pool the cheap probe (proxy mounts keep theirs). Only a
    pool on its default backend (anyio on asyncio, the engine's loop) is changed."""
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    current = getattr(pool, "_network_backend", None)
    if pool is None or current is None or type(current).__name__ != "AutoBackend":
        return
    backend = _fast_probe_backend(type(pool).__module__.split(".")[0])
    if backend is not None:
        pool._network_backend = backend()


class DictStream(openai.AsyncStream[dict[str, Any]]):
    """An `AsyncStream` whose items are the chunks' plain dicts (no pydantic object per
    chunk); the stream ends at `[DONE]`, like the SDK's.

    The SDK's stream reads the body through a chain of async generators (its SSE decoder,
    the response's byte iterators, the connection pool's) and leaves them suspended when it
    stops at `[DONE]`: the garbage collector then hands each to the event loop's finalizer
    hook, which wakes the loop from another thread (`call_soon_threadsafe`) and runs a task
    to close it: four per model call. Here the rest of the body (after `[DONE]`, usually
    nothing) is drained through the same iterator, so the chain ends by itself, and what is
    left is closed at once. Errors are the SDK's: a timeout or a transport failure while
    reading becomes `APITimeoutError` / `APIConnectionError`, as in its `_iter_events`."""

    def __aiter__(self) -> AsyncIterator[dict[str, Any]]:  # type: ignore[override]
        return self._iterator  # the chunks themselves, without the SDK's wrapping generator

    async def __stream__(self) -> AsyncIterator[dict[str, Any]]:  # type: ignore[override]
        response = self.response
        raw = response.aiter_bytes()
        events = self._decoder.aiter_bytes(raw)
        try:
            while True:
                try:
                    sse = await events.__anext__()
                except StopAsyncIteration:
                    break
                except timeout_exceptions() as err:
                    raise openai.APITimeoutError(request=response.request) from err
                except request_exceptions() as err:
                    raise openai.APIConnectionError(request=response.request) from err
                data = sse.data
                if data.startswith("[DONE]"):
                    if _DRAINS and response.http_version == "HTTP/1.1":
                        await _drain(raw)  # the connection is reused: read the body's end
                    break
                chunk = orjson.loads(data)
                if isinstance(chunk, dict) and chunk.get("error"):
                    error = chunk["error"]
                    message = error.get("message") if isinstance(error, dict) else None
                    if not message or not isinstance(message, str):
                        message = "An error occurred during streaming"
                    raise openai.APIError(message=message, request=response.request, body=error)
                if isinstance(chunk, dict):
                    yield chunk
        finally:
            if isinstance(events, AsyncGenerator):  # suspended at an event or done: no loop trip
                await events.aclose()
            await raw.aclose()
            await response.aclose()


_DRAIN_TIMEOUT = 0.1  # the SDK's (`openai._streaming_cleanup`)


async def _drain(raw: AsyncIterator[bytes]) -> None:
    """What the SDK's `drain_response_async` does after `[DONE]` on HTTP/1.1 (read the rest of
    the body for at most 0.1 s, so the connection can be reused; a transport error there is
    not the call's), but through the iterator the events were read from: when the body ends,
    every generator of the chain ends with it."""
    try:
        with anyio.move_on_after(_DRAIN_TIMEOUT):
            async for _ in raw:
                await anyio.lowlevel.checkpoint()  # the deadline holds on buffered data too
    except request_exceptions() + stream_consumed_exceptions():
        pass

"""The chat-completions wire on aiohttp: one session per endpoint, ready headers, nothing built
per call but the body.

Why not the `openai` SDK's `post`? Per call it builds request options, merges and validates
headers, builds an `httpx` request, and runs it through the SDK's auth-retry wrappers, httpx's
client layers, httpcore's connection pool (which probes every idle connection before each
request) and anyio's stream wrappers: at 100 concurrent conversations that chain was 37 % of
the event loop's busy time, about 2 ms of CPU per model call. aiohttp's client parses HTTP in C
and keeps one pool per session; the same 600 streamed calls cost a tenth of the CPU. The SSE
stream is split into events here (the format is a few lines: `data:` fields, a blank line ends an
event) and each event's JSON is parsed with orjson, as before.

The SDK's error types are kept at the seam, so `openai_chat.classify` and the retry policy see
exactly what they saw before: an HTTP status ≥ 400 raises `openai.APIStatusError` (message
"Error code: N - <the body's error message>", the body and the response headers, so
`Retry-After` and error codes read as before), a timeout `openai.APITimeoutError`, a failure to
connect or send `openai.APIConnectionError` with aiohttp's error as its cause; a drop while the
answer streams arrives as aiohttp's own error (`failures.connection_failure` names it).
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import os
import urllib.parse
import urllib.request
from collections.abc import AsyncGenerator
from typing import Any

import aiohttp
import openai
import orjson

from ...version import __version__
from .base import ResolvedModel
from .openai_stream import default_ssl_context

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_DRAIN_TIMEOUT = 0.1  # after `[DONE]`, the rest of the body (the SDK's bound)
_ERROR_BODY_LIMIT = 1 << 20  # an error body is read up to 1 MiB for its message


@functools.cache
def sdk_http() -> Any:
    """The HTTP library the installed SDK is built on (httpx, or httpx2 in newer SDKs): its
    exceptions carry that library's request and response objects."""
    base = openai.DefaultAsyncHttpxClient.__mro__[1]
    return importlib.import_module(base.__module__.split(".")[0])


class ChatEndpoint:
    """One endpoint + key: its URL, its headers and its session (connection pool), made once
    and reused by every call on the event loop that opened it."""

    def __init__(self, target: ResolvedModel, timeout: float) -> None:
        base = target.base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL
        self.url = base.rstrip("/") + "/chat/completions"
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"artifactflow/{__version__}",
        }
        if target.api_key:
            self.headers["Authorization"] = f"Bearer {target.api_key}"
        # As the SDK's `timeout`: each of connecting and every read is bounded, the whole call
        # is not (`llm.call_deadline` bounds that, retries included).
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout)
        self._session: aiohttp.ClientSession | None = None
        self.request: Any = sdk_http().Request("POST", self.url)  # what the SDK's errors carry
        self.proxy, self.proxy_auth = env_proxy(self.url)


    def _open(self) -> aiohttp.ClientSession:
        session = self._session
        loop = asyncio.get_running_loop()
        if session is None or session.closed or session.loop is not loop:
            session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=0, ssl=default_ssl_context() or True),
                timeout=self._timeout,
                # the proxy is read from the environment once (`env_proxy`): aiohttp's
                # `trust_env` reads it, and ~/.netrc, on a worker thread before every request
                trust_env=False,
                skip_auto_headers=("User-Agent",),
            )
            self._session = session
        return session

    async def post(self, body: bytes) -> aiohttp.ClientResponse:
        """POST `body`; the response once its status is a success (its body unread)."""
        try:
            response = await self._open().post(
                self.url, data=body, headers=self.headers, proxy=self.proxy,
                proxy_auth=self.proxy_auth,
            )
        except TimeoutError as err:
            raise openai.APITimeoutError(request=self.request) from err
        except (aiohttp.ClientError, OSError) as err:
            raise openai.APIConnectionError(request=self.request) from err
        if response.status >= 400:
            raise await self._status_error(response)
        return response

    async def _status_error(self, response: aiohttp.ClientResponse) -> openai.APIStatusError:
        """The SDK's error for an HTTP status: "Error code: N - <message>", with the body."""
        try:
            raw = await response.content.read(_ERROR_BODY_LIMIT)
        except (aiohttp.ClientError, TimeoutError):
            raw = b""
        finally:
            response.close()
        text = raw.decode("utf-8", "replace").strip()
        message = f"Error code: {response.status}"
        body: Any = text or None
        try:
            body = orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
        else:
            error = body.get("error", body) if isinstance(body, dict) else None
            said = error.get("message") if isinstance(error, dict) else None
            if isinstance(said, str) and said:
                message += f" - {said}"
        status = sdk_http().Response(
            response.status, headers=list(response.headers.items()), request=self.request
        )
        return openai.APIStatusError(message, response=status, body=body)

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


def env_proxy(url: str) -> tuple[str | None, aiohttp.BasicAuth | None]:
    """The proxy for `url` from the environment (`HTTPS_PROXY`/`HTTP_PROXY`, `ALL_PROXY`,
    `NO_PROXY`, as the SDK's httpx client reads them), with its credentials; (None, None) for
    a direct connection. Read once per endpoint: the environment of a running process is not
    expected to change its proxy between two model calls."""
    parts = urllib.parse.urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None, None
    if "://" not in proxy:
        proxy = "http://" + proxy
    split = urllib.parse.urlsplit(proxy)
    if split.username is None:
        return proxy, None
    auth = aiohttp.BasicAuth(
        urllib.parse.unquote(split.username), urllib.parse.unquote(split.password or "")
    )
    bare = split._replace(netloc=(split.hostname or "") + (f":{split.port}" if split.port else ""))
    return urllib.parse.urlunsplit(bare), auth


async def json_body(response: aiohttp.ClientResponse, request: Any) -> Any:
    """An unstreamed answer's JSON (timeouts and drops as the SDK's errors)."""
    try:
        raw = await response.read()
    except TimeoutError as err:
        raise openai.APITimeoutError(request=request) from err
    finally:
        response.release()
    return orjson.loads(raw)


async def sse_chunks(
    response: aiohttp.ClientResponse, request: Any
) -> AsyncGenerator[dict[str, Any], None]:
    """The JSON objects of a chat-completions SSE stream, up to `[DONE]` or the body's end.

    An `error` object in the stream raises `openai.APIError`, a read timeout
    `openai.APITimeoutError`; a dropped connection raises aiohttp's error as it is. The
    response is released for reuse when the body was read to its end, closed otherwise (the
    caller stopped early, or something failed)."""
    buffer = b""
    data: list[bytes] = []
    finished = False
    closing = _close_watch(response)
    try:
        async for piece in response.content.iter_any():
            buffer += piece
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line.endswith(b"\r"):
                    line = line[:-1]
                if line:
                    if line.startswith(b"data:"):
                        value = line[5:]
                        data.append(value[1:] if value.startswith(b" ") else value)
                    continue  # other fields (event, id, retry) and comments carry nothing here
                if not data:
                    continue
                payload, data = b"\n".join(data), []
                if payload.startswith(b"[DONE]"):
                    finished = await _drain(response)
                    return
                chunk = _chunk(payload, request)
                if chunk is not None:
                    yield chunk
        _raise_if_reset(closing)
        if buffer.startswith(b"data:"):  # a last event without its blank line
            value = buffer[5:]
            data.append(value[1:] if value.startswith(b" ") else value)
        payload = b"\n".join(data)
        if data and not payload.startswith(b"[DONE]"):
            chunk = _chunk(payload, request)
            if chunk is not None:
                yield chunk
        finished = True
    except TimeoutError as err:
        raise openai.APITimeoutError(request=request) from err
    except aiohttp.ClientError as err:  # the connection broke while the answer streamed
        raise openai.APIConnectionError(request=request) from err
    finally:
        if finished:
            response.release()
        else:
            response.close()


def _close_watch(response: aiohttp.ClientResponse) -> asyncio.Future[None] | None:
    """For a body that ends when the connection closes (HTTP/1.0, no length, not chunked): the
    connection's `closed` future, which says whether it closed cleanly or was reset. aiohttp
    ends such a body at either, so a reset would otherwise pass for the end of the answer."""
    if (
        response.content_length is not None
        or "chunked" in response.headers.get("Transfer-Encoding", "").lower()
    ):
        return None
    protocol = response.connection.protocol if response.connection is not None else None
    closing = protocol.closed if protocol is not None else None
    if closing is not None:
        closing.add_done_callback(lambda f: f.cancelled() or f.exception())  # always retrieved
    return closing


def _raise_if_reset(closing: asyncio.Future[None] | None) -> None:
    if closing is not None and closing.done() and not closing.cancelled():
        error = closing.exception()
        if error is not None:
            raise aiohttp.ClientConnectionError(str(error)) from error


def _chunk(payload: bytes, request: Any) -> dict[str, Any] | None:
    chunk = orjson.loads(payload)
    if not isinstance(chunk, dict):
        return None
    if chunk.get("error"):
        error = chunk["error"]
        message = error.get("message") if isinstance(error, dict) else None
        if not message or not isinstance(message, str):
            message = "An error occurred during streaming"
        raise openai.APIError(message=message, request=request, body=error)
    return chunk


async def _drain(response: aiohttp.ClientResponse) -> bool:
    """Read what follows `[DONE]` (usually nothing) for at most 0.1 s, so the connection can
    serve the next call; whether the body ended."""
    try:
        async with asyncio.timeout(_DRAIN_TIMEOUT):
            while await response.content.readany():
                pass
    except (TimeoutError, aiohttp.ClientError):
        return False
    return True

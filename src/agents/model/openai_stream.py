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
from collections.abc import AsyncIterator, Mapping
from typing import Any

import openai
import orjson

try:  # newer SDKs drain an HTTP/1.1 body after `[DONE]` so the connection can be reused
    from openai._streaming_cleanup import drain_response_async
except ImportError:  # pragma: no cover - older SDKs close the response instead
    drain_response_async = None


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
    return openai.DefaultAsyncHttpxClient(verify=context)


class DictStream(openai.AsyncStream[dict[str, Any]]):
    """An `AsyncStream` whose items are the chunks' plain dicts (no pydantic object per
    chunk); the stream ends at `[DONE]`, like the SDK's."""

    async def __stream__(self) -> AsyncIterator[dict[str, Any]]:  # type: ignore[override]
        response = self.response
        try:
            async for sse in self._iter_events():
                data = sse.data
                if data.startswith("[DONE]"):
                    if drain_response_async is not None and response.http_version == "HTTP/1.1":
                        await drain_response_async(response)
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
            await response.aclose()

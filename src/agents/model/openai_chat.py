"""`chat_completions`: the OpenAI chat-completions API, against any compatible endpoint.

Calls go over `openai_http` (aiohttp, one session per endpoint + key, reused across runs)
with the retries ours (`retry.with_retries`), so the policy (which errors, how many times,
backoff with jitter, the `Retry-After` cap) is ours and visible in metrics. The body
(`openai_wire.request_body`) is already valid JSON-ready data, encoded with orjson; streamed
chunks arrive as plain dicts. Failures keep the `openai` SDK's exception types
(`APIStatusError`, `APITimeoutError`, `APIConnectionError`), which `classify` maps to ours.

Two bounds apply to each call: `llm.timeout` per read (the SDK's), and `llm.call_deadline` for
the whole call, retries included, so a server that keeps streaming cannot hold a run forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import logging
import time
from typing import Any

import openai
from openai.types.chat import ChatCompletion

from ...errors import ContextOverflowError, FatalLLMError, LLMError, RetryableLLMError
from ...settings import LLMSettings
from .base import (
    DeltaCallback,
    ModelRequest,
    ModelResponse,
    ResolvedModel,
    is_context_overflow,
    send_delta,
)
from .failures import AnswerCap, connection_failure
from .openai_http import ChatEndpoint, json_body, sse_chunks
from .openai_stream import dumps_body
from .openai_wire import Assembly, output_limit, request_body
from .retry import Attempt, Failure, Sleep, with_retries

log = logging.getLogger("artifactflow.model")

# endpoints whose empty stream to a streamed tool turn was already reported in this process
_WARNED: set[tuple[str | None, str]] = set()


class OpenAIChatModel:
    """Streamed chat completions with native tool calling and usage in the last chunk.

    A profile with `stream_tools: false` gets unstreamed requests for the turns that offer
    tools (its server cannot stream tool calls); the text then reaches `on_delta` in one piece.
    A server that answers such a streamed request with an empty stream (llama-cpp-python) is
    found out at its first tool turn: that turn is sent again unstreamed, and so are the
    endpoint's later tool turns (one warning says so).
    """

    api = "chat_completions"

    def __init__(self, settings: LLMSettings, *, sleep: Sleep = asyncio.sleep) -> None:
        self.settings = settings
        self._sleep = sleep
        self._endpoints: dict[tuple[str | None, str], ChatEndpoint] = {}
        # endpoints that answered a streamed request offering tools with an empty stream
        # (llama-cpp-python: "Automatic streaming tool choice is not supported")
        self._unstreamed: set[tuple[str | None, str]] = set()

    def _stream_no_tools(self, request: ModelRequest) -> None:
        """Send this endpoint's turns that offer tools unstreamed from now on, and say so once
        per process (its profile's `stream_tools: false` does the same from the start): the
        model of every run, and every retry of a call, would otherwise say it again."""
        target = request.target
        self._unstreamed.add(target.client_key)
        if target.client_key in _WARNED:
            return
        _WARNED.add(target.client_key)
        log.warning(
            "the model server at %s sent an empty stream to a streamed request offering tools "
            "(llama-cpp-python does): its tool turns are sent unstreamed from now on; set "
            "`stream_tools: false` in its profile (config/models.yaml) to start that way",
            target.base_url or "the default endpoint",
        )

    def _endpoint(self, target: ResolvedModel) -> ChatEndpoint:
        endpoint = self._endpoints.get(target.client_key)
        if endpoint is None:
            endpoint = ChatEndpoint(target, self.settings.timeout)
            self._endpoints[target.client_key] = endpoint
        return endpoint

    async def aclose(self) -> None:
        for endpoint in self._endpoints.values():
            await endpoint.aclose()
        self._endpoints.clear()

    def _streams(self, request: ModelRequest) -> bool:
        return not request.tools or (
            request.target.stream_tools and request.target.client_key not in self._unstreamed
        )

    async def complete(
        self, request: ModelRequest, on_delta: DeltaCallback | None = None
    ) -> ModelResponse:
        body = request_body(request, self.settings, stream=self._streams(request))

        async def run(attempt: Attempt) -> ModelResponse:
            if self._streams(request):  # asked again: a retry after an empty stream is not streamed
                response = await self._once(request, body, on_delta, attempt, stream=True)
                if response is not None:
                    return response
                self._stream_no_tools(request)  # then this turn again, unstreamed
            plain = request_body(request, self.settings, stream=False)
            response = await self._once(request, plain, on_delta, attempt, stream=False)
            assert response is not None
            return response

        deadline = self.settings.call_deadline
        try:
            async with asyncio.timeout(deadline):
                return await with_retries(
                    run, classify, self.settings, agent=request.agent, sleep=self._sleep
                )
        except TimeoutError:
            raise RetryableLLMError(
                f"model call exceeded llm.call_deadline ({deadline:g} s) and was stopped; raise "
                "llm.call_deadline, or lower max_output_tokens if the model writes too long",
                agent=request.agent,
            ) from None

    async def _once(
        self,
        request: ModelRequest,
        body: dict[str, Any],
        on_delta: DeltaCallback | None,
        attempt: Attempt,
        *,
        stream: bool,
    ) -> ModelResponse | None:
        """One attempt: streamed (text reaches `on_delta` as it comes) or not (in one piece,
        once the response is assembled). None: a streamed request offering tools got an empty
        stream, which the caller sends again unstreamed."""
        endpoint = self._endpoint(request.target)
        assembly = Assembly(request.target.model)
        cap = AnswerCap(output_limit(request, self.settings)[1])  # a server may ignore max_tokens
        response = await endpoint.post(dumps_body(body))
        if stream:
            async with contextlib.aclosing(sse_chunks(response, endpoint.request)) as chunks:
                async for chunk in chunks:
                    text = cap.take(assembly.add_dict(chunk))
                    if text:
                        attempt.output_seen = True
                        await send_delta(on_delta, text)
                    if cap.full:
                        break
            if assembly.chunks == 0 and request.tools:
                return None
            cap.finish(assembly)
            return cap.bound(assembly.response(offered_tools=bool(request.tools)))
        completion = ChatCompletion.model_validate(await json_body(response, endpoint.request))
        text = cap.take(assembly.add_completion(completion))
        result = cap.bound(assembly.response(offered_tools=bool(request.tools)))
        if text:
            attempt.output_seen = True
            await send_delta(on_delta, text)
        return result


def classify(exc: Exception) -> Failure:
    """An `openai` exception → which `LLMError` it is, and a short reason in words."""
    if isinstance(exc, LLMError):
        return Failure(type(exc), str(exc), getattr(exc, "retry_after", None))
    if isinstance(exc, openai.APITimeoutError):
        return Failure(RetryableLLMError, "request timed out", timed_out=True)
    if (dropped := connection_failure(exc)) is not None:
        return dropped
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        reason = f"HTTP {status}: {_said(exc)}"
        if is_context_overflow(status, exc.message or str(exc), _code(exc)):
            return Failure(ContextOverflowError, reason)
        if status >= 500 or status in (408, 409, 429):
            return Failure(RetryableLLMError, reason, retry_after(exc.response.headers))
        return Failure(FatalLLMError, reason)
    return Failure(FatalLLMError, f"{type(exc).__name__}: {exc}")


def _said(exc: openai.APIStatusError) -> str:
    """What the server said: the SDK's message is only "Error code: 500" when the body is not
    OpenAI's error shape, so the body's own text (one line, cut) is added to it."""
    message = exc.message or str(exc)
    if message.strip() != f"Error code: {exc.status_code}":
        return message
    try:
        body = " ".join(exc.response.text.split())[:300]
    except Exception:  # a streamed body that cannot be read again
        body = ""
    return f"{message}: {body}" if body else f"{message} (the server sent no reason)"


def _code(exc: openai.APIStatusError) -> str | None:
    code = getattr(exc, "code", None)
    if code is None and isinstance(exc.body, dict):
        error = exc.body.get("error")
        code = error.get("code") if isinstance(error, dict) else exc.body.get("code")
    return code if isinstance(code, str) else None


def retry_after(headers: Any) -> float | None:
    """Seconds a server asked us to wait: `retry-after-ms`, or `retry-after` as seconds or
    an HTTP date. None when absent or unreadable."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return float(millis) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return when.timestamp() - time.time()

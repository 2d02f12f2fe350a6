"""`chat_completions`: the OpenAI chat-completions API, against any compatible endpoint.

We drive `openai.AsyncOpenAI` with the SDK's own retries switched off and retry in
`retry.with_retries`, so the policy (which errors, how many times, backoff with jitter, the
`Retry-After` cap) is ours and visible in metrics. One `AsyncOpenAI` is cached per
endpoint + key, so its connection pool is reused across runs.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from typing import Any

import openai

from ...errors import ContextOverflowError, FatalLLMError, LLMError, RetryableLLMError
from ...settings import LLMSettings
from ..models import ResolvedModel
from .base import DeltaCallback, ModelRequest, ModelResponse, Usage, is_context_overflow, send_delta
from .retry import Attempt, Failure, Sleep, with_retries


class OpenAIChatModel:
    """Streamed chat completions with native tool calling and usage in the last chunk."""

    api = "chat_completions"

    def __init__(self, settings: LLMSettings, *, sleep: Sleep = asyncio.sleep) -> None:
        self.settings = settings
        self._sleep = sleep
        self._clients: dict[tuple[str | None, str], openai.AsyncOpenAI] = {}

    def _client(self, target: ResolvedModel) -> openai.AsyncOpenAI:
        client = self._clients.get(target.client_key)
        if client is None:
            client = openai.AsyncOpenAI(
                base_url=target.base_url,
                api_key=target.api_key,
                max_retries=0,
                timeout=self.settings.timeout,
            )
            self._clients[target.client_key] = client
        return client

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()

    async def complete(
        self, request: ModelRequest, on_delta: DeltaCallback | None = None
    ) -> ModelResponse:
        async def run(attempt: Attempt) -> ModelResponse:
            return await self._stream_once(request, on_delta, attempt)

        return await with_retries(
            run, classify, self.settings, agent=request.agent, sleep=self._sleep
        )

    async def _stream_once(
        self, request: ModelRequest, on_delta: DeltaCallback | None, attempt: Attempt
    ) -> ModelResponse:
        target = request.target
        params: dict[str, Any] = dict(target.params)
        if self.settings.temperature is not None:
            params.setdefault("temperature", self.settings.temperature)
        if request.tools:
            params["tools"] = request.tools
        stream = await self._client(target).chat.completions.create(
            model=target.model,
            messages=request.messages,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
            **params,
        )
        content: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage = None
        finish_reason = None
        response_model = target.model
        async with stream:
            async for chunk in stream:
                if chunk.model:
                    response_model = chunk.model
                if chunk.usage is not None:
                    usage = chunk.usage
                for choice in chunk.choices:
                    if choice.finish_reason:
                        finish_reason = choice.finish_reason
                    delta = choice.delta
                    if delta is None:
                        continue
                    if delta.content:
                        content.append(delta.content)
                        attempt.output_seen = True
                        await send_delta(on_delta, delta.content)
                    for part in delta.tool_calls or []:
                        slot = calls.setdefault(
                            part.index, {"id": None, "name": "", "arguments": ""}
                        )
                        if part.id:
                            slot["id"] = part.id
                        if part.function is not None:
                            if part.function.name:
                                slot["name"] += part.function.name
                            if part.function.arguments:
                                slot["arguments"] += part.function.arguments
        tool_calls = [
            {
                "id": call["id"] or f"call_{index}_{random.getrandbits(32):08x}",
                "name": call["name"],
                "arguments": call["arguments"],
            }
            for index, call in sorted(calls.items())
        ]
        return ModelResponse(
            content="".join(content),
            tool_calls=tool_calls,
            model=response_model,
            usage=(
                Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0)
                if usage is not None
                else None
            ),
            finish_reason=finish_reason,
        )


def classify(exc: Exception) -> Failure:
    """An `openai` exception → which `LLMError` it is, and a short reason in words."""
    if isinstance(exc, LLMError):
        return Failure(type(exc), str(exc), getattr(exc, "retry_after", None))
    if isinstance(exc, openai.APITimeoutError):
        return Failure(RetryableLLMError, "request timed out")
    if isinstance(exc, openai.APIConnectionError):
        return Failure(RetryableLLMError, f"connection failed: {exc.__cause__ or exc}")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        reason = f"HTTP {status}: {exc.message or exc}"
        if is_context_overflow(status, exc.message or str(exc), _code(exc)):
            return Failure(ContextOverflowError, reason)
        if status >= 500 or status in (408, 409, 429):
            return Failure(RetryableLLMError, reason, retry_after(exc.response.headers))
        return Failure(FatalLLMError, reason)
    return Failure(FatalLLMError, f"{type(exc).__name__}: {exc}")


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

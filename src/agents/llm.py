"""The LLM client: one streamed chat completion per agent step, with bounded retries.

We drive `openai.AsyncOpenAI` with the SDK's own retries switched off and retry here, so the
policy (which errors, how many times, backoff with jitter) is ours and visible in metrics. A
retry only happens before the first token has been streamed: once text has reached the user,
replaying the call would show it twice.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import openai

from ..errors import LLMError
from ..settings import LLMSettings
from .models import ResolvedModel

DeltaCallback = Callable[[str], Awaitable[None] | None]


@dataclass
class LLMResponse:
    """What one completion produced. Tool-call `arguments` stay raw strings: parsing them is
    the tool node's job, so malformed JSON becomes a tool error the model can correct."""

    content: str
    tool_calls: list[dict[str, Any]]
    model: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    duration_ms: float = 0.0
    attempts: int = 1
    finish_reason: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def _is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, openai.APITimeoutError | openai.APIConnectionError):
        return True
    if isinstance(exc, openai.RateLimitError):
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code >= 500 or exc.status_code in (408, 409, 429)
    return False


def _describe(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError):
        message = exc.message or str(exc)
        return f"HTTP {exc.status_code}: {message}"
    if isinstance(exc, openai.APITimeoutError):
        return "request timed out"
    if isinstance(exc, openai.APIConnectionError):
        return f"connection failed: {exc.__cause__ or exc}"
    return f"{type(exc).__name__}: {exc}"


class LLMClient:
    """Caches one `AsyncOpenAI` per endpoint+key and runs streamed completions."""

    def __init__(self, settings: LLMSettings) -> None:
        self.settings = settings
        self._clients: dict[tuple[str | None, str], openai.AsyncOpenAI] = {}

    def _client(self, model: ResolvedModel) -> openai.AsyncOpenAI:
        client = self._clients.get(model.client_key)
        if client is None:
            client = openai.AsyncOpenAI(
                base_url=model.base_url,
                api_key=model.api_key,
                max_retries=0,
                timeout=self.settings.timeout,
            )
            self._clients[model.client_key] = client
        return client

    async def aclose(self) -> None:
        for client in self._clients.values():
            await client.close()
        self._clients.clear()

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.settings.backoff_max)
        delay = self.settings.backoff_base * (2 ** (attempt - 1))
        return min(delay, self.settings.backoff_max) * (0.5 + random.random() / 2)

    async def complete(
        self,
        model: ResolvedModel,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        on_delta: DeltaCallback | None = None,
        agent: str | None = None,
    ) -> LLMResponse:
        attempts = 0
        started = time.perf_counter()
        while True:
            attempts += 1
            streamed = [False]
            try:
                response = await self._stream_once(model, messages, tools, on_delta, streamed)
            except Exception as exc:
                if (
                    _is_retryable(exc)
                    and not streamed[0]
                    and attempts <= self.settings.max_retries
                ):
                    await asyncio.sleep(self._backoff(attempts, _retry_after(exc)))
                    continue
                reason = _describe(exc)
                suffix = f" after {attempts} attempts" if attempts > 1 else ""
                raise LLMError(
                    f"model call failed{suffix}: {reason}",
                    agent=agent,
                    retryable=_is_retryable(exc),
                ) from exc
            response.attempts = attempts
            response.duration_ms = (time.perf_counter() - started) * 1000
            return response

    async def _stream_once(
        self,
        model: ResolvedModel,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        on_delta: DeltaCallback | None,
        streamed: list[bool],
    ) -> LLMResponse:
        params: dict[str, Any] = dict(model.params)
        if self.settings.temperature is not None:
            params.setdefault("temperature", self.settings.temperature)
        if tools:
            params["tools"] = tools
        stream = await self._client(model).chat.completions.create(
            model=model.model,
            messages=messages,  # type: ignore[arg-type]
            stream=True,
            stream_options={"include_usage": True},
            **params,
        )
        content: list[str] = []
        calls: dict[int, dict[str, Any]] = {}
        usage = None
        finish_reason = None
        response_model = model.model
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
                        streamed[0] = True
                        if on_delta is not None:
                            result = on_delta(delta.content)
                            if result is not None:
                                await result
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
        tool_calls = []
        for index in sorted(calls):
            call = calls[index]
            tool_calls.append(
                {
                    "id": call["id"] or f"call_{index}_{random.getrandbits(32):08x}",
                    "name": call["name"],
                    "arguments": call["arguments"],
                }
            )
        return LLMResponse(
            content="".join(content),
            tool_calls=tool_calls,
            model=response_model,
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            finish_reason=finish_reason,
        )


def _retry_after(exc: BaseException) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    value = response.headers.get("retry-after")
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None

"""Retries with backoff, shared by every HTTP model implementation.

The policy is ours, not an SDK's, so it is the same for every provider and visible in metrics
(`attempts`): retry only `RetryableLLMError`s, at most `llm.max_retries` times, with
exponential backoff and jitter, and never once output has reached the user: replaying the
call would show it twice. A server's `Retry-After` is honoured but capped at
`llm.backoff_max`: a server asking for 30 s is retried after `backoff_max`, so one slow
provider cannot stall a run for minutes.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ...errors import LLMError, RetryableLLMError
from ...settings import LLMSettings
from .base import ModelResponse

Sleep = Callable[[float], Awaitable[None]]


@dataclass
class Attempt:
    """One try at a completion; the implementation sets `output_seen` when a delta was sent."""

    number: int
    output_seen: bool = False


@dataclass(frozen=True)
class Failure:
    """A provider exception, classified: which `LLMError` to raise, and why, in words."""

    kind: type[LLMError]
    reason: str
    retry_after: float | None = None


def backoff(policy: LLMSettings, attempt: int, retry_after: float | None) -> float:
    """Seconds to wait before retry number `attempt` (1-based)."""
    if retry_after is not None:
        return min(max(retry_after, 0.0), policy.backoff_max)
    delay = policy.backoff_base * (2 ** (attempt - 1))
    return min(delay, policy.backoff_max) * (0.5 + random.random() / 2)


async def with_retries(
    run: Callable[[Attempt], Awaitable[ModelResponse]],
    classify: Callable[[Exception], Failure],
    policy: LLMSettings,
    *,
    agent: str | None = None,
    sleep: Sleep = asyncio.sleep,
) -> ModelResponse:
    """Run `run` until it succeeds or a failure may not be retried; raise a typed `LLMError`."""
    number = 0
    while True:
        number += 1
        attempt = Attempt(number)
        try:
            response = await run(attempt)
        except Exception as exc:
            failure = classify(exc)
            if (
                issubclass(failure.kind, RetryableLLMError)
                and not attempt.output_seen
                and number <= policy.max_retries
            ):
                await sleep(backoff(policy, number, failure.retry_after))
                continue
            suffix = f" after {number} attempts" if number > 1 else ""
            message = f"model call failed{suffix}: {failure.reason}"
            if issubclass(failure.kind, RetryableLLMError):
                raise RetryableLLMError(
                    message, agent=agent, retry_after=failure.retry_after
                ) from exc
            raise failure.kind(message, agent=agent) from exc
        response.attempts = number
        return response

"""Retries with backoff, shared by every HTTP model implementation.

The policy is ours, not an SDK's, so it is the same for every provider and visible in metrics
(`attempts`): retry only `RetryableLLMError`s, at most `llm.max_retries` times, with
exponential backoff and jitter, and never once output has reached the user: replaying the
call would show it twice. A server's `Retry-After` is honoured but capped at
`llm.backoff_max`: a server asking for 30 s is retried after `backoff_max`, so one slow
provider cannot stall a run for minutes.

A timeout is retried at most `llm.timeout_retries` times (1), within `max_retries`: a server
that sent nothing for `llm.timeout` seconds is slow, not flaky, and a local one serving one
request at a time is still working on the abandoned one, so the next try waits behind it
(measured with Gemma 3 270M on llama-cpp-python: four tries at 120 s each, 8 minutes, before
the run failed). Its reason says which bound was hit and what to change.
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
    timed_out: bool = False  # no answer within `llm.timeout` (retried `timeout_retries` times)


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
    number = timeouts = 0
    while True:
        number += 1
        attempt = Attempt(number)
        try:
            response = await run(attempt)
        except Exception as exc:
            failure = classify(exc)
            timeouts += failure.timed_out
            if (
                issubclass(failure.kind, RetryableLLMError)
                and not attempt.output_seen
                and number <= policy.max_retries
                and timeouts <= policy.timeout_retries
            ):
                await sleep(backoff(policy, number, failure.retry_after))
                continue
            suffix = f" after {number} attempts" if number > 1 else ""
            message = f"model call failed{suffix}: {failure.reason}"
            if failure.timed_out:
                message += _timeout_hint(policy, timeouts)
            if issubclass(failure.kind, RetryableLLMError):
                raise RetryableLLMError(
                    message, agent=agent, retry_after=failure.retry_after
                ) from exc
            raise failure.kind(message, agent=agent) from exc
        response.attempts = number
        return response


def _timeout_hint(policy: LLMSettings, timeouts: int) -> str:
    """What a timed-out call's reason adds: the bound, and what to change."""
    tries = f"{timeouts} tries" if timeouts > 1 else "one try"
    return (
        f" (no answer within llm.timeout = {policy.timeout:g} s, {tries}; a model this slow "
        "needs a lower max_output_tokens, a higher llm.timeout, or a faster model)"
    )

"""The model seam: what a node needs from a language model, and nothing provider-specific.

A `Model` streams one completion with tools: text deltas go to `on_delta` as they arrive, and
the finished response carries the text, the tool calls, the usage the provider reported (or
`None` when it sent none) and the finish reason. Failures are raised as one of three
`LLMError` subclasses (`RetryableLLMError`, `ContextOverflowError`, `FatalLLMError`), so the
nodes, and later context compaction, act on the kind of failure, not on a provider's types.

Messages and tool specs use the OpenAI chat format (`{"role", "content", "tool_calls"}`,
`{"type": "function", "function": {...}}`): it is what agent memories store, and an
implementation for another API (the Responses API, Anthropic) converts at its edge.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from ...shapes import ChatMessage, JsonObject, RawToolCall

DeltaCallback = Callable[[str], Awaitable[None] | None]


@dataclass(frozen=True)
class ResolvedModel:
    """A concrete endpoint + model pair, ready to build a client for."""

    profile: str | None
    model: str
    base_url: str | None
    api_key: str
    params: dict[str, Any] = field(default_factory=dict)
    api: str = "chat_completions"
    context_window: int | None = None  # None: the `context.default_window` setting applies
    input_per_mtok: float | None = None
    output_per_mtok: float | None = None
    max_output_tokens: int | None = None
    tool_choice: str | dict[str, Any] | None = None
    stream_tools: bool = True

    @property
    def client_key(self) -> tuple[str | None, str]:
        return (self.base_url, self.api_key)


@dataclass(frozen=True)
class Usage:
    """Tokens as the provider counted them."""

    prompt_tokens: int
    completion_tokens: int

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class ModelRequest:
    """One completion to run: where (`target`), what (`messages`, `tools`), for whom.

    `max_output_tokens` and `tool_choice` are the agent's overrides of its profile's (None:
    the profile's, then the `llm` settings' default)."""

    target: ResolvedModel
    messages: list[ChatMessage]
    tools: list[JsonObject] | None = None  # OpenAI function specs
    agent: str | None = None
    max_output_tokens: int | None = None
    tool_choice: str | JsonObject | None = None


@dataclass
class ModelResponse:
    """What one completion produced. Tool-call `arguments` stay raw strings: parsing them is
    the tool node's job, so malformed JSON becomes a tool error the model can correct."""

    content: str
    tool_calls: list[RawToolCall]
    model: str
    usage: Usage | None = None
    finish_reason: str | None = None
    attempts: int = 1


@runtime_checkable
class Model(Protocol):
    """A provider API. One instance serves every profile of its API in the process: the
    endpoint, key, model name and parameters arrive with each request (`request.target`)."""

    async def complete(
        self, request: ModelRequest, on_delta: DeltaCallback | None = None
    ) -> ModelResponse:
        """Stream one completion. Raise `RetryableLLMError`, `ContextOverflowError` or
        `FatalLLMError` on failure; never retry once a delta has reached `on_delta`."""
        ...

    async def aclose(self) -> None:
        """Release connections; the process is shutting down."""
        ...


async def send_delta(on_delta: DeltaCallback | None, text: str) -> None:
    """Call a sync or async delta callback."""
    if on_delta is None:
        return
    result = on_delta(text)
    if result is not None:
        await result


_OVERFLOW = re.compile(
    r"context[ _](length|window|size)|maximum context|too many tokens|prompt is too long"
    r"|reduce the length of the (messages|prompt)",
    re.IGNORECASE,
)


def is_context_overflow(status: int | None, message: str, code: str | None = None) -> bool:
    """Whether a provider's refusal means "the request does not fit the context window".

    The code `context_length_exceeded` (OpenAI and most compatible servers) is decisive; an
    HTTP 400 or 413 whose message says so (vLLM, llama.cpp, Anthropic wording) counts too.
    """
    if code == "context_length_exceeded":
        return True
    return status in (400, 413) and bool(_OVERFLOW.search(message or ""))

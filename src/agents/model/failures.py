"""Naming why a model call failed, and bounding what an answer may hold (issue 22: D7, D8).

Both sit beside the streaming client (`openai_chat.py`), which calls them at two seams:

- **A dropped connection names its cause.** `openai.APIConnectionError` often says nothing
  itself ("Connection error.") and httpx's `ReadError` for a reset is empty; the reason is
  further down the exception chain (`ConnectionResetError: [Errno 104] ...`). A drop while
  the answer streams is not wrapped by the SDK at all: httpx's error arrives as itself. Both
  are retryable (the retry policy still never retries once text was shown), and the reason
  reads e.g. "connection failed: connection reset by peer (ReadError <- BrokenResourceError <-
  ConnectionResetError: [Errno 104] Connection reset by peer)".
- **An answer is cut at the output limit plus a margin.** A server that ignores `max_tokens`
  (a proxy that drops it, a local server with its own idea) can send megabytes, which would be
  stored in the event log and the conversation. `AnswerCap` counts characters (no tokenizer:
  a generous characters-per-token ceiling, plus a margin), stops reading once the bound is
  passed, keeps what fits and marks the answer: finish reason "length" and a note at its end.
"""

from __future__ import annotations

import dataclasses
import ssl
from typing import Any

import aiohttp
import httpx
import openai

from ...errors import RetryableLLMError
from .base import ModelResponse
from .retry import Failure

# --- D7: a dropped connection --------------------------------------------------------------------

_KNOWN: list[tuple[type[BaseException], str]] = [
    (ConnectionResetError, "connection reset by peer"),
    (ConnectionRefusedError, "connection refused"),
    (ConnectionAbortedError, "connection aborted"),
    (BrokenPipeError, "connection closed by peer while sending"),
    (httpx.RemoteProtocolError, "the server closed the connection before the answer was complete"),
    (httpx.ConnectTimeout, "timed out connecting"),
    (httpx.ReadTimeout, "timed out waiting for data"),
    (ssl.SSLError, "TLS error"),
    (httpx.ConnectError, "could not connect"),
    (httpx.ReadError, "the connection broke while reading"),
    (httpx.WriteError, "the connection broke while sending"),
    # the same, as aiohttp (`openai_http`) names them
    (aiohttp.ServerDisconnectedError, "the server closed the connection before the answer was complete"),
    (aiohttp.ClientPayloadError, "the server closed the connection before the answer was complete"),
    (aiohttp.ClientConnectorError, "could not connect"),
]


def _chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def describe_drop(exc: BaseException) -> str:
    """What broke the connection, in words, then the exception chain that says so."""
    chain = _chain(exc)
    if isinstance(exc, openai.APIConnectionError) and len(chain) > 1:
        chain = chain[1:]  # the SDK's own wrapper says only "Connection error."
    # The deepest known cause is the most precise (a reset under a generic read error).
    phrase = next(
        (words for link in reversed(chain) for kind, words in _KNOWN if isinstance(link, kind)),
        "connection lost",
    )
    links: list[str] = []
    for link in chain:
        text = str(link).strip()
        named = f"{type(link).__name__}: {text}" if text else type(link).__name__
        if not links or links[-1] != named:  # httpx re-raises httpcore's error of the same name
            links.append(named)
    return f"{phrase} ({' <- '.join(links)})"


def connection_failure(exc: Exception) -> Failure | None:
    """The failure of a call whose connection dropped (before or while the answer streamed);
    None for anything else (a timeout, an HTTP status, ...: `classify` decides those)."""
    if isinstance(exc, openai.APITimeoutError):
        return None
    if isinstance(exc, openai.APIConnectionError):
        return Failure(RetryableLLMError, f"connection failed: {describe_drop(exc)}")
    if isinstance(exc, httpx.TransportError | aiohttp.ClientError):  # while streaming: not wrapped
        return Failure(
            RetryableLLMError, f"connection failed while streaming the answer: {describe_drop(exc)}"
        )
    return None


# --- D8: an answer larger than the output limit ---------------------------------------------------

MAX_CHARS_PER_TOKEN = 8  # a generous ceiling (English averages ~4; long whitespace runs more)
MARGIN = 1.25
UNBOUNDED_CHARS = 4_000_000  # with no output limit configured at all


class AnswerCap:
    """Keeps one answer within `limit_tokens` × `MAX_CHARS_PER_TOKEN` × `MARGIN` characters
    (text and tool-call arguments together)."""

    def __init__(self, limit_tokens: int | None) -> None:
        self.limit_tokens = limit_tokens
        self.max_chars = (
            UNBOUNDED_CHARS
            if limit_tokens is None
            else int(limit_tokens * MAX_CHARS_PER_TOKEN * MARGIN)
        )
        self.seen = 0
        self.full = False  # the bound was passed: stop reading

    def take(self, text: str) -> str:
        """Count a streamed piece of text; what of it may still be shown."""
        room = self.max_chars - self.seen
        self.seen += len(text)
        if self.seen > self.max_chars:
            self.full = True
            return text[: max(0, room)]
        return text

    def finish(self, assembly: Any) -> None:
        """Before the answer is assembled: a stream stopped by the cap is complete as far as
        it goes (finish reason "length"), not a stream cut short."""
        if self.full:
            assembly.finish_reason = "length"

    def bound(self, response: ModelResponse) -> ModelResponse:
        """The answer cut to the bound (text first, then tool-call arguments), marked."""
        size = len(response.content) + sum(len(c["arguments"]) for c in response.tool_calls)
        if not self.full and size <= self.max_chars:
            return response
        content = response.content[: self.max_chars]
        room = self.max_chars - len(content)
        calls = []
        for call in response.tool_calls:
            if room <= 0:
                break
            calls.append({**call, "arguments": call["arguments"][:room]})
            room -= len(call["arguments"])
        limit = f"{self.limit_tokens} tokens" if self.limit_tokens is not None else "no limit set"
        note = (
            f"\n\n[answer cut at {self.max_chars} characters: the server sent more than the "
            f"output limit allows ({limit}, llm.max_output_tokens)]"
        )
        return dataclasses.replace(
            response, content=content + note, tool_calls=calls, finish_reason="length"
        )

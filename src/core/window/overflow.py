"""Recognising a provider's "context length exceeded" answer, and the figures it names.

Providers say it differently, but always as a client error (400, sometimes 413 or 422):
OpenAI and compatible servers (vLLM, DeepSeek, Groq) with code `context_length_exceeded` or
"maximum context length is N tokens. However, you requested M tokens"; llama.cpp with type
`exceed_context_size_error` and `n_prompt_tokens` / `n_ctx`; Mistral "Prompt contains M
tokens … too large for model with N maximum context length"; Anthropic-style "prompt is too
long: M tokens > N maximum"; Gemini "input token count (M) exceeds the maximum number of
tokens allowed (N)". Rate limits that mention tokens per minute are 429s and never match.
Ollama truncates silently instead: only a correct `context_window` helps there.

The token count a provider names recalibrates the estimate (`TokenCounter.observe`) before
the aggressive retry, so the retry aims at the real tokenizer's figure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

OVERFLOW_STATUSES = (400, 413, 422)
_CODES = ("context_length_exceeded", "exceed_context_size_error", "context_window_exceeded")
_PHRASES = re.compile(
    r"maximum context length|context length|context window|context size|prompt is too long|"
    r"too many tokens|too large for model|input is too long|reduce the length of the messages|"
    r"exceeds the maximum number of tokens|maximum number of tokens allowed|input token count",
    re.IGNORECASE,
)
_FIGURES = [
    # (pattern, group of the request's tokens, group of the limit)
    (re.compile(r"maximum context length is (\d+) tokens.*?(?:resulted in|requested) (\d+) tokens", re.I | re.S), 2, 1),
    (re.compile(r"prompt contains (\d+) tokens.*?with (\d+) maximum context length", re.I | re.S), 1, 2),
    (re.compile(r"prompt is too long: (\d+) tokens > (\d+)", re.I), 1, 2),
    (re.compile(r"input token count \((\d+)\) exceeds the maximum number of tokens allowed \((\d+)\)", re.I), 1, 2),
    (re.compile(r"request \((\d+) tokens\) exceeds the available context size \((\d+) tokens\)", re.I), 1, 2),
]

_IN_MESSAGES = re.compile(r"\((\d+) in the messages", re.I)


@dataclass(frozen=True)
class Overflow:
    """What a context-overflow error told us (either figure may be unknown). `requested_tokens`
    is the prompt's size when the provider names it apart from the requested output."""

    requested_tokens: int | None = None
    limit_tokens: int | None = None


def _body_error(body: Any) -> Mapping[str, Any]:
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            return inner
    return {}


def parse_overflow(status: int | None, message: str, body: Any = None) -> Overflow | None:
    """An `Overflow` if this error means "the prompt does not fit the window", else None.

    `message` is the error text (e.g. `openai.APIStatusError.message`), `body` the parsed
    JSON body when there is one (`exc.body`).
    """
    if status is not None and status not in OVERFLOW_STATUSES:
        return None
    error = _body_error(body)
    code = str(error.get("code") or "") + " " + str(error.get("type") or "")
    text = f"{message} {error.get('message') or ''}"
    if not any(c in code for c in _CODES) and not _PHRASES.search(text):
        return None
    requested = limit = None
    for pattern, req_group, limit_group in _FIGURES:
        match = pattern.search(text)
        if match:
            requested, limit = int(match.group(req_group)), int(match.group(limit_group))
            break
    messages_only = _IN_MESSAGES.search(text)  # OpenAI: "(M in the messages, C in the completion)"
    if messages_only:
        requested = int(messages_only.group(1))
    if requested is None and isinstance(error.get("n_prompt_tokens"), int):
        requested = error["n_prompt_tokens"]
    if limit is None and isinstance(error.get("n_ctx"), int):
        limit = error["n_ctx"]
    return Overflow(requested, limit)


def parse_exception(exc: BaseException) -> Overflow | None:
    """`parse_overflow` for an exception from the openai SDK (or one chained from it)."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        status = getattr(current, "status_code", None)
        if isinstance(status, int):
            return parse_overflow(status, str(getattr(current, "message", "") or current), getattr(current, "body", None))
        current = current.__cause__ or current.__context__
    return None

"""Offline token estimates for chat requests, calibrated from the provider's reported usage.

No tokenizer is downloaded at run time (air-gapped boxes, local servers with unknown
tokenizers), so a request is measured with a byte heuristic: ASCII text is about 4 characters
per token, other characters cost more (an accented letter about 0.75 token, a CJK character
about 1.25, an emoji about 1.75: `(2 × utf-8 bytes − characters) / 4`). Each message adds a
small fixed overhead for its role and separators, tool calls their name and arguments, and
the tool schemas their compact JSON.

A heuristic alone can be 30% off for code, JSON or another language, so `TokenCounter`
calibrates per agent invocation: after each response it records the provider's
`prompt_tokens` for that request next to the heuristic's raw figure. The next estimate is
that reported figure plus the raw size of what changed since, scaled by the observed
tokens-per-raw rate of what was added between reported requests (smoothed over the
invocation's requests). It therefore tracks the real
tokenizer as the run goes on, and is exact for the part that was already counted. Missing or
zero usage (some local servers send none) leaves the calibration as it was.

A memory grows by a round per step, so `TokenCounter.measure` remembers the previous
request's messages with their raw counts and re-counts only messages that differ (same object
or equal): a step costs O(new messages) of counting, not O(memory), at a thousand rounds.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

MESSAGE_OVERHEAD = 4  # role, separators and the message frame
TOOL_CALL_OVERHEAD = 6  # call id, type and the function frame
REQUEST_OVERHEAD = 3  # the assistant reply priming every chat template adds
IMAGE_PART_TOKENS = 800  # a typical detail:auto image; we never send images ourselves

# Bounds on the calibration ratio: outside them the usage is more likely wrong (a proxy that
# reports cached tokens only, a server that counts something else) than the estimate.
MIN_RATIO = 0.25
MAX_RATIO = 4.0
SMOOTHING = 0.7  # weight of the newest observation in the ratio
MIN_MARGINAL_RAW = 32  # raw tokens added since the anchor before their own rate is trusted


def text_tokens(text: str | None) -> int:
    """Estimated tokens of a piece of text (see the module docstring for the rule)."""
    if not text:
        return 0
    chars = len(text)
    if text.isascii():
        return (chars + 3) // 4
    size = len(text.encode("utf-8", "surrogatepass"))
    return (2 * size - chars + 3) // 4


def _content_tokens(content: Any) -> int:
    if content is None:
        return 0
    if isinstance(content, str):
        return text_tokens(content)
    if isinstance(content, list):
        total = 0
        for part in content:
            if isinstance(part, str):
                total += text_tokens(part)
            elif isinstance(part, Mapping):
                if part.get("type") == "image_url":
                    total += IMAGE_PART_TOKENS
                else:
                    total += text_tokens(part.get("text") if isinstance(part.get("text"), str) else None)
        return total
    return text_tokens(str(content))


def message_tokens(message: Mapping[str, Any]) -> int:
    """Raw estimate of one OpenAI-format message (content, tool calls, ids, name)."""
    total = MESSAGE_OVERHEAD + _content_tokens(message.get("content"))
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        total += TOOL_CALL_OVERHEAD + text_tokens(call.get("id"))
        total += text_tokens(function.get("name")) + text_tokens(function.get("arguments"))
    if message.get("tool_call_id"):
        total += text_tokens(message["tool_call_id"])
    if message.get("name"):
        total += text_tokens(message["name"])
    return total


def messages_tokens(messages: Iterable[Mapping[str, Any]]) -> int:
    return sum(message_tokens(m) for m in messages)


def tools_tokens(tools: Sequence[Mapping[str, Any]] | None) -> int:
    """Raw estimate of the tool schemas sent with a request (their compact JSON).

    A run's requests offer the same schemas every time (the registry's cached `specs` list,
    whose schemas are never changed in place), and each request is measured twice: the count
    is kept per list of schema objects (`_TOOLS_SEEN`, by identity; the schemas are held so
    their ids are not reused) instead of encoding them again at every call."""
    if not tools:
        return 0
    key = tuple(map(id, tools))
    seen = _TOOLS_SEEN.get(key)
    if seen is not None and all(a is b for a, b in zip(seen[0], tools, strict=True)):
        return seen[1]
    raw = sum(text_tokens(json.dumps(t, separators=(",", ":"), ensure_ascii=False)) for t in tools)
    if len(_TOOLS_SEEN) >= _TOOLS_SEEN_MAX:
        _TOOLS_SEEN.pop(next(iter(_TOOLS_SEEN)))
    _TOOLS_SEEN[key] = (tuple(tools), raw)
    return raw


# ids of a request's schemas -> (those schemas, their raw tokens); a few per process.
_TOOLS_SEEN: dict[tuple[int, ...], tuple[tuple[Mapping[str, Any], ...], int]] = {}
_TOOLS_SEEN_MAX = 64


def request_tokens(
    messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] | None = None
) -> int:
    """Raw (uncalibrated) estimate of a whole chat request's prompt tokens."""
    return REQUEST_OVERHEAD + messages_tokens(messages) + tools_tokens(tools)


@dataclass(frozen=True)
class Measurement:
    """One request measured: `raw` is the heuristic, `tokens` the calibrated estimate.
    Keep it until the response arrives and pass `raw` to `TokenCounter.observe`."""

    raw: int
    tokens: int


@dataclass
class TokenCounter:
    """Calibrated estimates for one agent invocation (see the module docstring).

    Plain data: `to_dict` / `from_dict` let a caller keep it in state or on the run context;
    a fresh counter (ratio 1.0, no anchor) is always a valid fallback.
    """

    ratio: float = 1.0
    anchor_raw: int | None = None  # raw estimate of the last request with reported usage
    anchor_tokens: int | None = None  # the provider's prompt_tokens for that request
    observations: int = 0
    # The last measured messages and their raw counts (a cache, never serialized).
    _seen: list[Mapping[str, Any]] = field(default_factory=list, repr=False, compare=False)
    _seen_raw: list[int] = field(default_factory=list, repr=False, compare=False)

    def scale(self, raw: int) -> int:
        """Calibrated tokens of a part of a request (no anchor: just the ratio)."""
        return math.ceil(raw * self.ratio) if raw > 0 else 0

    def calibrated(self, raw: int) -> int:
        """Calibrated tokens of a whole request whose raw estimate is `raw`."""
        if self.anchor_raw is None or self.anchor_tokens is None:
            return self.scale(raw)
        delta = raw - self.anchor_raw
        scaled = math.ceil(delta * self.ratio) if delta >= 0 else -math.ceil(-delta * self.ratio)
        return max(0, self.anchor_tokens + scaled)

    def measure(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> Measurement:
        raw = REQUEST_OVERHEAD + self._messages_raw(messages) + tools_tokens(tools)
        return Measurement(raw, self.calibrated(raw))

    def _messages_raw(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """`messages_tokens`, re-counting only the messages that changed since last time."""
        seen, seen_raw = self._seen, self._seen_raw
        raws = []
        for index, message in enumerate(messages):
            if index < len(seen) and (message is seen[index] or message == seen[index]):
                raws.append(seen_raw[index])
            else:
                raws.append(message_tokens(message))
        self._seen, self._seen_raw = list(messages), raws
        return sum(raws)

    def estimate(
        self,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> int:
        return self.measure(messages, tools).tokens

    def observe(self, raw: int, prompt_tokens: int | None) -> None:
        """Record the provider's `prompt_tokens` for a request whose raw estimate was `raw`.

        Also usable with the token count a provider names in a context-overflow error.
        Missing, zero or absurd usage is ignored (the counter keeps its calibration).
        """
        if not prompt_tokens or prompt_tokens <= 0 or raw <= 0:
            return
        ratio = prompt_tokens / raw
        if not MIN_RATIO <= ratio <= MAX_RATIO:
            return
        if self.anchor_raw is not None and self.anchor_tokens is not None:
            # The rate of what was added since the anchor says most about the next delta
            # (tool results, not the system prompt's prose).
            added_raw = raw - self.anchor_raw
            if added_raw >= MIN_MARGINAL_RAW:
                marginal = (prompt_tokens - self.anchor_tokens) / added_raw
                if MIN_RATIO <= marginal <= MAX_RATIO:
                    ratio = marginal
        if self.observations <= 1:  # the first two readings replace the default outright
            self.ratio = ratio
        else:
            self.ratio = SMOOTHING * ratio + (1 - SMOOTHING) * self.ratio
        self.anchor_raw = raw
        self.anchor_tokens = int(prompt_tokens)
        self.observations += 1

    def to_dict(self) -> dict[str, Any]:
        """The calibration fields (not the `_seen` cache, which is `compare=False`)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.compare}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None) -> TokenCounter:
        if not data:
            return cls()
        return cls(
            ratio=float(data.get("ratio") or 1.0),
            anchor_raw=data.get("anchor_raw"),
            anchor_tokens=data.get("anchor_tokens"),
            observations=int(data.get("observations") or 0),
        )

"""An agent's working memory as tool rounds: the only places where it may be cut.

A memory is a list of OpenAI-format messages: assistant turns (with or without `tool_calls`)
each followed by the `tool` results of its calls, and, after a compaction, one summary
message at the front. Providers reject a `tool` message whose assistant `tool_calls` message
is missing (and an assistant turn whose calls have no results), so a cut may fall only
before an assistant message: a unit is an assistant message with every message up to the
next assistant message. Anything else stands alone (a summary, a stray user message).

The summary message records how many tool rounds it replaced in its first line, so the
number of rounds an agent has used (`max_tool_rounds`) survives compaction.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ...shapes import ChatMessage

Message = ChatMessage

SUMMARY_TAG = "[Context summary:"
_SUMMARY_HEADER = (
    SUMMARY_TAG + " {rounds} earlier tool round{s} of this task were condensed to stay inside "
    "the model's context window; the full results are in the event log.]"
)
_SUMMARY_ROUNDS = re.compile(r"^\[Context summary: (\d+) earlier tool rounds?\b")


def units(memory: Sequence[Mapping[str, Any]]) -> list[tuple[int, int]]:
    """`(start, end)` index ranges of the memory's indivisible units, in order."""
    out: list[tuple[int, int]] = []
    start: int | None = None
    for index, message in enumerate(memory):
        role = message.get("role")
        if role == "assistant":
            if start is not None:
                out.append((start, index))
            start = index
        elif role == "tool":
            if start is None:  # a result without its call: keep it with what follows
                start = index
        else:
            if start is not None:
                out.append((start, index))
            out.append((index, index + 1))
            start = None
    if start is not None:
        out.append((start, len(memory)))
    return out


def is_tool_round(memory: Sequence[Mapping[str, Any]], unit: tuple[int, int]) -> bool:
    first = memory[unit[0]]
    return first.get("role") == "assistant" and bool(first.get("tool_calls"))


def is_summary(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return message.get("role") == "user" and isinstance(content, str) and content.startswith(SUMMARY_TAG)


def summary_message(text: str, rounds: int) -> Message:
    header = _SUMMARY_HEADER.format(rounds=rounds, s="" if rounds == 1 else "s")
    return {"role": "user", "content": f"{header}\n\n{text.strip()}"}


def summary_text(message: Mapping[str, Any]) -> str:
    """The summary without its header line."""
    content = str(message.get("content") or "")
    return content.split("\n\n", 1)[1] if "\n\n" in content else ""


def summarized_rounds(memory: Sequence[Mapping[str, Any]]) -> int:
    """Tool rounds replaced by summaries in this memory."""
    total = 0
    for message in memory:
        if is_summary(message):
            match = _SUMMARY_ROUNDS.match(message["content"])
            if match:
                total += int(match.group(1))
    return total


def rounds_in(memory: Sequence[Mapping[str, Any]]) -> int:
    """Tool rounds an invocation has had, counting those a summary replaced (use this
    instead of `state.rounds_used` once memories can be compacted)."""
    live = sum(1 for m in memory if m.get("role") == "assistant" and m.get("tool_calls"))
    return live + summarized_rounds(memory)


def check_pairs(memory: Sequence[Mapping[str, Any]]) -> list[str]:
    """Problems a provider would reject: results without their call, calls without results
    (except in the newest unit, whose results may still be on their way). Empty when valid."""
    problems: list[str] = []
    spans = units(memory)
    for position, (start, end) in enumerate(spans):
        first = memory[start]
        calls = [c["id"] for c in first.get("tool_calls") or ()] if first.get("role") == "assistant" else []
        results = [m.get("tool_call_id") for m in memory[start:end] if m.get("role") == "tool"]
        for call_id in results:
            if call_id not in calls:
                problems.append(f"tool result {call_id} at {start} has no matching call")
        if position < len(spans) - 1:
            for call_id in calls:
                if call_id not in results:
                    problems.append(f"call {call_id} at {start} has no result")
    return problems

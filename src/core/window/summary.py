"""The summary request: what one model call sees when it condenses an agent's older rounds.

The cut part of the memory is rendered as a plain transcript ("called web_fetch(...)",
"result of web_fetch: ...") rather than replayed as tool messages, so any model can write the
summary, with or without tool support, and no tool schema is sent. The task goes along so the
notes keep what matters for it. The request must itself fit the summary model's window: when
the transcript is too long, the longest tool results are clipped first (water-filling), with
a visible marker, so a compaction is always exactly one model call.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ...shapes import ChatMessage
from .rounds import is_summary, summary_text
from .tokens import text_tokens

Message = ChatMessage

SUMMARY_SYSTEM = (
    "You condense the earlier work of an AI agent so that it can continue its task with less "
    "context. Write compact notes that keep everything the agent still needs: facts, figures "
    "and quotes it found, with their sources (URLs, file names, artifact ids); decisions and "
    "their reasons; what is done and what remains; errors met and approaches that failed. "
    "Drop repetition and raw text that does not bear on the task. Never invent anything. "
    "Answer with the notes only."
)
# Share of the summary model's window the request may use (its tokenizer is not calibrated).
REQUEST_SHARE = 0.75
MIN_PIECE_CHARS = 120  # a clipped result keeps at least this much
CLIP_MARK = " […{n:,} characters cut…]"


def clip(text: str, max_chars: int) -> str:
    """`text` cut to about `max_chars` with a marker saying how much went."""
    if len(text) <= max_chars:
        return text
    keep = max(0, max_chars)
    return text[:keep] + CLIP_MARK.format(n=len(text) - keep)


def clip_to_tokens(text: str, max_tokens: int) -> str:
    """`text` cut so that its estimate is at most about `max_tokens`."""
    tokens = text_tokens(text)
    if tokens <= max_tokens:
        return text
    chars = int(len(text) * max_tokens / tokens)
    return clip(text, max(0, chars - len(CLIP_MARK) - 8))


Piece = tuple[str, str, bool]  # label, body, whether the body may be clipped (tool results)


def _pieces(cut: Sequence[Mapping[str, Any]]) -> list[Piece]:
    names: dict[str, str] = {}
    out: list[Piece] = []
    for message in cut:
        role = message.get("role")
        content = message.get("content")
        text = content if isinstance(content, str) else ("" if content is None else str(content))
        if is_summary(message):
            out.append(("Notes from even earlier work:\n", summary_text(message), False))
        elif role == "assistant":
            if text:
                out.append(("Agent: ", text, False))
            for call in message.get("tool_calls") or ():
                function = call.get("function") or {}
                names[call.get("id", "")] = function.get("name", "?")
                args = function.get("arguments") or ""
                out.append(("", f"Agent called {function.get('name')}({args})", False))
        elif role == "tool":
            name = names.get(message.get("tool_call_id", ""), "a tool")
            out.append((f"Result of {name}: ", text, True))
        else:
            out.append((f"{role}: ", text, False))
    return out


def _render(pieces: list[Piece], cap: int | None) -> str:
    return "\n\n".join(
        label + (clip(body, cap) if clippable and cap is not None else body)
        for label, body, clippable in pieces
    )


def transcript(cut: Sequence[Mapping[str, Any]], max_tokens: int | None = None) -> str:
    """The cut messages as text, the longest tool results clipped to fit `max_tokens`."""
    pieces = _pieces(cut)
    text = _render(pieces, None)
    if max_tokens is None or text_tokens(text) <= max_tokens:
        return text
    lengths = sorted((len(body) for _, body, clippable in pieces if clippable), reverse=True)
    if not lengths:
        return clip_to_tokens(text, max_tokens)
    # Lower one common cap on result lengths until the transcript fits (few iterations).
    cap = lengths[0]
    for _ in range(40):
        cap = max(MIN_PIECE_CHARS, int(cap * 0.8))
        text = _render(pieces, cap)
        if text_tokens(text) <= max_tokens or cap == MIN_PIECE_CHARS:
            break
    return text if text_tokens(text) <= max_tokens else clip_to_tokens(text, max_tokens)


def summary_request(
    task: str,
    cut: Sequence[Mapping[str, Any]],
    *,
    max_tokens: int,
    window: int,
) -> list[Message]:
    """Messages for the one summary call: instructions, the task and the transcript, sized to
    fit `window` (the summary model's) with `max_tokens` left for the answer."""
    available = int(window * REQUEST_SHARE) - max_tokens - text_tokens(SUMMARY_SYSTEM) - 64
    task_text = clip_to_tokens(task, max(64, available // 4))
    words = max(50, int(max_tokens * 0.7))
    body_tokens = max(64, available - text_tokens(task_text))
    body = transcript(cut, body_tokens)
    return [
        {"role": "system", "content": SUMMARY_SYSTEM},
        {
            "role": "user",
            "content": (
                f"The agent's task:\n{task_text}\n\nIts earlier work, oldest first:\n\n{body}\n\n"
                f"Write the notes now, at most about {words} words."
            ),
        },
    ]


def fallback_summary(cut: Sequence[Mapping[str, Any]], max_tokens: int) -> str:
    """A mechanical summary (the calls made, the start of each result) for when the summary
    model answers nothing: the agent keeps a trace of its work instead of losing it."""
    return clip_to_tokens(transcript(cut, None), max_tokens)

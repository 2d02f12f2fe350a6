"""A conversation's title from its first task: what it is about, not its first N characters.

The first sentence (up to `.`, `!` or `?` followed by a space, or a line break) is what a
person reads as the subject; a sentence longer than `limit` is cut at a word boundary and
marked with an ellipsis, never in the middle of a word. A final full stop is dropped.
"""

from __future__ import annotations

import re

TITLE_LIMIT = 80
_SENTENCE_END = re.compile(r"(?<=[.!?])\s|\n")


def title_from(task: str, limit: int = TITLE_LIMIT) -> str | None:
    """The title for a conversation whose first message is `task` (None when it is blank)."""
    text = task.strip()
    if not text:
        return None
    first = _SENTENCE_END.split(text, maxsplit=1)[0].strip()
    first = " ".join(first.split())
    if len(first) <= limit:
        return first.removesuffix(".") if not first.endswith("..") else first
    cut = first[: limit - 1]
    space = cut.rfind(" ")
    if space > limit // 3:  # a very long first word is cut where it must be
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"


__all__ = ["TITLE_LIMIT", "title_from"]

"""The consoles every command prints on, and `short` (a value as one bounded line).

Kept apart from `render` (which knows every event payload) so a command that only lists stored
rows, and `--help`, import rich and nothing of the run's event types.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Console


def console(*, stderr: bool = False) -> Console:
    """A console on stdout or stderr that never inserts hard line breaks."""
    return Console(stderr=stderr, soft_wrap=True, highlight=False)


def short(value: Any, limit: int = 100) -> str:
    """`value` as one line of at most `limit` characters."""
    if value is None:
        return ""
    if isinstance(value, str):
        text = value
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = str(value)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"

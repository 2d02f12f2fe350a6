"""The consoles every command prints on, `short` (a value as one bounded line), and rich's
`Text`, `escape` and `Table` imported on first use.

Kept apart from `render` (which knows every event payload) so a command that only lists stored
rows imports rich and nothing of the run's event types, and `--help` not even rich (the
modules that register the commands use rich through these, so importing them costs nothing).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table as RichTable
    from rich.text import Text as RichText


def console(*, stderr: bool = False) -> Console:
    """A console on stdout or stderr that never inserts hard line breaks."""
    from rich.console import Console

    return Console(stderr=stderr, soft_wrap=True, highlight=False)


def Text(*args: Any, **kwargs: Any) -> RichText:  # noqa: N802 - rich's class, on first use
    from rich.text import Text as RichText

    return RichText(*args, **kwargs)


def escape(markup: str) -> str:
    from rich.markup import escape as rich_escape

    return rich_escape(markup)


def Table(*headers: str, **kwargs: Any) -> RichTable:  # noqa: N802 - rich's class, on first use
    from rich.table import Table as RichTable

    return RichTable(*headers, **kwargs)


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

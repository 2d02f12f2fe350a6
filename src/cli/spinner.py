"""One transient line at the bottom of a terminal while the CLI waits: a spinner, the current
step and how long it has taken ("thinking… 3.2 s", "running web_fetch… 1.1 s").

Drawn with rich's `Live` (refreshed ten times a second by rich's own thread) and erased when
hidden, so nothing of it stays in the scrollback or reaches a pipe: `LiveRenderer` creates one
only when stdout is an interactive terminal. Lines printed on the same console while it shows
go above it (rich's render hook); anything else (stderr, a prompt) hides it first.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.text import Text

if TYPE_CHECKING:
    from rich.console import Console, RenderableType
    from rich.live import Live
    from rich.spinner import Spinner


class WaitLine:
    def __init__(self, console: Console) -> None:
        self.console = console
        self.step = ""
        self._since = time.monotonic()
        self._live: Live | None = None
        self._spinner: Spinner | None = None

    @property
    def shown(self) -> bool:
        return self._live is not None

    def show(self, step: str) -> None:
        """Show `step` (its clock restarts when the step changes)."""
        if step != self.step:
            self.step, self._since = step, time.monotonic()
        if self._live is None:
            from rich.live import Live
            from rich.spinner import Spinner

            self._spinner = Spinner("dots", style="cyan")
            self._live = Live(
                console=self.console,
                get_renderable=self._render,
                transient=True,
                refresh_per_second=10,
                redirect_stdout=False,
                redirect_stderr=False,
            )
            self._live.start()

    def hide(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.stop()

    def _render(self) -> RenderableType:
        elapsed = time.monotonic() - self._since
        text = Text(f"{self.step}… {elapsed:.1f} s", style="dim")
        if self._spinner is None:
            return text
        self._spinner.update(text=text)
        return self._spinner

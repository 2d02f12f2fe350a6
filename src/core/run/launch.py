"""Starting a segment of a message's run as a background task, one per message per process.

Every way a run begins (a new message, a resume, a recovery, a workflow) ends here: the
message's previous segment must be done (or only finishing its cleanup), a `LiveRun` handle is
registered for readers, and `Segment.drive` runs as its task (`segment.py`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from ...errors import ResumeConflictError
from ...hooks.types import RunInfo
from ...shapes import RecordedDecision
from ..context import Services
from ..store.rows import MessageRow
from .live import LiveRun
from .runtime import Runtime
from .segment import FirstEvents, Segment


def launch(
    rt: Runtime, message: MessageRow, run_token: str, graph_input: Any, *, first_events: FirstEvents,
    info: RunInfo | None = None, decisions: list[RecordedDecision] | None = None,
    fresh: bool = False, services: Services | None = None,
) -> None:
    """Start `message`'s run as a background task (`graph_input`: an initial state, a resume
    `Command`, or None to continue from the last checkpoint). `info` is the segment as hooks
    see it; `decisions` the permission results a resume starts with. `fresh`: a chat message
    just stored by `start_message` (no events yet, no spending, not a workflow run), so its
    first segment skips reading them back. `services`: the run's own (an agent configuration,
    `Runtime.services_for`); None: looked up for the message."""
    previous = rt.runs.get(message["id"])
    # A segment whose final status is stored (`finishing`: it paused a moment ago and is only
    # cleaning up) does not block the next one: its cleanup removes its handle only if it is
    # still the registered one. Refusing here would strand a message its caller just claimed.
    if previous is not None and not previous.done and not previous.finishing:
        raise ResumeConflictError(f"message {message['id']} is already running in this process")
    handle = LiveRun(message["id"])
    rt.runs[message["id"]] = handle
    segment = Segment(rt, handle, message, run_token, info, decisions)
    segment.fresh = handle.whole = fresh
    segment.services = services
    handle.task = asyncio.create_task(
        segment.drive(graph_input, first_events), name=f"artifactflow-run-{message['id']}"
    )

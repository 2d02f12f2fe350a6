"""The public facade: `Client` (grouped by noun), one `Run` handle, typed requests, and
`Reader` (stored data only, without the run engine).

Every name is imported on first use (PEP 562), so a process that only reads
(`artifactflow.client.stored`) never imports the engine, LangGraph or the model client, and
one that reads a SQLite store directly (`artifactflow.client.quick`, the listing commands) not
even pydantic or the settings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports

if TYPE_CHECKING:
    from .client import Client
    from .requests import Decisions, Request, Resume, Retry, Task, WorkflowTask
    from .run import Run, RunResult
    from .stored import Reader

_LAZY = {
    "Client": ".client", "Run": ".run", "RunResult": ".run", "Reader": ".stored",
    **{name: ".requests" for name in ("Decisions", "Request", "Resume", "Retry", "Task", "WorkflowTask")},
}


__getattr__ = lazy_exports(__name__, _LAZY)


__all__ = [
    "Client",
    "Decisions",
    "Reader",
    "Request",
    "Resume",
    "Retry",
    "Run",
    "RunResult",
    "Task",
    "WorkflowTask",
]

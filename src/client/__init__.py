"""The public facade: `Client` (grouped by noun), one `Run` handle, typed requests, and
`Reader` (stored data only, without the run engine).

`Client`, `Run` and `RunResult` are imported on first use (PEP 562), so a process that only
reads (`artifactflow.client.stored`) never imports the engine, LangGraph or the model client.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..lazy import lazy_exports
from .requests import Decisions, Request, Resume, Retry, Task, WorkflowTask
from .stored import Reader

if TYPE_CHECKING:
    from .client import Client
    from .run import Run, RunResult

_LAZY = {"Client": ".client", "Run": ".run", "RunResult": ".run"}


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

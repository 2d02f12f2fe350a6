"""The public facade: `Client` (grouped by noun), one `Run` handle, typed requests."""

from .client import Client
from .requests import Decisions, Request, Resume, Retry, Task, WorkflowTask
from .run import Run, RunResult

__all__ = ["Client", "Decisions", "Request", "Resume", "Retry", "Run", "RunResult", "Task", "WorkflowTask"]

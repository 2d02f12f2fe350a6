"""Workflow errors: invalid files (every problem, each with file, node and fix) and failed nodes."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..errors import ArtifactFlowError, ConfigError


@dataclass(frozen=True)
class WorkflowIssue:
    """One problem in a workflow file and how to fix it."""

    file: str
    node: str | None
    message: str
    fix: str

    def __str__(self) -> str:
        where = f"{self.file}: node '{self.node}'" if self.node else self.file
        return f"{where}: {self.message}. Fix: {self.fix}"

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)


class WorkflowValidationError(ConfigError):
    """A workflow file is invalid; `issues` lists every problem found."""

    def __init__(self, issues: list[WorkflowIssue]) -> None:
        self.issues = list(issues)
        count = len(self.issues)
        head = f"workflow is invalid ({count} problem{'s' if count != 1 else ''})"
        super().__init__(head + ":\n" + "\n".join(f"- {issue}" for issue in self.issues))


class WorkflowNodeError(ArtifactFlowError):
    """A node failed with `on_failure: fail`, so the workflow run failed."""

    def __init__(self, message: str, *, node: str, execution: str | None = None) -> None:
        super().__init__(message)
        self.node = node
        self.execution = execution
        self.agent = None  # the controller reads `agent` off run errors

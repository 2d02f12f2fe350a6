"""The record types the facade hands out, for its users (the API, the CLI) to annotate with
without reaching into the store or the engine."""

from __future__ import annotations

from ..artifacts.records import ArtifactSummary, ArtifactView, VersionSummary
from ..core.conversations import ConversationTree, TreeNode
from ..core.metrics import RunMetrics
from ..core.run.maintenance import GcReport
from ..core.store.rows import ConversationRow, LineageRow, MessageRow, WorkflowRunSummary
from ..tools.registry import ToolDescription

__all__ = [
    "ArtifactSummary",
    "ArtifactView",
    "ConversationTree",
    "ConversationRow",
    "GcReport",
    "LineageRow",
    "MessageRow",
    "RunMetrics",
    "ToolDescription",
    "TreeNode",
    "VersionSummary",
    "WorkflowRunSummary",
]

"""artifactflow: a LangGraph multi-agent orchestrator.

Public API: everything importable from here. Graph wiring and node functions are internal to
`artifactflow.core`.
"""

from __future__ import annotations

import os

# Checkpoints hold plain data only; deserialize strictly (set before LangGraph is imported).
os.environ.setdefault("LANGGRAPH_STRICT_MSGPACK", "true")

from .agents.spec import AgentSpec  # noqa: E402
from .core.context import RunContext, Services  # noqa: E402
from .core.controller import ExecutionController, ExecutionResult  # noqa: E402
from .core.conversations import ACTIVE_BRANCH, ConversationManager  # noqa: E402
from .core.events import Event, EventType  # noqa: E402
from .core.state import (  # noqa: E402
    AgentState,
    ExecutionPhase,
    create_initial_state,
    merge_agent_response_to_state,
)
from .errors import (  # noqa: E402
    ArtifactConflictError,
    ArtifactFlowError,
    ConfigError,
    InvalidResumeError,
    LLMError,
    MissingCredentialsError,
    NotFoundError,
    ResumeConflictError,
    UserError,
)
from .settings import Settings, load_settings  # noqa: E402
from .tools.base import Permission, Tool, ToolResult  # noqa: E402
from .tools.context import ToolContext  # noqa: E402
from .tools.decorator import tool  # noqa: E402
from .tools.registry import ToolRegistry  # noqa: E402

_WORKFLOW_NAMES = frozenset({
    "WorkflowIssue", "WorkflowNodeError", "WorkflowSpec", "WorkflowValidationError",
    "check_workflow", "load_workflow_file", "to_mermaid", "validate_workflow",
})


def __getattr__(name: str) -> object:
    """Workflow names load on first use: a chat-only program does not import the engine."""
    if name in _WORKFLOW_NAMES:
        from . import workflows

        return getattr(workflows, name)
    raise AttributeError(f"module 'artifactflow' has no attribute {name!r}")

__version__ = "0.1.0"

__all__ = [
    "ACTIVE_BRANCH",
    "AgentSpec",
    "AgentState",
    "ArtifactConflictError",
    "ArtifactFlowError",
    "ConfigError",
    "ConversationManager",
    "Event",
    "EventType",
    "ExecutionController",
    "ExecutionPhase",
    "ExecutionResult",
    "InvalidResumeError",
    "LLMError",
    "MissingCredentialsError",
    "NotFoundError",
    "Permission",
    "ResumeConflictError",
    "RunContext",
    "Services",
    "Settings",
    "Tool",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "UserError",
    "WorkflowIssue",
    "WorkflowNodeError",
    "WorkflowSpec",
    "WorkflowValidationError",
    "check_workflow",
    "create_initial_state",
    "load_settings",
    "load_workflow_file",
    "merge_agent_response_to_state",
    "to_mermaid",
    "tool",
    "validate_workflow",
]

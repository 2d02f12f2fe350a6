"""artifactflow: a LangGraph multi-agent orchestrator.

Public API: everything importable from here; start with `Client` (`artifactflow.client`), and
the typed events in `artifactflow.events`. Graph wiring and node functions are internal to
`artifactflow.core`. Importing the package has no side effects (no environment variables, no
`sys.path` edits); checkpoints are read strictly by the serializer the saver is built with.
"""

from __future__ import annotations

from .agents.model import Model, ModelRequest, ModelResponse, Reply, ScriptedModel, ToolCall, Usage
from .agents.spec import AgentSpec
from .client import Client, Decisions, Resume, Retry, Run, RunResult, Task, WorkflowTask
from .core.context import RunContext, Services
from .core.conversations import ACTIVE_BRANCH, ConversationManager
from .core.state import (
    AgentState,
    ExecutionPhase,
    create_initial_state,
    merge_agent_response_to_state,
)
from .core.window import ContextWindowExceeded
from .errors import (
    ArtifactConflictError,
    ArtifactFlowError,
    ConfigError,
    ContextOverflowError,
    FatalLLMError,
    InvalidResumeError,
    LeaseLostError,
    LLMError,
    MissingCredentialsError,
    NotFoundError,
    ResumeConflictError,
    RetryableLLMError,
    StoreUnavailableError,
    UserError,
)
from .events.envelope import Event, EventType, TypedEvent
from .events.payloads import EventData, MessageStatus, Outcome
from .hooks import HookError, Hooks, Refuse
from .replay.evaluate import EvalResult, eval_sessions
from .replay.replayer import replay_session
from .replay.report import Divergence, ReplayReport
from .replay.session import Session, SessionFileError, read_session
from .settings import Settings, load_settings
from .tools.base import Permission, Tool, ToolResult
from .tools.context import ToolContext
from .tools.decorator import tool
from .tools.langchain import wrap_tool
from .tools.mcp import McpServerConfig
from .tools.registry import ToolRegistry
from .version import __version__
from .workflows import (
    WorkflowIssue,
    WorkflowNodeError,
    WorkflowSpec,
    WorkflowValidationError,
    check_workflow,
    load_workflow_file,
    to_mermaid,
    validate_workflow,
)

__all__ = [
    "__version__",
    "Client",
    "Decisions",
    "Resume",
    "Retry",
    "Run",
    "RunResult",
    "Task",
    "WorkflowTask",
    "ACTIVE_BRANCH",
    "AgentSpec",
    "AgentState",
    "ArtifactConflictError",
    "ArtifactFlowError",
    "ConfigError",
    "ContextOverflowError",
    "ContextWindowExceeded",
    "ConversationManager",
    "Divergence",
    "EvalResult",
    "Event",
    "EventData",
    "EventType",
    "ExecutionPhase",
    "FatalLLMError",
    "HookError",
    "Hooks",
    "InvalidResumeError",
    "LeaseLostError",
    "LLMError",
    "McpServerConfig",
    "MessageStatus",
    "MissingCredentialsError",
    "Model",
    "ModelRequest",
    "ModelResponse",
    "NotFoundError",
    "Outcome",
    "Permission",
    "Reply",
    "Refuse",
    "ReplayReport",
    "ResumeConflictError",
    "RetryableLLMError",
    "StoreUnavailableError",
    "RunContext",
    "ScriptedModel",
    "Services",
    "Session",
    "SessionFileError",
    "Settings",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolRegistry",
    "ToolResult",
    "TypedEvent",
    "Usage",
    "UserError",
    "WorkflowIssue",
    "WorkflowNodeError",
    "WorkflowSpec",
    "WorkflowValidationError",
    "check_workflow",
    "create_initial_state",
    "eval_sessions",
    "load_settings",
    "load_workflow_file",
    "merge_agent_response_to_state",
    "read_session",
    "replay_session",
    "to_mermaid",
    "tool",
    "validate_workflow",
    "wrap_tool",
]

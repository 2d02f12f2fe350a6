"""artifactflow: a LangGraph multi-agent orchestrator.

Public API: everything importable from here; start with `Client` (`artifactflow.client`), and
the typed events in `artifactflow.events`. Graph wiring and node functions are internal to
`artifactflow.core`. Importing the package has no side effects (no environment variables, no
`sys.path` edits); checkpoints are read strictly by the serializer the saver is built with.

Names are imported on first use (PEP 562 `__getattr__`), so `import artifactflow` and the
command line's `--help` do not pay for LangGraph, the openai client or SQLAlchemy until
something needs them; `from artifactflow import Client` works as before.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_exports
from .version import __version__

if TYPE_CHECKING:
    from .agents.model import (
        Model,
        ModelRequest,
        ModelResponse,
        Reply,
        ScriptedModel,
        ToolCall,
        Usage,
    )
    from .agents.spec import AgentSpec
    from .client import (
        Client,
        Decisions,
        Reader,
        Resume,
        Retry,
        Run,
        RunResult,
        Task,
        WorkflowTask,
    )
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

# Where each public name lives: `__getattr__` imports the module the first time the name is
# asked for and keeps the value here, so later lookups are plain attribute reads.
_SOURCES: dict[str, tuple[str, ...]] = {
    ".agents.model": (
        "Model",
        "ModelRequest",
        "ModelResponse",
        "Reply",
        "ScriptedModel",
        "ToolCall",
        "Usage",
    ),
    ".agents.spec": ("AgentSpec",),
    ".client": (
        "Client",
        "Decisions",
        "Reader",
        "Resume",
        "Retry",
        "Run",
        "RunResult",
        "Task",
        "WorkflowTask",
    ),
    ".core.context": ("RunContext", "Services"),
    ".core.conversations": ("ACTIVE_BRANCH", "ConversationManager"),
    ".core.state": (
        "AgentState",
        "ExecutionPhase",
        "create_initial_state",
        "merge_agent_response_to_state",
    ),
    ".core.window": ("ContextWindowExceeded",),
    ".errors": (
        "ArtifactConflictError",
        "ArtifactFlowError",
        "ConfigError",
        "ContextOverflowError",
        "FatalLLMError",
        "InvalidResumeError",
        "LeaseLostError",
        "LLMError",
        "MissingCredentialsError",
        "NotFoundError",
        "ResumeConflictError",
        "RetryableLLMError",
        "StoreUnavailableError",
        "UserError",
    ),
    ".events.envelope": ("Event", "EventType", "TypedEvent"),
    ".events.payloads": ("EventData", "MessageStatus", "Outcome"),
    ".hooks": ("HookError", "Hooks", "Refuse"),
    ".replay.evaluate": ("EvalResult", "eval_sessions"),
    ".replay.replayer": ("replay_session",),
    ".replay.report": ("Divergence", "ReplayReport"),
    ".replay.session": ("Session", "SessionFileError", "read_session"),
    ".settings": ("Settings", "load_settings"),
    ".tools.base": ("Permission", "Tool", "ToolResult"),
    ".tools.context": ("ToolContext",),
    ".tools.decorator": ("tool",),
    ".tools.langchain": ("wrap_tool",),
    ".tools.mcp": ("McpServerConfig",),
    ".tools.registry": ("ToolRegistry",),
    ".workflows": (
        "WorkflowIssue",
        "WorkflowNodeError",
        "WorkflowSpec",
        "WorkflowValidationError",
        "check_workflow",
        "load_workflow_file",
        "to_mermaid",
        "validate_workflow",
    ),
}
_MODULE_OF = {name: module for module, names in _SOURCES.items() for name in names}


__getattr__ = lazy_exports(__name__, _MODULE_OF)


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


__all__ = [
    "__version__",
    "Client",
    "Decisions",
    "Reader",
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

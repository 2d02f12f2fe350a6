"""The hook points, and `Hooks`: a base class whose every method is a no-op.

One naming grammar, from the codebases we learn from:

- `before_*` / `after_*` are **interceptors** (pydantic-ai's grammar): they may change what
  flows through the point by returning a new value; returning None keeps it unchanged.
- `on_*` are **observers** (openai-agents' `RunHooks` grammar): they return nothing and see
  the final value, after every interceptor of the same step ran.

Subclass `Hooks` and override what you need, or use any object (or a module) with some of
these methods; `async def` and plain `def` both work (a plain function runs on the event
loop: keep it quick, use `async def` for I/O). `POINTS` lists every point with where it fires;
an attribute named like a point that is not one (`on_tool_begin`) is an error at load time,
so a typo never silently disables a hook.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..tools.base import ToolResult
from .types import (
    AgentStep,
    AgentStepEnd,
    ChatMessage,
    Compaction,
    Failure,
    MemoryRecall,
    ModelRequest,
    ModelResponse,
    PermissionRequest,
    PermissionResult,
    Refuse,
    RunEnd,
    RunInfo,
    ToolCall,
    ToolOutcome,
    ToolRound,
)


@dataclass(frozen=True)
class Point:
    name: str
    kind: Literal["interceptor", "observer"]
    where: str


POINTS: dict[str, Point] = {
    p.name: p
    for p in (
        Point("before_run", "interceptor", "controller, before the user message is stored"),
        Point("on_run_start", "observer", "controller, as a run segment starts"),
        Point("on_agent_start", "observer", "agent node, before the step's model call"),
        Point("before_model_request", "interceptor", "agent node, before the model call"),
        Point("on_model_start", "observer", "agent node, before the model call"),
        Point("after_model_request", "interceptor", "agent node, after the model answered"),
        Point("on_model_end", "observer", "agent node, after the model answered"),
        Point("before_tool_call", "interceptor", "agent node, for each call the model made"),
        Point("on_agent_end", "observer", "agent node, after the step's state update"),
        Point("on_compaction", "observer", "context manager, after a summary replaced memory"),
        Point("on_memory_recall", "observer", "agent node, after recall, before the first model call"),
        Point("on_permission_request", "observer", "controller, as the run pauses"),
        Point("on_permission_result", "observer", "controller, as a paused run resumes"),
        Point("on_tool_round_start", "observer", "tool node, after permissions, before tools"),
        Point("on_tool_start", "observer", "tool node, before each tool runs"),
        Point("after_tool_call", "interceptor", "tool node, after each tool ran"),
        Point("on_tool_end", "observer", "tool node, after each tool ran"),
        Point("after_tool_round", "interceptor", "tool node, after the round's tools"),
        Point("on_error", "observer", "wherever a run, agent or model call fails"),
        Point("on_run_end", "observer", "controller, as a run segment ends (also on pause)"),
    )
}

HOOK_PREFIXES = ("before_", "after_", "on_")


class Hooks:
    """Lifecycle hooks for a run. Every method is a no-op; override the ones you need.

    The order below is the order of one run: `before_run`, `on_run_start`, then per agent
    step `on_agent_start`, `before_model_request`, `on_model_start`, `after_model_request`,
    `on_model_end`, `before_tool_call` (per call), `on_agent_end`; per tool round
    `on_tool_round_start`, then per call `on_tool_start`, `after_tool_call`, `on_tool_end`,
    then `after_tool_round`; and `on_run_end` when the segment ends (completed, failed,
    cancelled, or paused for permission: a resume starts a new segment with
    `on_run_start` (`run.resumed`) then `on_permission_result`).
    """

    # --- run -----------------------------------------------------------------------------

    async def before_run(self, run: RunInfo, content: str) -> str | None:
        """Rewrite the user's message. Runs before it is stored, so the original never
        reaches the event log, the history or the model. Not called on resume."""
        return None

    async def on_run_start(self, run: RunInfo) -> None:
        """A run segment starts (`run.segment`: new, resumed or recovered)."""

    async def on_run_end(self, run: RunInfo, end: RunEnd) -> None:
        """A run segment ended; `end.status == "waiting"` means it paused for permission.
        A failure here is logged, never raised: the run's outcome is already decided."""

    async def on_error(self, run: RunInfo, failure: Failure) -> None:
        """A run, agent invocation or model call failed (see `Failure.scope`). A failure
        here is logged, never raised."""

    # --- agent steps and model calls ----------------------------------------------------

    async def on_agent_start(self, run: RunInfo, agent: AgentStep) -> None:
        """An agent step starts (`agent.round == 1`: a new invocation)."""

    async def on_agent_end(self, run: RunInfo, agent: AgentStep, end: AgentStepEnd) -> None:
        """An agent step ended; `end.outcome` set means the invocation is over."""

    async def before_model_request(
        self, run: RunInfo, agent: AgentStep, request: ModelRequest
    ) -> ModelRequest | None:
        """Rewrite the messages or the tool list sent to the model."""
        return None

    async def on_model_start(self, run: RunInfo, agent: AgentStep, request: ModelRequest) -> None:
        """The final request is about to be sent."""

    async def after_model_request(
        self, run: RunInfo, agent: AgentStep, request: ModelRequest, response: ModelResponse
    ) -> ModelResponse | None:
        """Rewrite the model's answer (its text or its tool calls) before anything records
        it."""
        return None

    async def on_model_end(
        self, run: RunInfo, agent: AgentStep, request: ModelRequest, response: ModelResponse
    ) -> None:
        """The model answered (final, rewritten response)."""

    async def before_tool_call(self, run: RunInfo, call: ToolCall) -> ToolCall | Refuse | None:
        """Rewrite a call's arguments (return `call.with_arguments(...)`) or refuse it
        (return `Refuse("reason the model reads")`). Runs when the model's answer is
        turned into the round, before anyone is asked for permission: the person approving
        sees the rewritten call, and the ledger and events record it."""
        return None

    async def on_compaction(self, run: RunInfo, agent: AgentStep, compaction: Compaction) -> None:
        """An agent's memory was compacted to fit its model's context window."""

    async def on_memory_recall(self, run: RunInfo, agent: AgentStep, recall: MemoryRecall) -> None:
        """Memories were recalled into the agent's request (`memory.recall`), once per agent
        invocation of a message (never again on a resume)."""

    # --- permissions --------------------------------------------------------------------

    async def on_permission_request(self, run: RunInfo, request: PermissionRequest) -> None:
        """The run pauses: these calls wait for a decision."""

    async def on_permission_result(self, run: RunInfo, result: PermissionResult) -> None:
        """A person answered; the paused run continues."""

    # --- tool rounds --------------------------------------------------------------------

    async def on_tool_round_start(self, run: RunInfo, round: ToolRound) -> None:
        """One invocation's tool round starts (after permissions, before any tool runs)."""

    async def on_tool_start(self, run: RunInfo, call: ToolCall) -> None:
        """A tool is about to run (approved, not refused)."""

    async def after_tool_call(
        self, run: RunInfo, call: ToolCall, result: ToolResult
    ) -> ToolResult | None:
        """Rewrite a call's result before the model, the ledger and the event log see it.
        Also called for denied and refused calls (their result is the error text)."""
        return None

    async def on_tool_end(self, run: RunInfo, outcome: ToolOutcome) -> None:
        """A call finished (final result)."""

    async def after_tool_round(
        self, run: RunInfo, round: ToolRound
    ) -> str | ChatMessage | list[str | ChatMessage] | None:
        """Add messages after the round's tool results (a reminder, a reflection). A string
        becomes a user message. Messages of several hooks are added in hook order."""
        return None

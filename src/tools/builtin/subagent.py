"""`call_subagent`: the lead's delegation tool.

The tool node intercepts calls to it (they start a subagent invocation whose final answer
becomes the call's result), so the function body below only runs if someone registers it for
an agent graph without subagent support.
"""

from __future__ import annotations

from ..base import ToolResult
from ..decorator import tool


@tool(name="call_subagent")
async def call_subagent(agent_name: str, instruction: str) -> ToolResult:
    """Delegate a focused task to a subagent; its final answer is returned as this call's result.
    Several calls in one response run in parallel.

    Args:
        agent_name: Name of the subagent (see the list of subagents in your instructions).
        instruction: A self-contained instruction: the subagent sees nothing else of the conversation.
    """
    return ToolResult.fail("call_subagent is handled by the orchestrator")

"""`handoff`: pass the conversation to another agent of an agent group.

Agent groups (a workflow node of kind `group`, see `artifactflow.workflows.group`) intercept
calls to it: the named agent speaks next. Targets are declared in the agent's front matter
(`handoffs: [billing_agent]`). The function body only runs if an agent outside a group calls
it, and tells the model so.
"""

from __future__ import annotations

from ..base import ToolResult
from ..decorator import tool


@tool(name="handoff")
async def handoff(agent: str, message: str = "") -> ToolResult:
    """Hand the conversation to another agent, who continues it from here. Use it when the
    request is better handled by one of the agents named in your instructions.

    Args:
        agent: Name of the agent to hand over to (one of those your instructions list).
        message: What the next agent should know: the request and what you found so far.
    """
    return ToolResult.fail("handoff only works inside an agent group; answer the request yourself")

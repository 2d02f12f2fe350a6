"""The agent's memory tools: `memory_save(text, scope)` and `memory_search(query, mode, limit)`.

An agent gets them by listing them in its `tools:`; both are AUTO (overridable in
`permissions:` like any tool). They are built-ins so every registry knows them (config checks,
workflow validation), and they reach long-term memory through the `memory` service
(`ToolContext.service`), which the facade provides (`artifactflow.memory.tools.MemoryTools`)
behind the small `MemoryAccess` protocol below: this layer does not import the memory
package. A save's id comes from its message id and tool call id, so a round replayed after a
crash saves once; that is also why the tools may run again after a crash (`idempotent`).
"""

from __future__ import annotations

from typing import Any, Literal, Protocol

from ...errors import UserError
from ..base import ToolResult
from ..context import ToolContext
from ..decorator import tool

Scope = Literal["global", "project", "conversation"]
Mode = Literal["hybrid", "semantic", "recency"]


class MemoryAccess(Protocol):
    """What the memory tools need of the `memory` service."""

    async def save(self, ctx: ToolContext, text: str, scope: str) -> dict[str, Any]:
        """Save `text` for the run `ctx` serves: `{id, scope, status: saved | deduped}`;
        `UserError` with a message for the model when it cannot."""
        ...

    async def search(self, ctx: ToolContext, query: str, mode: str, limit: int) -> dict[str, Any]:
        """`{mode, memories: [{id, text, scope, score}]}` from what the run may see."""
        ...


@tool(permission="auto", idempotent=True)
async def memory_save(text: str, ctx: ToolContext, scope: Scope = "global") -> ToolResult:
    """Save a fact worth remembering in later conversations (a preference, a decision, a name).

    Args:
        text: the fact, self-contained (it is read later without this conversation)
        scope: global (every conversation of this user), project (this conversation's
            project) or conversation (this conversation only)
    """
    memory: MemoryAccess = ctx.service("memory")
    try:
        return ToolResult(success=True, data=await memory.save(ctx, text, scope))
    except UserError as error:
        return ToolResult.fail(str(error))


@tool(permission="auto", idempotent=True)
async def memory_search(query: str, ctx: ToolContext, mode: Mode = "hybrid", limit: int = 5) -> ToolResult:
    """Search what was saved with memory_save (this user's global memories, this project's and
    this conversation's).

    Args:
        query: what to look for, in your own words
        mode: hybrid (meaning and exact words, default), semantic (meaning) or recency (newest)
        limit: how many memories to return (1-50)
    """
    memory: MemoryAccess = ctx.service("memory")
    try:
        return ToolResult(success=True, data=await memory.search(ctx, query, mode, max(1, min(limit, 50))))
    except UserError as error:
        return ToolResult.fail(str(error))


MEMORY_TOOLS = [memory_save, memory_search]

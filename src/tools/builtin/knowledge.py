"""`knowledge_search(query, base?, limit?)`: passages of the knowledge bases (documents added
with `artifactflow knowledge add`). AUTO, a built-in so every registry knows it (config checks,
workflow validation); it reaches the bases through the `knowledge` service the facade provides
(`artifactflow.memory.knowledge_tools.KnowledgeService`) behind `KnowledgeAccess`: this layer
does not import the memory package.
"""

from __future__ import annotations

from typing import Any, Protocol

from ...errors import UserError
from ..base import ToolResult
from ..context import ToolContext
from ..decorator import tool


class KnowledgeAccess(Protocol):
    async def search(self, ctx: ToolContext, query: str, base: str | None, limit: int) -> dict[str, Any]:
        """`{mode, passages: [{id, base, source, score, text}]}` from the run's user's bases."""
        ...


@tool(name="knowledge_search", permission="auto", idempotent=True)
async def knowledge_search(ctx: ToolContext, query: str, base: str | None = None, limit: int = 5) -> ToolResult:
    """Search the knowledge bases (documents added with `artifactflow knowledge add`) and
    return the best matching passages with their source.

    Args:
        query: What to look for, in words likely to appear in the passage.
        base: One knowledge base to search; leave it out to search all of them.
        limit: How many passages to return (1-20).
    """
    knowledge: KnowledgeAccess = ctx.service("knowledge")
    try:
        found = await knowledge.search(ctx, query, base, max(1, min(int(limit), 20)))
    except UserError as error:
        return ToolResult.fail(str(error))
    if not found.get("passages"):
        found["note"] = "nothing found; try other words or another base"
    return ToolResult(success=True, data=found)


KNOWLEDGE_TOOLS = [knowledge_search]

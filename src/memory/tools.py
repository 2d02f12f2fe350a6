"""The agent's memory tools: `memory_save(text, scope)` and `memory_search(query, mode, limit)`.

An agent gets them by listing them in its `tools:`; both are AUTO (overridable in
`permissions:` like any tool). They reach the `MemoryStore` the facade hands the engine as
the `memory` service (`ToolContext.service`), and learn the user and the project from the
conversation the call belongs to. A save's id comes from its message id and tool call id
(`call_key`), so a round replayed after a crash saves once; that is also why the tool may be
re-run after a crash (`idempotent=True`).

What a run may search: the user's global memories, its project's (if the conversation has
one) and its own conversation's; never another project's or another conversation's.
"""

from __future__ import annotations

from typing import Any, Literal

from ..errors import UserError
from ..tools.base import ToolResult
from ..tools.context import ToolContext
from ..tools.decorator import tool
from .store import LOCAL_USER, MemoryStore, call_key

Scope = Literal["global", "project", "conversation"]


async def run_scope(ctx: ToolContext) -> tuple[MemoryStore, str, str | None]:
    """The memory store, the user and the project of the run `ctx` serves."""
    memory: MemoryStore = ctx.service("memory")
    conversation: Any = await memory.store.get_conversation(ctx.conversation_id)  # type: ignore[attr-defined]
    user = (conversation or {}).get("user_id") or LOCAL_USER
    project = (conversation or {}).get("project")
    return memory, user, project


def run_namespaces(user: str, project: str | None, conversation_id: str) -> list[tuple[str, ...]]:
    spaces: list[tuple[str, ...]] = [(user, "global")]
    if project:
        spaces.append((user, "project", project))
    spaces.append((user, "conversation", conversation_id))
    return spaces


@tool(permission="auto", idempotent=True)
async def memory_save(text: str, ctx: ToolContext, scope: Scope = "global") -> ToolResult:
    """Save a fact worth remembering in later conversations (a preference, a decision, a name).

    Args:
        text: the fact, self-contained (it is read later without this conversation)
        scope: global (every conversation of this user), project (this conversation's
            project) or conversation (this conversation only)
    """
    memory, user, project = await run_scope(ctx)
    if scope == "project" and not project:
        return ToolResult.fail("this conversation has no project; save with scope 'global' or 'conversation'")
    namespace = {
        "global": (user, "global"),
        "project": (user, "project", project or ""),
        "conversation": (user, "conversation", ctx.conversation_id),
    }[scope]
    try:
        saved = await memory.add_memory(namespace, text, key=call_key(ctx.message_id, ctx.tool_call_id))
    except UserError as error:
        return ToolResult.fail(str(error))
    status = "deduped" if saved.deduped else "saved"
    return ToolResult(success=True, data={"id": saved.id, "scope": scope, "status": status})


@tool(permission="auto", idempotent=True)
async def memory_search(
    query: str, ctx: ToolContext, mode: Literal["hybrid", "semantic", "recency"] = "hybrid", limit: int = 5
) -> ToolResult:
    """Search what was saved with memory_save (this user's global memories, this project's and
    this conversation's).

    Args:
        query: what to look for, in your own words
        mode: hybrid (meaning and exact words, default), semantic (meaning) or recency (newest)
        limit: how many memories to return (1-50)
    """
    memory, user, project = await run_scope(ctx)
    found = await memory.search_memories(
        run_namespaces(user, project, ctx.conversation_id), query, mode=mode, limit=max(1, min(limit, 50))
    )
    hits = [{"id": h.id, "text": h.text, "scope": h.namespace[1], "score": round(h.score, 4)} for h in found.hits]
    return ToolResult(success=True, data={"mode": found.mode, "memories": hits})


MEMORY_TOOLS = [memory_save, memory_search]

"""`MemoryTools`: the `memory` service behind the built-in `memory_save` / `memory_search`
tools (`tools/builtin/memory.py`, protocol `MemoryAccess`).

It learns the user and the project from the conversation the call belongs to. What a run may
search: the user's global memories, its project's (if the conversation has one) and its own
conversation's; never another project's or another conversation's. A save is keyed by the
message id and the tool call id (`call_key`): a round replayed after a crash saves once.
"""

from __future__ import annotations

from typing import Any

from ..errors import UserError
from ..tools.context import ToolContext
from .records import call_key
from .store import LOCAL_USER, MemoryStore


def run_namespaces(user: str, project: str | None, conversation_id: str) -> list[tuple[str, ...]]:
    spaces: list[tuple[str, ...]] = [(user, "global")]
    if project:
        spaces.append((user, "project", project))
    spaces.append((user, "conversation", conversation_id))
    return spaces


class MemoryTools:
    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def run_scope(self, conversation_id: str) -> tuple[str, str | None]:
        """The user and the project of a conversation."""
        conversation: Any = await self.store.store.get_conversation(conversation_id)  # type: ignore[attr-defined]
        user = (conversation or {}).get("user_id") or LOCAL_USER
        return user, (conversation or {}).get("project")

    async def save(self, ctx: ToolContext, text: str, scope: str) -> dict[str, Any]:
        user, project = await self.run_scope(ctx.conversation_id)
        if scope == "project" and not project:
            raise UserError("this conversation has no project; save with scope 'global' or 'conversation'")
        namespace = {
            "global": (user, "global"),
            "project": (user, "project", project or ""),
            "conversation": (user, "conversation", ctx.conversation_id),
        }[scope]
        saved = await self.store.add_memory(namespace, text, key=call_key(ctx.message_id, ctx.tool_call_id))
        return {"id": saved.id, "scope": scope, "status": "deduped" if saved.deduped else "saved"}

    async def search(self, ctx: ToolContext, query: str, mode: str, limit: int) -> dict[str, Any]:
        user, project = await self.run_scope(ctx.conversation_id)
        found = await self.store.search_memories(
            run_namespaces(user, project, ctx.conversation_id), query, mode=mode, limit=limit
        )
        hits = [{"id": h.id, "text": h.text, "scope": h.namespace[1], "score": round(h.score, 4)} for h in found.hits]
        return {"mode": found.mode, "memories": hits}

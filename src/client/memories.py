"""`client.memories`: long-term memory from outside a run (the CLI's `memory` commands, the
HTTP `/api/v1/memories` routes). A thin view over `MemoryStore` (`memory/store.py`);
`user_id` scopes everything to one user (None: the local user of a store without accounts),
and another user's memory answers `NotFoundError` exactly like a missing one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from ..errors import MemoryTextError, NotFoundError
from ..memory import (
    LOCAL_USER,
    MemoryHit,
    MemorySearchResult,
    MemoryStore,
    SavedMemory,
    scope_namespace,
)

MemoryScope = Literal["global", "project", "conversation"]
SearchMode = Literal["recency", "semantic", "hybrid"]


def _user_spaces(user_id: str | None) -> list[tuple[str, ...]]:
    """A user's own memories in every scope (knowledge bases are searched apart)."""
    user = user_id or LOCAL_USER
    return [(user, "global"), (user, "project"), (user, "conversation")]


class Memories:
    """Add, search, list, forget and re-embed memories."""

    def __init__(self, store: MemoryStore) -> None:
        self.store = store

    async def add(
        self, text: str, *, scope: MemoryScope = "global", project: str | None = None,
        conversation_id: str | None = None, user_id: str | None = None,
    ) -> SavedMemory:
        """Save `text` (empty or longer than `memory.max_chars`: `MemoryTextError`, nothing
        stored); a near-duplicate in the same scope is updated and comes back `deduped`."""
        namespace = scope_namespace(user_id, scope, project=project, conversation_id=conversation_id)
        text = self.store.check_text(text)
        if scope == "conversation":
            conversation = await self.store.store.get_conversation(namespace[2])  # type: ignore[attr-defined]
            if conversation is None or (user_id is not None and conversation["user_id"] != user_id):
                raise NotFoundError(f"conversation {namespace[2]} not found")
        return await self.store.add_memory(namespace, text)

    async def add_many(
        self, texts: Sequence[str], *, scope: MemoryScope = "global", project: str | None = None,
        conversation_id: str | None = None, user_id: str | None = None,
    ) -> list[str]:
        """Import many memories into one scope, in batches (embedded together, one
        transaction per batch); their ids, in order. Every text is checked first: an empty or
        over-long one raises `MemoryTextError` naming its position, and nothing is stored.
        An import merges nothing (no text is lost; run it twice and each is there twice)."""
        namespace = scope_namespace(user_id, scope, project=project, conversation_id=conversation_id)
        checked = []
        for number, text in enumerate(texts, start=1):
            try:
                checked.append(self.store.check_text(text))
            except MemoryTextError as exc:
                raise MemoryTextError(f"memory {number} of {len(texts)}: {exc}") from exc
        if scope == "conversation":
            conversation = await self.store.store.get_conversation(namespace[2])  # type: ignore[attr-defined]
            if conversation is None or (user_id is not None and conversation["user_id"] != user_id):
                raise NotFoundError(f"conversation {namespace[2]} not found")
        return await self.store.add_many(namespace, checked)

    async def history(self, memory_id: str, *, user_id: str | None = None) -> list[dict[str, Any]]:
        """The memory's previous versions (texts an update replaced), oldest first."""
        found = await self.store.history(user_id, memory_id)
        if found is None:
            raise NotFoundError(f"memory {memory_id} not found")
        return found

    async def search(
        self, query: str, *, mode: SearchMode = "hybrid", limit: int = 10, user_id: str | None = None
    ) -> MemorySearchResult:
        """The user's best `limit` memories for `query`; `.mode` says which mode ran."""
        return await self.store.search_memories(_user_spaces(user_id), query, mode=mode, limit=limit)

    async def list(self, *, user_id: str | None = None, limit: int = 100, offset: int = 0) -> list[MemoryHit]:
        """The user's memories, newest first."""
        return await self.store.list_memories(_user_spaces(user_id), limit=limit, offset=offset)

    async def get(self, memory_id: str, *, user_id: str | None = None) -> MemoryHit:
        hit = await self.store.get_memory(user_id, memory_id)
        if hit is None:
            raise NotFoundError(f"memory {memory_id} not found")
        return hit

    async def forget(self, memory_id: str, *, user_id: str | None = None) -> None:
        """Delete the memory; `NotFoundError` when there is none (or it is another user's)."""
        if not await self.store.forget(user_id, memory_id):
            raise NotFoundError(f"memory {memory_id} not found")

    async def reindex(self, *, user_id: str | None = None) -> int:
        """Re-embed memories whose vectors another embedder made (after `memory.embedder`
        changed); how many were re-embedded."""
        return await self.store.reindex(user_id)

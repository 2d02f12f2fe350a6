"""`client.knowledge`: knowledge bases (documents searched by agents and, with
`knowledge.inject`, recalled before the model call). A thin view over `memory/knowledge.py`;
`user_id` scopes every call to that user's bases (None: the local user)."""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..memory.knowledge import Added, Document, KnowledgeBases
from ..memory.recall import memory_store, store_in
from ..memory.store import MemoryStore

if TYPE_CHECKING:
    from ..core.engine import Engine
    from ..memory.search import MemorySearchResult


class Knowledge:
    """Add, list, remove and search the documents of knowledge bases."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @property
    def _bases(self) -> KnowledgeBases:
        services = self._engine.services
        return KnowledgeBases(memory_store(services), services.settings.knowledge)

    @property
    def _rows(self) -> KnowledgeBases:
        """For listing and removing: no vectors needed, so no embedder is loaded for them."""
        services = self._engine.services
        memory = store_in(services.extras) or MemoryStore(services.store, services.settings.memory, embedder=None)
        return KnowledgeBases(memory, services.settings.knowledge)

    async def add(
        self, paths: Sequence[str | Path], *, base: str | None = None, user_id: str | None = None
    ) -> builtins.list[Added]:
        """Ingest Markdown, text, HTML and PDF files (a folder: its readable files); a file
        added again replaces its chunks when its text changed."""
        return await self._bases.add(paths, base=base, user_id=user_id)

    async def list(self, *, base: str | None = None, user_id: str | None = None) -> builtins.list[Document]:
        return await self._rows.list(base=base, user_id=user_id)

    async def remove(
        self, sources: Sequence[str], *, base: str | None = None, user_id: str | None = None
    ) -> int:
        """Delete documents by path (or `artifact:` source); the number of chunks deleted."""
        return await self._rows.remove(sources, base=base, user_id=user_id)

    async def search(
        self, query: str, *, base: str | None = None, user_id: str | None = None, limit: int = 5
    ) -> MemorySearchResult:
        return await self._bases.search(query, base=base, user_id=user_id, limit=limit)

"""The `knowledge` service behind the built-in `knowledge_search` tool
(`tools/builtin/knowledge.py`), and the artifact indexer (`knowledge.index_artifacts`: a hook
that indexes every artifact version an agent saves). Both learn the user from the
conversation, so a user's agents only ever search that user's bases.
"""

from __future__ import annotations

from typing import Any

from ..hooks.base import Hooks
from ..hooks.types import RunInfo, ToolOutcome
from ..settings.knowledge import KnowledgeSettings
from ..tools.context import ToolContext
from .knowledge import ARTIFACTS_BASE, KnowledgeBases, source_of
from .store import MemoryStore

ARTIFACT_WRITES = frozenset({"create_artifact", "update_artifact", "rewrite_artifact"})


class KnowledgeService:
    """The `knowledge` service behind the built-in `knowledge_search` (`KnowledgeAccess`)."""

    def __init__(self, memory: MemoryStore, settings: KnowledgeSettings) -> None:
        self.bases = KnowledgeBases(memory, settings)

    async def search(self, ctx: ToolContext, query: str, base: str | None, limit: int) -> dict[str, Any]:
        conversation: Any = await self.bases.memory.store.get_conversation(ctx.conversation_id)  # type: ignore[attr-defined]
        found = await self.bases.search(query, base=base, user_id=(conversation or {}).get("user_id"), limit=limit)
        sources = await source_of(self.bases.memory, [h.id for h in found.hits])
        passages = [
            {"id": h.id, "base": h.namespace[2], "source": sources.get(h.id, ""), "score": h.score, "text": h.text}
            for h in found.hits
        ]
        return {"mode": found.mode, "passages": passages}


class ArtifactIndexer(Hooks):
    """Indexes each artifact version an agent writes into the base `artifacts`
    (`knowledge.index_artifacts`); its chunks replace the previous version's."""

    name = "knowledge.index_artifacts"

    def __init__(self, services: Any) -> None:
        self.services = services

    async def on_tool_end(self, run: RunInfo, outcome: ToolOutcome) -> None:
        call, result = outcome.call, outcome.result
        if call.name not in ARTIFACT_WRITES or not result.success:
            return
        artifact_id = result.metadata.get("artifact_id")
        if not isinstance(artifact_id, str):
            return
        store = self.services.store
        artifact = await store.get_artifact(run.conversation_id, artifact_id)
        if artifact is None:
            return
        conversation = await store.get_conversation(run.conversation_id)
        from .recall import memory_store

        bases = KnowledgeBases(memory_store(self.services), self.services.settings.knowledge)
        await bases.add_text(
            f"artifact:{run.conversation_id}/{artifact_id}", artifact["content"],
            title=artifact.get("title"), base=ARTIFACTS_BASE, user_id=(conversation or {}).get("user_id"),
        )

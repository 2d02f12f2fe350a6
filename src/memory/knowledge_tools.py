"""`knowledge_search` (a tool an agent lists in its `tools:`) and the artifact indexer
(`knowledge.index_artifacts`: a hook that indexes every artifact version an agent saves).

Both find the process's `MemoryStore` in the services (`recall.memory_store`) and the user from
the conversation, so a user's agents only ever search that user's bases.
"""

from __future__ import annotations

from typing import Any

from ..hooks.base import Hooks
from ..hooks.types import RunInfo, ToolOutcome
from ..tools.base import ToolResult
from ..tools.context import ToolContext
from ..tools.decorator import tool
from .knowledge import ARTIFACTS_BASE, KnowledgeBases, source_of

ARTIFACT_WRITES = frozenset({"create_artifact", "update_artifact", "rewrite_artifact"})


def _bases(services: dict[str, Any]) -> KnowledgeBases:
    from .recall import store_in
    from .store import MemoryStore

    memory = store_in(services) or MemoryStore(services["store"], services["settings"].memory)
    return KnowledgeBases(memory, services["settings"].knowledge)


@tool(name="knowledge_search", permission="auto", idempotent=True)
async def knowledge_search(ctx: ToolContext, query: str, base: str | None = None, limit: int = 5) -> ToolResult:
    """Search the knowledge bases (documents added with `artifactflow knowledge add`) and
    return the best matching passages with their source.

    Args:
        query: What to look for, in words likely to appear in the passage.
        base: One knowledge base to search; leave it out to search all of them.
        limit: How many passages to return (1-20).
    """
    limit = max(1, min(int(limit), 20))
    store = ctx.service("store")
    conversation = await store.get_conversation(ctx.conversation_id)
    bases = _bases(ctx.services)
    found = await bases.search(query, base=base, user_id=(conversation or {}).get("user_id"), limit=limit)
    sources = await source_of(bases.memory, [h.id for h in found.hits])
    passages = [
        {"id": h.id, "base": h.namespace[2], "source": sources.get(h.id, ""), "score": h.score, "text": h.text}
        for h in found.hits
    ]
    if not passages:
        return ToolResult(success=True, data={"mode": found.mode, "passages": [],
                                              "note": "nothing found; try other words or another base"})
    return ToolResult(success=True, data={"mode": found.mode, "passages": passages})


KNOWLEDGE_TOOLS = [knowledge_search]


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

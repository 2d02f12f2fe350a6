"""How the facade plugs memory into an engine it opened (the engine imports none of this):
the recaller on `Services.recaller`, the process's `MemoryStore` (behind `Services.extras["memory"]`)
when something will use it, and the artifact indexer among the hooks when
`knowledge.index_artifacts` is on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .knowledge_tools import KNOWLEDGE_TOOLS, ArtifactIndexer
from .recall import MemoryRecaller, memory_store

if TYPE_CHECKING:
    from ..core.context import Services

__all__ = ["KNOWLEDGE_TOOLS", "plug_memory"]


def plug_memory(services: Services) -> None:
    settings = services.settings
    services.recaller = MemoryRecaller(services)
    tool_names = {t.name for t in KNOWLEDGE_TOOLS}
    listed = any(tool_names & set(agent.tools) for agent in services.agents.values())
    if settings.memory.recall or settings.knowledge.inject or settings.knowledge.index_artifacts or listed:
        memory_store(services)  # loads the embedder once, now rather than in the first run
    if settings.knowledge.index_artifacts:
        services.hooks.add(ArtifactIndexer(services))

"""How the facade plugs memory into an engine it opened (the engine imports none of this):
the recaller on `Services.recaller`, the `knowledge` service of the built-in `knowledge_search`
(over the process's `MemoryStore`, the one behind the `memory` service), and the artifact
indexer among the hooks when `knowledge.index_artifacts` is on."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .knowledge_tools import ArtifactIndexer, KnowledgeService
from .recall import MemoryRecaller, memory_store

if TYPE_CHECKING:
    from ..core.context import Services

__all__ = ["plug_memory"]


def plug_memory(services: Services) -> None:
    settings = services.settings
    services.recaller = MemoryRecaller(services)
    services.extras["knowledge"] = KnowledgeService(memory_store(services), settings.knowledge)
    if settings.knowledge.index_artifacts:
        services.hooks.add(ArtifactIndexer(services))

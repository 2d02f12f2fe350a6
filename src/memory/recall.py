"""`MemoryRecaller`: the `core.recall.Recaller` the facade hands the engine.

Before an agent invocation's first model call of a message (the engine decides when, and
keys it so it happens once: `core/recall.py`), the profile's policy searches the user's
global memories, the conversation's project and the conversation itself in one search (their
scores are comparable), keeps what is about the query, fits the profile's token budget, orders
it and renders one delimited system section (`profiles.py`). With `knowledge.inject`, the best
chunks of `knowledge.inject_bases` join the same section, after the memories.

Who recalls: the lead when `memory.recall` (or `knowledge.inject`) is on, unless its spec says
`recall: false`; a subagent only when its spec says `recall: true`; a workflow agent step
whenever its node names a `memory_profile`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..core.recall import Recalled, RecallRequest
from .knowledge import knowledge_namespace, source_of
from .profiles import fit, ordered, profile_named, relevant
from .store import LOCAL_USER, MemoryStore
from .vector_file import VECTOR_DIR

if TYPE_CHECKING:
    from ..agents.spec import AgentSpec
    from ..core.context import Services


def memory_store(services: Services) -> MemoryStore:
    """The process's `MemoryStore` (one per process: it holds the embedder and the vector
    cache): the one behind the `memory` service the facade installs (`MemoryTools`), else one
    made on first use and kept in `services.extras["memory_store"]`."""
    return store_in(services.extras) or services.extras.setdefault(
        "memory_store", MemoryStore(services.store, services.settings.memory,
                                    vector_dir=services.settings.data_dir / VECTOR_DIR)
    )


def store_in(extras: dict[str, Any]) -> MemoryStore | None:
    """The `MemoryStore` among the services (`extras` or a tool's `ToolContext.services`)."""
    for found in (extras.get("memory"), extras.get("memory_store")):
        if isinstance(found, MemoryStore):
            return found
        inner = getattr(found, "store", None)
        if isinstance(inner, MemoryStore):
            return inner
    return None


class MemoryRecaller:
    def __init__(self, services: Services) -> None:
        self.services = services

    @property
    def settings(self) -> Any:
        return self.services.settings

    def wants(self, spec: AgentSpec, *, lead: bool, profile: str | None = None) -> bool:
        if profile:
            return True
        if spec.recall is not None:
            return spec.recall
        return lead and (self.settings.memory.recall or self.settings.knowledge.inject)

    async def recall(self, request: RecallRequest) -> Recalled | None:
        settings = self.settings
        asked = request.asked
        profile = profile_named(settings.memory, request.profile)
        store = memory_store(self.services)
        user = request.user_id or LOCAL_USER
        namespaces: list[tuple[str, ...]] = [(user, "global")]
        if request.project:
            namespaces.append((user, "project", request.project))
        namespaces.append((user, "conversation", request.conversation_id))
        mode = profile.mode
        memories = []
        if settings.memory.recall or asked:
            found = await store.search_memories(namespaces, request.query, mode=profile.mode, limit=profile.limit)
            mode = found.mode
            memories = ordered(relevant(found.hits, found.mode, profile), found.mode, profile.order)
        chunks = []
        sources: dict[str, str] = {}
        if settings.knowledge.inject and request.query.strip():
            bases = [knowledge_namespace(user, b) for b in settings.knowledge.inject_bases]
            found_kb = await store.search_memories(
                bases, request.query, mode="hybrid", limit=settings.knowledge.inject_limit
            )
            chunks = ordered(relevant(found_kb.hits, found_kb.mode, profile), found_kb.mode)
            namespaces += bases
            sources = await source_of(store, [h.id for h in chunks])
        fitted = fit(profile, mode, memories, chunks, sources)
        if fitted is None:
            return None
        return Recalled(
            text=fitted.text,
            ids=[h.id for h in [*fitted.memories, *fitted.chunks]],
            profile=profile.name,
            mode=mode,
            tokens=fitted.tokens,
            budget=profile.budget_tokens,
            namespaces=[list(n) for n in namespaces],
            knowledge_ids=[h.id for h in fitted.chunks],
            items=fitted.items(),
        )

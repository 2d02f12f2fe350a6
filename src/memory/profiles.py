"""Context profiles: look up the profile, fit what the search found to its token budget, order
it, and render the one delimited section recall appends to the system message.

A profile (`memory.profiles`, settings/recall.py) is a token budget, a search policy (`mode`)
and a candidate limit. Relevance: semantic and hybrid scores are cut at the profile's
`min_score` (0.1) and at `relative` (0.75) of the best hit, so a memory about something else
does not ride along just because the budget has room (recency has no relevance to cut on: it
is the newest that fit). Measured with the static embedder on five unrelated facts: a question
sharing words with its fact scores 0.67 against 0.18 for the next; a pure paraphrase ("When
do we bill customers?" for "Invoices go out on the first Monday") 0.13 against 0.09, which the
relative cut still separates. Budget:
items are taken best first while the rendered section stays within `budget_tokens`, estimated
as the context window estimates any text (`core/window/tokens.text_tokens`); one that does
not fit is skipped and smaller ones after it may still fit. Order: newest first for recency,
best score first otherwise; memories before knowledge-base chunks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..core.window.tokens import text_tokens
from ..errors import ConfigError
from ..settings.memory import MemorySettings
from ..settings.recall import ProfileSettings
from .search import MemoryHit

ITEM_CHARS = 200  # of each item's text in the `memory_recalled` event

HEADER = (
    '<recalled_context profile="{profile}" mode="{mode}">\n'
    "Recalled for this message from long-term memory{kb}. It may be out of date or not "
    "apply; the user's current words win.\n"
)
FOOTER = "</recalled_context>"


@dataclass(frozen=True)
class Profile:
    name: str
    budget_tokens: int
    mode: str
    limit: int
    min_score: float = 0.1
    relative: float = 0.75
    order: str = "score"

    @classmethod
    def of(cls, name: str, settings: ProfileSettings) -> Profile:
        return cls(name, settings.budget_tokens, settings.mode, settings.limit,
                   settings.min_score, settings.relative, settings.order)


def profile_named(settings: MemorySettings, name: str | None) -> Profile:
    """The profile `name` (None: `memory.profile`); an unknown name is a `ConfigError`."""
    name = name or settings.profile
    found = settings.profiles.get(name)
    if found is None:
        raise ConfigError(
            f"unknown context profile {name!r} (an agent's or workflow node's `memory_profile`); "
            f"known profiles: {', '.join(settings.profiles)} (add one under memory.profiles)"
        )
    return Profile.of(name, found)


def relevant(hits: list[MemoryHit], mode: str, profile: Profile) -> list[MemoryHit]:
    """Hits about the query: all of them for recency, above the profile's cut-offs otherwise.
    The cut reads each hit's cosine with the query where there is one (a fused hybrid score
    ranks, it does not measure closeness), and always keeps the first hit of a hybrid search
    (an exact name the words found may be far from the query's vector)."""
    if mode == "recency" or not hits:
        return list(hits)
    if mode == "hybrid" and any(h.similarity is not None for h in hits):
        best = max(h.similarity or 0.0 for h in hits)
        floor = max(profile.min_score, profile.relative * best)
        return [h for n, h in enumerate(hits) if n == 0 or (h.similarity or 0.0) >= floor]
    best = max(h.score for h in hits)
    floor = max(profile.min_score, profile.relative * best)
    return [h for h in hits if h.score >= floor and h.score > 0]


def ordered(hits: list[MemoryHit], mode: str, order: str = "score") -> list[MemoryHit]:
    """Newest first for recency and for a profile whose `order` is `newest` (the newest of
    the relevant), best score first otherwise."""
    if mode == "recency" or order == "newest":
        return sorted(hits, key=lambda h: (-h.updated_at, h.id))
    return sorted(hits, key=lambda h: (-h.score, -h.updated_at, h.id))


def _label(namespace: tuple[str, ...]) -> str:
    kind = namespace[1] if len(namespace) > 1 else "memory"
    if kind == "project" and len(namespace) > 2:
        return f"project {namespace[2]}"
    if kind == "knowledge" and len(namespace) > 2:
        return f"knowledge base {namespace[2]}"
    return kind


def _line(hit: MemoryHit, source: str | None = None) -> str:
    text = " ".join(hit.text.split()) if hit.namespace[1:2] != ("knowledge",) else hit.text.strip()
    where = _label(hit.namespace) + (f": {source}" if source else "")
    return f"- [{where}] {text}\n"


@dataclass
class Fitted:
    text: str
    tokens: int
    memories: list[MemoryHit]
    chunks: list[MemoryHit]

    def items(self) -> list[dict[str, Any]]:
        return [
            {"id": h.id, "namespace": list(h.namespace), "text": h.text[:ITEM_CHARS], "score": h.score}
            for h in [*self.memories, *self.chunks]
        ]


def fit(
    profile: Profile,
    mode: str,
    memories: list[MemoryHit],
    chunks: list[MemoryHit],
    sources: dict[str, str] | None = None,
) -> Fitted | None:
    """The section holding as many of `memories` then `chunks` (each best first) as the
    profile's budget allows; None when nothing fits or nothing was found."""
    sources = sources or {}
    header = HEADER.format(profile=profile.name, mode=mode, kb=" and knowledge bases" if chunks else "")
    mem_head, kb_head = "## Memories\n", "## From knowledge bases\n"
    used = text_tokens(header + FOOTER)
    taken_m: list[tuple[MemoryHit, str]] = []
    taken_k: list[tuple[MemoryHit, str]] = []
    for hits, taken, head in ((memories, taken_m, mem_head), (chunks, taken_k, kb_head)):
        for hit in hits:
            line = _line(hit, sources.get(hit.id))
            cost = text_tokens(line) + (0 if taken else text_tokens(head))
            if used + cost > profile.budget_tokens:
                continue
            taken.append((hit, line))
            used += cost
    if not taken_m and not taken_k:
        return None
    body = header
    if taken_m:
        body += mem_head + "".join(line for _, line in taken_m)
    if taken_k:
        body += kb_head + "".join(line for _, line in taken_k)
    text = body + FOOTER
    return Fitted(text, text_tokens(text), [h for h, _ in taken_m], [h for h, _ in taken_k])

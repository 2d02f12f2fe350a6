"""Scoring: how `recency`, `semantic`, `hybrid` (and `lexical`, what hybrid and semantic become
without an embedder) rank the candidates of a search. Weights are `memory.weights`
(docs/memory.md):

    hybrid = w_sem · cosine + w_lex · lexical + w_rec · 0.5^(age / half_life)
    lexical = bm25 / best_bm25_of_query · share_of_query_words_matched     (lexical.py)

Defaults 0.85 / 0.10 / 0.05, half-life 30 days. The lexical part is weighted, not rank-fused:
with plain reciprocal-rank fusion a query whose words miss its target (a paraphrase) lets
lexical look-alikes outrank what the vectors found (measured in issue 24: fusion 9/20 in the
top 3 against vectors' 15/20). Here a lexical miss costs nothing, and a hit (an exact name, a
code) adds up to `w_lex`, enough to settle near-ties in cosine. On tests/data's 200 memories,
w_lex 0.10 keeps the vectors' 17/20 on paraphrases with no shared word, where 0.2 drops to
15/20 (tests/test_memory_ranking.py). A query without code names keeps the vectors' page
(`semantic_first`): the lexical side re-orders the `limit` closest memories.
"""

from __future__ import annotations

import re
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np

from ..settings.memory import SearchWeights
from .cache import Candidates

Mode = Literal["recency", "semantic", "hybrid"]
MODES: tuple[str, ...] = ("recency", "semantic", "hybrid")
LEXICAL_POOL = 100  # BM25 hits read per query (the rest of the lexical side scores 0)


@dataclass
class MemoryHit:
    id: str
    namespace: tuple[str, ...]
    text: str
    score: float
    created_at: float
    updated_at: float
    # cosine with the query (semantic and hybrid): what recall's relevance cut reads, since a
    # fused score says how a memory ranks, not how close it is (profiles.relevant)
    similarity: float | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["namespace"] = list(self.namespace)
        if self.similarity is None:
            del data["similarity"]
        return data


@dataclass
class MemorySearchResult:
    hits: list[MemoryHit] = field(default_factory=list)
    mode: str = "hybrid"  # the mode that actually ran: recency | semantic | hybrid | lexical
    warning: str | None = None  # why another mode ran than the one asked for

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"mode": self.mode, "hits": [hit.to_dict() for hit in self.hits]}
        if self.warning:
            out["warning"] = self.warning
        return out


def recency(updated_at: np.ndarray, weights: SearchWeights, now: float | None = None) -> np.ndarray:
    age_days = np.maximum((time.time() if now is None else now) - updated_at, 0.0) / 86_400.0
    return np.power(0.5, age_days / weights.half_life_days)


def lexical_vector(candidates: Candidates, lexical: list[tuple[int, float]]) -> np.ndarray:
    """The lexical score (0..1, lexical.py) per candidate, 0 where it did not match."""
    out = np.zeros(candidates.size, dtype=np.float64)
    if not lexical:
        return out
    rows = candidates.rows([seq for seq, _ in lexical])
    found = rows >= 0
    out[rows[found]] = np.asarray([score for _, score in lexical], dtype=np.float64)[found]
    return out


_IDENTIFIER = re.compile(r"\w[.:]\w|\w_\w|[a-z][A-Z]|\w\(|^[A-Z0-9_]{3,}$")
SEMANTIC_POOL = 200  # candidates ranked on the semantic side for rank fusion


def identifier_share(query: str) -> float:
    """The share of the query's words that look like code names (`re.sub`, `snake_case`,
    `camelCase`, `f(`, `CONSTANT`): an exact name asks for the lexical side's say."""
    words = query.split()
    if not words:
        return 0.0
    return sum(bool(_IDENTIFIER.search(w)) for w in words) / len(words)


def lexical_weight(query: str, weights: SearchWeights) -> float:
    share = identifier_share(query)
    return weights.lexical + (weights.lexical_identifiers - weights.lexical) * min(1.0, 2 * share)


def combine(
    mode: str,
    candidates: Candidates,
    query_vector: np.ndarray | None,
    lexical: list[tuple[int, float]],
    weights: SearchWeights,
    query: str = "",
    limit: int = 0,
) -> np.ndarray:
    """One score per candidate for `mode` (recency | semantic | hybrid | lexical); -inf for
    the cache's dead rows (cache.py). With `limit`, a hybrid query without code names keeps
    the vectors' `limit` best (`semantic_first`)."""
    if mode == "recency":
        return np.where(candidates.dead, -np.inf, candidates.updated_at.astype(np.float64))  # newest first
    if mode == "lexical":
        lex = lexical_vector(candidates, lexical)
        fresh = recency(candidates.updated_at, weights)
        scores = np.where(lex > 0, weights.lexical * lex + weights.recency * fresh, -np.inf)
        scores[candidates.dead] = -np.inf
        return scores
    assert query_vector is not None
    cosine = candidates.cosine(query_vector)
    cosine[candidates.dead] = -np.inf
    if mode == "semantic":
        return cosine
    scores = _hybrid(candidates, cosine, lexical, weights, query)
    scores[candidates.dead] = -np.inf
    if limit > 0 and identifier_share(query) == 0:
        scores = semantic_first(scores, cosine, limit)
    return scores


def semantic_first(scores: np.ndarray, cosine: np.ndarray, limit: int) -> np.ndarray:
    """`scores` kept only for the `limit` rows closest to the query: for a query without code
    names the lexical side re-orders what the vectors found but cannot push it out. A
    paraphrase's words miss its target, so the words it shares with look-alikes were noise at
    the edge of the page (on the tune split of benchmarks/memory_retrieval.py the only
    paraphrase hybrid lost against cosine alone was one at rank 10 pushed out that way), while
    the re-ordering still lifts answers that share a word (one from rank 7 to 3)."""
    if cosine.size <= limit:
        return scores
    kept = np.full(scores.shape, -np.inf)
    closest = np.argpartition(-cosine, limit - 1)[:limit]
    kept[closest] = scores[closest]
    return kept


def _hybrid(
    candidates: Candidates, cosine: np.ndarray, lexical: list[tuple[int, float]], weights: SearchWeights, query: str,
) -> np.ndarray:
    fresh = recency(candidates.updated_at, weights)
    w_lex = lexical_weight(query, weights)
    if weights.fusion == "weighted":
        return weights.semantic * cosine + w_lex * lexical_vector(candidates, lexical) + weights.recency * fresh
    # reciprocal-rank fusion: each side adds weight / (k + rank) for its own ranking, so a
    # name the lexical side puts first is not lost under cosines that barely differ. Scaled
    # so that first on both sides and new scores 1.
    out = weights.recency * fresh / (weights.rrf_k + 1.0)  # ties go to the newer
    for rank, i in enumerate(top(cosine, SEMANTIC_POOL), start=1):
        out[i] += weights.semantic / (weights.rrf_k + rank)
    for rank, i in enumerate(candidates.rows([seq for seq, _ in lexical]).tolist(), start=1):
        if i >= 0:
            out[i] += w_lex / (weights.rrf_k + rank)
    return out * ((weights.rrf_k + 1.0) / max(weights.semantic + w_lex + weights.recency, 1e-9))


def top(scores: np.ndarray, k: int) -> list[int]:
    """Indexes of the `k` best finite scores, best first."""
    if scores.size == 0 or k <= 0:
        return []
    k = min(k, scores.size)
    part = np.argpartition(-scores, k - 1)[:k] if k < scores.size else np.arange(scores.size)
    ordered = part[np.argsort(-scores[part], kind="stable")]
    return [int(i) for i in ordered if np.isfinite(scores[i])]

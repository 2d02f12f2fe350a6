"""Each process's vectors, per namespace, checked against the store before every search.

A search first reads the versions of the namespaces it covers (one indexed query on
`af_memory_namespaces`); a namespace whose version moved since it was cached (any worker wrote
or deleted in it) is read again whole. Scoring is then numpy over the cached matrices:
cosine over 10,000 × 256 float32 rows is well under a millisecond. Rows whose vector was made
by another embedder (or none) are cached without one and score 0 on the semantic side until
`memory reindex`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from .records import m, namespace_versions


@dataclass
class NamespaceVectors:
    version: int
    ids: list[str]
    matrix: np.ndarray  # (n, dims) float32, unit rows; zero rows for missing/stale vectors
    has_vector: np.ndarray  # (n,) bool
    updated_at: np.ndarray  # (n,) float64


@dataclass
class Candidates:
    """Everything a search scores, the namespaces' caches stacked."""

    ids: list[str]
    matrix: np.ndarray
    has_vector: np.ndarray
    updated_at: np.ndarray

    @property
    def size(self) -> int:
        return len(self.ids)


class VectorCache:
    def __init__(self) -> None:
        self.entries: dict[str, NamespaceVectors] = {}
        self.embedder: str | None = None
        self.dims: int | None = None

    def use(self, embedder: str | None, dims: int | None) -> None:
        if (embedder, dims) != (self.embedder, self.dims):
            self.entries.clear()
            self.embedder, self.dims = embedder, dims

    async def candidates(self, conn: AsyncConnection, prefixes: Sequence[str]) -> Candidates:
        versions = await namespace_versions(conn, prefixes)
        for namespace in [n for n in self.entries if n not in versions and _covered(n, prefixes)]:
            del self.entries[namespace]  # deleted with its conversation
        parts: list[NamespaceVectors] = []
        for namespace, version in sorted(versions.items()):
            entry = self.entries.get(namespace)
            if entry is None or entry.version != version:
                entry = await self._load(conn, namespace, version)
                self.entries[namespace] = entry
            parts.append(entry)
        dims = self.dims or 1
        if not parts:
            return Candidates([], np.zeros((0, dims), np.float32), np.zeros(0, bool), np.zeros(0))
        return Candidates(
            ids=[i for p in parts for i in p.ids],
            matrix=np.concatenate([p.matrix for p in parts]) if len(parts) > 1 else parts[0].matrix,
            has_vector=np.concatenate([p.has_vector for p in parts]),
            updated_at=np.concatenate([p.updated_at for p in parts]),
        )

    async def _load(self, conn: AsyncConnection, namespace: str, version: int) -> NamespaceVectors:
        rows = (await conn.execute(
            sa.select(m.c.id, m.c.embedder, m.c.vector, m.c.updated_at).where(m.c.namespace == namespace)
        )).all()
        dims = self.dims or 1
        matrix = np.zeros((len(rows), dims), dtype=np.float32)
        has = np.zeros(len(rows), dtype=bool)
        for i, row in enumerate(rows):
            if row.vector is not None and row.embedder == self.embedder:
                vector = np.frombuffer(row.vector, dtype=np.float32)
                if vector.shape[0] == dims:
                    matrix[i] = vector
                    has[i] = True
        return NamespaceVectors(
            version=version,
            ids=[row.id for row in rows],
            matrix=matrix,
            has_vector=has,
            updated_at=np.asarray([row.updated_at for row in rows], dtype=np.float64),
        )


def _covered(namespace: str, prefixes: Sequence[str]) -> bool:
    return any(namespace == p or namespace.startswith(p + ".") for p in prefixes)

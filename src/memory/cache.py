"""Each process's vectors, per namespace, checked against the store before every search.

A search first reads the versions of the namespaces it covers (one indexed query on
`af_memory_namespaces`). A namespace whose version moved since it was cached (any worker
wrote or deleted in it) is brought up to date from the change log (`af_memory_changes`: the
rows each version touched), reading only those rows; a cache too far behind the log, or a
namespace seen for the first time, is read whole. Each refresh builds new arrays, so a search
running meanwhile keeps a consistent view. Scoring is numpy over the cached matrices: cosine
over 10,000 × 256 float32 rows takes about a millisecond. Rows whose vector another embedder
made (or none) are cached without one and score 0 on the semantic side until
`memory reindex`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from .records import changed_since, m, namespace_versions

_COLUMNS = (m.c.seq, m.c.id, m.c.embedder, m.c.vector, m.c.updated_at)


@dataclass
class NamespaceVectors:
    version: int
    seqs: np.ndarray  # (n,) int64
    ids: list[str]
    buffer: np.ndarray  # (capacity ≥ n, dims) float32, unit rows; zero rows: no usable vector
    has_vector: np.ndarray  # (n,) bool
    updated_at: np.ndarray  # (n,) float64
    index: dict[str, int] = field(default_factory=dict)  # id → row
    stale: int = 0  # rows with a vector of another embedder (waiting for `memory reindex`)

    def __post_init__(self) -> None:
        if not self.index:
            self.index = {id_: i for i, id_ in enumerate(self.ids)}

    @property
    def matrix(self) -> np.ndarray:
        """The rows in use: a view, unchanged by later appends past its end."""
        return self.buffer[: len(self.ids)]


@dataclass
class Candidates:
    """Everything a search scores: the namespaces' caches stacked."""

    ids: list[str]
    matrix: np.ndarray
    has_vector: np.ndarray
    updated_at: np.ndarray
    index: dict[str, int]
    stale: int = 0

    @property
    def size(self) -> int:
        return len(self.ids)


class VectorCache:
    def __init__(self) -> None:
        self.entries: dict[str, NamespaceVectors] = {}
        self.embedder: str | None = None
        self.dims: int | None = None
        self.locks: dict[str, asyncio.Lock] = {}
        self.reads = {"full": 0, "incremental": 0}  # how namespaces were refreshed (benchmarks)
        # the last stacking of several namespaces, by their versions: a user's searches cover
        # the same few namespaces, and stacking 50,000 rows again would copy ~75 MB each time
        self.stacked: tuple[tuple[tuple[str, int], ...], Candidates] | None = None

    def use(self, embedder: str | None, dims: int | None) -> None:
        if (embedder, dims) != (self.embedder, self.dims):
            self.entries.clear()
            self.stacked = None
            self.embedder, self.dims = embedder, dims

    async def candidates(self, conn: AsyncConnection, prefixes: Sequence[str]) -> Candidates:
        versions = await namespace_versions(conn, prefixes)
        for namespace in [n for n in self.entries if n not in versions and _covered(n, prefixes)]:
            del self.entries[namespace]  # deleted with its conversation
        parts: list[NamespaceVectors] = []
        for namespace, version in sorted(versions.items()):
            entry = self.entries.get(namespace)
            if entry is None or entry.version != version:
                async with self.locks.setdefault(namespace, asyncio.Lock()):  # one refresh at a time
                    entry = self.entries.get(namespace)
                    if entry is None or entry.version != version:
                        entry = await self._refresh(conn, namespace, version, entry)
                        self.entries[namespace] = entry
            parts.append(entry)
        if len(parts) == 1:
            p = parts[0]
            return Candidates(p.ids, p.matrix, p.has_vector, p.updated_at, p.index, p.stale)
        dims = self.dims or 1
        if not parts:
            return Candidates([], np.zeros((0, dims), np.float32), np.zeros(0, bool), np.zeros(0), {})
        signature = tuple(sorted(versions.items()))
        if self.stacked is not None and self.stacked[0] == signature:
            return self.stacked[1]
        ids = [i for p in parts for i in p.ids]
        stacked = Candidates(
            ids=ids,
            matrix=np.concatenate([p.matrix for p in parts]),
            has_vector=np.concatenate([p.has_vector for p in parts]),
            updated_at=np.concatenate([p.updated_at for p in parts]),
            index={id_: i for i, id_ in enumerate(ids)},
            stale=sum(p.stale for p in parts),
        )
        self.stacked = (signature, stacked)
        return stacked

    async def _refresh(
        self, conn: AsyncConnection, namespace: str, version: int, old: NamespaceVectors | None
    ) -> NamespaceVectors:
        seqs = await changed_since(conn, namespace, old.version) if old is not None else None
        if old is None or seqs is None:
            self.reads["full"] += 1
            rows = (await conn.execute(sa.select(*_COLUMNS).where(m.c.namespace == namespace))).all()
            return self._build(version, rows)
        self.reads["incremental"] += 1
        fresh = []
        for start in range(0, len(seqs), 500):
            chunk = seqs[start : start + 500]
            fresh.extend((await conn.execute(
                sa.select(*_COLUMNS).where(m.c.namespace == namespace, m.c.seq.in_(chunk)).order_by(m.c.seq)
            )).all())
        new = self._build(version, fresh)
        keep = ~np.isin(old.seqs, np.asarray(seqs, dtype=np.int64))  # changed or deleted rows go
        n, added = len(old.ids), len(new.ids)
        if keep.all() and n + added <= old.buffer.shape[0]:
            # only additions, and room for them: written past the end of the old view, which
            # searches still running keep using unchanged
            old.buffer[n : n + added] = new.matrix
            index = dict(old.index)
            index.update((id_, n + i) for i, id_ in enumerate(new.ids))
            return NamespaceVectors(
                version=version, seqs=np.concatenate([old.seqs, new.seqs]), ids=old.ids + new.ids,
                buffer=old.buffer, has_vector=np.concatenate([old.has_vector, new.has_vector]),
                updated_at=np.concatenate([old.updated_at, new.updated_at]), index=index,
                stale=old.stale + new.stale,
            )
        ids = [id_ for id_, k in zip(old.ids, keep.tolist(), strict=True) if k] + new.ids
        matrix = np.concatenate([old.matrix[keep], new.matrix])
        if old.stale:  # rows changed: count again from the store
            return self._build(version, (await conn.execute(sa.select(*_COLUMNS).where(m.c.namespace == namespace))).all())
        return NamespaceVectors(
            version=version,
            seqs=np.concatenate([old.seqs[keep], new.seqs]),
            ids=ids,
            buffer=_with_room(matrix),
            has_vector=np.concatenate([old.has_vector[keep], new.has_vector]),
            updated_at=np.concatenate([old.updated_at[keep], new.updated_at]),
        )

    def _build(self, version: int, rows: Sequence[sa.Row]) -> NamespaceVectors:
        dims = self.dims or 1
        n = len(rows)
        matrix = np.zeros((n, dims), dtype=np.float32)
        has = np.fromiter(
            (r[3] is not None and r[2] == self.embedder and len(r[3]) == dims * 4 for r in rows), dtype=bool, count=n
        )
        if has.any():
            blob = b"".join(r[3] for r, ok in zip(rows, has, strict=True) if ok)
            matrix[has] = np.frombuffer(blob, dtype=np.float32).reshape(-1, dims)
        return NamespaceVectors(
            version=version,
            seqs=np.fromiter((r[0] for r in rows), dtype=np.int64, count=n),
            ids=[r[1] for r in rows],
            buffer=_with_room(matrix),
            has_vector=has,
            updated_at=np.fromiter((r[4] for r in rows), dtype=np.float64, count=n),
            stale=sum(1 for r, ok in zip(rows, has.tolist(), strict=True) if not ok and r[2] is not None),
        )


def _with_room(matrix: np.ndarray) -> np.ndarray:
    """`matrix` in a buffer with room for a quarter more rows (appends then copy nothing)."""
    n = matrix.shape[0]
    buffer = np.zeros((n + max(64, n // 4), matrix.shape[1]), dtype=np.float32)
    buffer[:n] = matrix
    return buffer


def _covered(namespace: str, prefixes: Sequence[str]) -> bool:
    return any(namespace == p or namespace.startswith(p + ".") for p in prefixes)

"""Each process's vectors, per namespace, checked against the store before every search.

A search first reads the versions of the namespaces it covers (one indexed query on
`af_memory_namespaces`). A namespace whose version moved since it was cached (any worker
wrote or deleted in it) is brought up to date from the change log (`af_memory_changes`: the
rows each version touched), reading only those rows; a cache too far behind the log is read
whole. A namespace seen for the first time comes from its vector file (vector_file.py: a
memory-mapped matrix, checked against the database and caught up through the same log) when
there is a valid one, else from the database (and the file is then written in the
background).

Rows are identified by `seq`. A cached matrix is never changed in place: new and changed rows
go into a new block after the others, and the old copy of a changed or deleted row stays in
its block marked dead (seq -1, scored -inf), so a search running meanwhile keeps a consistent
view and a write costs no copy of 50,000 rows (the tail of search latency after writes). When
dead rows pass a quarter of the namespace, or blocks pile up, the namespace is compacted.
Scoring is numpy over the blocks: cosine over 50,000 × 384 float32 rows takes a few
milliseconds. Rows whose vector another embedder made (or none) are cached without one and
score 0 on the semantic side until `memory reindex`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from .blas import one_thread
from .records import changed_since, m, namespace_versions
from .vector_file import Snapshot, VectorFiles, samples

_COLUMNS = (m.c.seq, m.c.embedder, m.c.vector, m.c.updated_at)
MAX_BLOCKS = 16  # more, and the small blocks after the first are merged
RESAVE_AFTER = 64  # versions a namespace's file may lag behind before it is written again


@dataclass(frozen=True)
class NamespaceVectors:
    version: int
    seqs: np.ndarray  # (n,) int64; -1: a row since changed or deleted (dead)
    blocks: tuple[np.ndarray, ...]  # (rows, dims) float32 each, unit rows, n rows in all
    has_vector: np.ndarray  # (n,) bool (False for dead rows)
    updated_at: np.ndarray  # (n,) float64
    stale: int = 0  # rows with a vector of another embedder (waiting for `memory reindex`)
    dead: int = 0
    saved: int = -1  # the version its vector file holds (-1: none)

    @property
    def alive(self) -> int:
        return int(self.seqs.shape[0]) - self.dead


@dataclass
class Candidates:
    """Everything a search scores: the namespaces' caches side by side."""

    seqs: np.ndarray
    blocks: tuple[np.ndarray, ...]
    has_vector: np.ndarray
    updated_at: np.ndarray
    stale: int = 0
    _sorter: np.ndarray | None = field(default=None, repr=False)

    @property
    def size(self) -> int:
        return int(self.seqs.shape[0])

    @property
    def dead(self) -> np.ndarray:
        return self.seqs < 0

    def cosine(self, query: np.ndarray) -> np.ndarray:
        """Cosine of every row with `query` (0 where a row has no usable vector)."""
        if not self.blocks:
            return np.zeros(self.size)
        with one_thread():  # blas.py: no spinning BLAS threads on a busy machine
            out = np.concatenate([block @ query for block in self.blocks]).astype(np.float64)
        out[~self.has_vector] = 0.0
        return out

    def vector(self, i: int) -> np.ndarray:
        for block in self.blocks:
            if i < block.shape[0]:
                return np.asarray(block[i])
            i -= block.shape[0]
        raise IndexError(i)

    def rows(self, seqs: Sequence[int]) -> np.ndarray:
        """The row of each of `seqs` (-1 where it is not a live row here)."""
        if self._sorter is None:
            self._sorter = np.argsort(self.seqs, kind="stable")
        wanted = np.asarray(seqs, dtype=np.int64)
        where = np.searchsorted(self.seqs, wanted, sorter=self._sorter)
        where = np.minimum(where, max(self.size - 1, 0))
        found = self._sorter[where] if self.size else np.zeros(len(wanted), np.int64)
        return np.where((self.size > 0) & (self.seqs[found] == wanted) & (wanted >= 0), found, -1)


def _candidates(parts: Sequence[NamespaceVectors], dims: int) -> Candidates:
    if not parts:
        return Candidates(np.zeros(0, np.int64), (np.zeros((0, dims), np.float32),), np.zeros(0, bool), np.zeros(0))
    return Candidates(
        seqs=np.concatenate([p.seqs for p in parts]),
        blocks=tuple(b for p in parts for b in p.blocks),
        has_vector=np.concatenate([p.has_vector for p in parts]),
        updated_at=np.concatenate([p.updated_at for p in parts]),
        stale=sum(p.stale for p in parts),
    )


class VectorCache:
    def __init__(self, files: VectorFiles | None = None) -> None:
        self.entries: dict[str, NamespaceVectors] = {}
        self.files = files
        self.embedder: str | None = None
        self.dims: int | None = None
        self.locks: dict[str, asyncio.Lock] = {}
        # how namespaces were refreshed (tests, benchmarks)
        self.reads = {"full": 0, "incremental": 0, "file": 0}
        # the last candidates, by the namespaces' versions: a user's searches cover the same
        # few namespaces, and their rows' order (for mapping seqs) is sorted once
        self.last: tuple[tuple[tuple[str, int], ...], Candidates] | None = None
        self.writers: list[threading.Thread] = []

    def use(self, embedder: str | None, dims: int | None) -> None:
        if (embedder, dims) != (self.embedder, self.dims):
            self.entries.clear()
            self.last = None
            self.embedder, self.dims = embedder, dims

    async def candidates(self, conn: AsyncConnection, prefixes: Sequence[str]) -> Candidates:
        versions = await namespace_versions(conn, prefixes)
        for namespace in [n for n in self.entries if n not in versions and _covered(n, prefixes)]:
            del self.entries[namespace]  # deleted with its conversation
            if self.files is not None and self.embedder is not None and self.dims is not None:
                self.files.forget(namespace, self.embedder, self.dims)
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
        signature = tuple(sorted(versions.items()))
        if self.last is not None and self.last[0] == signature:
            return self.last[1]
        found = _candidates(parts, self.dims or 1)
        self.last = (signature, found)
        return found

    async def _refresh(
        self, conn: AsyncConnection, namespace: str, version: int, old: NamespaceVectors | None
    ) -> NamespaceVectors:
        if old is None:
            loaded = await self._from_file(conn, namespace, version)
            if loaded is not None:
                self.reads["file"] += 1
                return loaded
        seqs = await changed_since(conn, namespace, old.version) if old is not None else None
        if old is None or seqs is None or (old.stale and seqs):  # stale rows changed: count again
            self.reads["full"] += 1
            return await self._save(conn, namespace, await self._read(conn, namespace, version))
        self.reads["incremental"] += 1
        entry = _compacted(await self._apply(conn, namespace, version, old, seqs))
        if entry.saved < 0 or version - entry.saved >= RESAVE_AFTER:
            entry = await self._save(conn, namespace, entry)  # keep the file within the log's reach
        return entry

    async def _read(self, conn: AsyncConnection, namespace: str, version: int) -> NamespaceVectors:
        rows = (await conn.execute(sa.select(*_COLUMNS).where(m.c.namespace == namespace).order_by(m.c.seq))).all()
        return self._build(version, rows)

    async def _apply(
        self, conn: AsyncConnection, namespace: str, version: int, old: NamespaceVectors, seqs: list[int]
    ) -> NamespaceVectors:
        """`old` with the rows `seqs` (written or deleted since) read again."""
        fresh = []
        for start in range(0, len(seqs), 500):
            chunk = seqs[start : start + 500]
            fresh.extend((await conn.execute(
                sa.select(*_COLUMNS).where(m.c.namespace == namespace, m.c.seq.in_(chunk)).order_by(m.c.seq)
            )).all())
        new = self._build(version, fresh)
        gone = np.isin(old.seqs, np.asarray(seqs, dtype=np.int64))
        kept_seqs, kept_has = old.seqs, old.has_vector
        if gone.any():  # the old copies die; searches running meanwhile keep the old arrays
            kept_seqs, kept_has = old.seqs.copy(), old.has_vector.copy()
            kept_seqs[gone], kept_has[gone] = -1, False
        return NamespaceVectors(
            version=version, seqs=np.concatenate([kept_seqs, new.seqs]),
            blocks=old.blocks + new.blocks if new.seqs.shape[0] else old.blocks,
            has_vector=np.concatenate([kept_has, new.has_vector]),
            updated_at=np.concatenate([old.updated_at, new.updated_at]),
            stale=old.stale + new.stale, dead=old.dead + int(gone.sum()), saved=old.saved,
        )

    def _build(self, version: int, rows: Sequence[sa.Row]) -> NamespaceVectors:
        dims = self.dims or 1
        n = len(rows)
        has = np.fromiter(
            (r[2] is not None and r[1] == self.embedder and len(r[2]) == dims * 4 for r in rows), dtype=bool, count=n
        )
        blob = b"".join(r[2] for r, ok in zip(rows, has.tolist(), strict=True) if ok)
        if has.all():  # the usual case: the bytes as they came, no copy into a zeroed matrix
            matrix = np.frombuffer(blob, dtype=np.float32).reshape(n, dims)
        else:
            matrix = np.zeros((n, dims), dtype=np.float32)
            matrix[has] = np.frombuffer(blob, dtype=np.float32).reshape(-1, dims)
        return NamespaceVectors(
            version=version,
            seqs=np.fromiter((r[0] for r in rows), dtype=np.int64, count=n),
            blocks=(matrix,),
            has_vector=has,
            updated_at=np.fromiter((r[3] for r in rows), dtype=np.float64, count=n),
            stale=sum(1 for r, ok in zip(rows, has.tolist(), strict=True) if not ok and r[1] is not None),
        )

    # --- vector files ----------------------------------------------------------------------

    async def _from_file(self, conn: AsyncConnection, namespace: str, version: int) -> NamespaceVectors | None:
        """The namespace from its vector file, checked and caught up (vector_file.py), or None."""
        if self.files is None or self.embedder is None or self.dims is None:
            return None
        snap = self.files.load(namespace, self.embedder, self.dims)
        if snap is None or snap.version > version:
            return None
        changed = await changed_since(conn, namespace, snap.version) if snap.version < version else []
        if changed is None or (snap.stale and changed):
            return None
        untouched = [(int(s), i) for s, i in zip(snap.sample_seqs.tolist(), snap.sample_ids, strict=True)
                     if s not in set(changed)]
        if untouched:
            stored = dict((await conn.execute(sa.select(m.c.seq, m.c.id).where(
                m.c.namespace == namespace, m.c.seq.in_([s for s, _ in untouched])))).all())
            if any(stored.get(s) != i for s, i in untouched):
                return None  # another database at the same place, or restored from a backup
        entry = NamespaceVectors(version=snap.version, seqs=snap.seqs, blocks=(snap.matrix,),
                                 has_vector=snap.has_vector, updated_at=snap.updated_at,
                                 stale=snap.stale, saved=snap.version)
        if changed:
            entry = await self._apply(conn, namespace, version, entry, changed)
        count = (await conn.execute(sa.select(sa.func.count()).where(m.c.namespace == namespace))).scalar_one()
        if count != entry.alive:
            return None
        return _compacted(entry)

    async def _save(self, conn: AsyncConnection, namespace: str, entry: NamespaceVectors) -> NamespaceVectors:
        """Write `entry` to its vector file in a background thread (its arrays are never
        changed in place, so the thread reads a consistent copy); `entry`, marked saved."""
        files, embedder, dims = self.files, self.embedder, self.dims
        if files is None or embedder is None or dims is None or entry.alive < files.min_rows:
            return entry
        live = entry.seqs >= 0
        picked = samples(entry.seqs[live])
        ids = dict((await conn.execute(sa.select(m.c.seq, m.c.id).where(m.c.seq.in_(picked.tolist())))).all())
        picked = np.array([s for s in picked.tolist() if s in ids], dtype=np.int64)

        def write() -> None:
            single = len(entry.blocks) == 1 and entry.dead == 0
            files.save(namespace, embedder, dims, Snapshot(
                version=entry.version, seqs=entry.seqs[live],
                matrix=entry.blocks[0] if single else np.concatenate(entry.blocks)[live],
                has_vector=entry.has_vector[live], updated_at=entry.updated_at[live], stale=entry.stale,
                sample_seqs=picked, sample_ids=[ids[s] for s in picked.tolist()]))

        thread = threading.Thread(target=write, name="memory-vector-file", daemon=True)
        self.writers = [t for t in self.writers if t.is_alive()] + [thread]
        thread.start()
        return replace(entry, saved=entry.version)

    def wait_for_files(self, timeout: float | None = None) -> None:
        """Wait for the vector files being written (tests, benchmarks, a clean shutdown)."""
        for thread in self.writers:
            thread.join(timeout)


def _compacted(entry: NamespaceVectors) -> NamespaceVectors:
    """`entry` with its dead rows dropped when they pass a quarter, or its blocks merged when
    they pile up (one copy, now and then, instead of one per write)."""
    n = entry.seqs.shape[0]
    if entry.dead > max(64, n // 4):
        live = entry.seqs >= 0
        return NamespaceVectors(entry.version, entry.seqs[live], (np.concatenate(entry.blocks)[live],),
                                entry.has_vector[live], entry.updated_at[live], entry.stale, 0, entry.saved)
    if len(entry.blocks) > MAX_BLOCKS:
        merged = (entry.blocks[0], np.concatenate(entry.blocks[1:]))
        return NamespaceVectors(entry.version, entry.seqs, merged, entry.has_vector, entry.updated_at,
                                entry.stale, entry.dead, entry.saved)
    return entry


def _covered(namespace: str, prefixes: Sequence[str]) -> bool:
    return any(namespace == p or namespace.startswith(p + ".") for p in prefixes)

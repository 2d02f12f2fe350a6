"""`MemoryStore`: LangGraph's `BaseStore` over the app store's engine, plus the memory API the
tools, the CLI and the HTTP routes use.

- `abatch` serves `GetOp`, `PutOp`, `SearchOp` and `ListNamespacesOp` (so graph nodes use
  `get_store()` and the Agent Protocol's store endpoints map onto it); `batch` runs `abatch` on
  the store's event loop from another thread, like LangGraph's own async stores.
- `add_memory` / `search_memories` / `list_memories` / `forget` / `reindex` are the memory
  verbs: validated text, near-duplicate merging, a stable id per tool call (a round replayed
  after a crash saves once), and a search that says which mode ran.

Namespaces: `(user, "global")`, `(user, "project", name)`, `(user, "conversation", id)`,
`(user, "knowledge", base)`. A search's namespaces are prefixes: `(user,)` is all of a user's.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import orjson
import sqlalchemy as sa
from langgraph.store.base import (
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)
from sqlalchemy.ext.asyncio import AsyncEngine

from ..errors import MemoryTextError, UserError
from ..settings.memory import MemorySettings
from . import records
from .cache import VectorCache
from .dedupe import find_duplicate, same_text
from .dotted import DottedLabels
from .embedders import Embedder, make_embedder
from .lexical import lexical_scores
from .ops import listed, matches, owner_of
from .records import MemoryRow, m, ns_key
from .search import LEXICAL_POOL, MODES, MemoryHit, MemorySearchResult, combine, recency, top
from .vector_file import vector_files

if TYPE_CHECKING:
    from ..core.store.unit_of_work import UnitOfWork

log = logging.getLogger("artifactflow.memory")
SPACE = " \t\n\r\f\v"  # what is trimmed (and what an empty text is made of): ASCII white space
LOCAL_USER = "local"  # the user of a store without accounts (CLI on its own data)
SCOPES = ("global", "project", "conversation")


@dataclass
class SavedMemory:
    id: str
    namespace: tuple[str, ...]
    deduped: bool  # an existing near-duplicate was updated instead of adding one

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "namespace": list(self.namespace), "deduped": self.deduped}


def scope_namespace(
    user_id: str | None, scope: str, *, project: str | None = None, conversation_id: str | None = None
) -> tuple[str, ...]:
    """The namespace of `scope` for a user, with the project or conversation it needs. Any
    label value is safe (records.py escapes each); an empty one is refused."""
    if user_id is not None and (not user_id or "\x00" in user_id):
        raise UserError(f"a user id may not be empty or contain NUL: {user_id!r}")
    user = user_id or LOCAL_USER
    if scope == "global":
        return (user, "global")
    if scope == "project":
        if not project:
            raise UserError("scope 'project' needs a project name (--project NAME)")
        return (user, "project", _label(project, "project name"))
    if scope == "conversation":
        if not conversation_id:
            raise UserError("scope 'conversation' needs a conversation id (--conversation ID)")
        return (user, "conversation", _label(conversation_id, "conversation id"))
    raise UserError(f"unknown memory scope {scope!r}; known scopes: {', '.join(SCOPES)}")


def _label(value: str, what: str) -> str:
    if not value or "\x00" in value:
        raise UserError(f"a {what} may not be empty or contain NUL: {value!r}")
    return value


def _dt(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _text_of(value: dict[str, Any]) -> str:
    text = value.get("text", value.get("content"))
    return text if isinstance(text, str) else orjson.dumps(value).decode()


class MemoryStore(DottedLabels):
    """Memories and `BaseStore` items in the app store, searched in-process."""

    __slots__ = ("store", "settings", "embedder", "cache", "loop")

    def __init__(self, store: UnitOfWork, settings: MemorySettings | None = None, *,
                 embedder: Embedder | None | str = "settings", vector_dir: Path | None = None) -> None:
        """`vector_dir`: where namespaces' vectors are kept as files for a fast first search
        (vector_file.py); default: `memory-vectors` beside a SQLite database, none for PostgreSQL."""
        self.store = store
        self.settings = settings or MemorySettings()
        self.embedder: Embedder | None = make_embedder(self.settings) if embedder == "settings" else embedder  # type: ignore[assignment]
        self.cache = VectorCache(vector_files(store.engine, vector_dir))
        self.loop: asyncio.AbstractEventLoop | None = None

    @property
    def engine(self) -> AsyncEngine:
        return self.store.engine

    async def aclose(self) -> None:
        closer = getattr(self.embedder, "aclose", None)
        if closer is not None:
            await closer()

    # --- vectors -------------------------------------------------------------------------

    async def _vectors(self, texts: list[str]) -> tuple[str | None, list[bytes | None]]:
        if self.embedder is None or not texts:
            return None, [None] * len(texts)
        rows = await self.embedder.embed(texts)
        return self.embedder.name, [row.astype(np.float32).tobytes() for row in rows]

    # --- the memory verbs ----------------------------------------------------------------

    def check_text(self, text: str) -> str:
        text = text.strip(SPACE) if isinstance(text, str) else ""
        if not text:
            raise MemoryTextError("a memory's text may not be empty")
        if len(text) > self.settings.max_chars:
            raise MemoryTextError(
                f"a memory's text may be at most {self.settings.max_chars} characters "
                f"(memory.max_chars); this one has {len(text)}. Shorten it or split it."
            )
        return text

    async def add_memory(
        self, namespace: tuple[str, ...], text: str, *, key: str | None = None, dedupe: bool = True,
        metadata: dict[str, Any] | None = None,
    ) -> SavedMemory:
        """Store `text` in `namespace` and return its id. `key` (e.g. made from a message id
        and a tool call id, `call_key`) makes the write idempotent: the same key saves once.

        Merging is for true duplicates only (dedupe.py): the same text once normalised (that
        memory is kept, and `deduped` says so), or a near-identical one (cosine ≥
        `memory.dedupe_threshold`) that the new text contains, which the new text replaces,
        the old one kept in the item's history. Anything else is stored beside the others:
        `re.sub` and `re.subn`, or two facts about one subject, are two memories."""
        text = self.check_text(text)
        memory_id = key or uuid.uuid4().hex
        embedder, (vector,) = await self._vectors([text])
        value = {"text": text, **(metadata or {})}
        async with self.store.transaction() as conn:
            existing = await records.by_id(conn, memory_id) if key else None
            if existing is not None:
                return SavedMemory(existing.id, existing.namespace, deduped=existing.id != existing.key)
            twin = await find_duplicate(conn, self.cache, namespace, text, vector, self.embedder,
                                        self.settings.dedupe_threshold) if dedupe else None
            if twin is not None:
                if same_text(twin.text, text):
                    await records.touch(conn, twin)
                else:
                    await records.update(conn, twin, value={**twin.value, **value},
                                         text=text, embedder=embedder, vector=vector)
                return SavedMemory(twin.id, twin.namespace, deduped=True)
            await records.insert(conn, id=memory_id, namespace=namespace, key=memory_id, value=value,
                                 text=text, embedder=embedder, vector=vector)
        return SavedMemory(memory_id, namespace, deduped=False)

    async def add_many(
        self, namespace: tuple[str, ...], texts: Sequence[str], *, metadata: Sequence[dict[str, Any]] | None = None,
        batch: int = 512,
    ) -> list[str]:
        """Store many texts in `namespace` without de-duplication (an import, a knowledge
        base's chunks): embedded in batches, written in one transaction per batch. Their ids."""
        checked = [self.check_text(text) for text in texts]
        ids: list[str] = []
        for start in range(0, len(checked), batch):
            chunk = checked[start : start + batch]
            embedder, vectors = await self._vectors(chunk)
            extra = metadata[start : start + batch] if metadata is not None else [{}] * len(chunk)
            rows = []
            for text, vector, more in zip(chunk, vectors, extra, strict=True):
                memory_id = uuid.uuid4().hex
                rows.append({"id": memory_id, "key": memory_id, "value": {"text": text, **more},
                             "text": text, "embedder": embedder, "vector": vector})
            async with self.store.transaction() as conn:
                await records.insert_many(conn, tuple(namespace), rows)  # one statement per batch
            ids.extend(row["id"] for row in rows)
        return ids

    async def history(self, user_id: str | None, memory_id: str) -> list[dict[str, Any]] | None:
        """The previous versions of `user_id`'s memory `memory_id` (oldest first, each
        `{text, value, created_at, replaced_at}`); None when there is no such memory."""
        async with self.engine.connect() as conn:
            row = await records.by_id(conn, memory_id)
            if row is None or row.namespace[0] != (user_id or LOCAL_USER):
                return None
            return await records.history_of(conn, row.seq)

    async def search_memories(
        self, namespaces: Sequence[tuple[str, ...]], query: str, *, mode: str = "hybrid", limit: int = 10
    ) -> MemorySearchResult:
        """The best `limit` memories in `namespaces` (and below) for `query`; `mode` of the
        result is the one that ran (`lexical` for semantic/hybrid without an embedder)."""
        if mode not in MODES:
            raise UserError(f"unknown search mode {mode!r}; known modes: {', '.join(MODES)}")
        if not isinstance(limit, int) or limit < 1:
            raise UserError(f"a search limit is a whole number of at least 1, not {limit!r}")
        if "\x00" in query:
            raise UserError("a search query may not contain NUL")
        prefixes = [ns_key(n) for n in namespaces]
        ran = mode
        if mode != "recency" and (self.embedder is None or not query.strip()):
            ran = "lexical" if query.strip() else "recency"
        embedding: asyncio.Future[np.ndarray] | None = None
        if ran in ("semantic", "hybrid"):
            assert self.embedder is not None
            # embedded (in a thread) while the database reads versions, vectors and words
            embedding = asyncio.ensure_future(self.embedder.embed([query]))
            if not self.embedder.dims:  # `openai`: known after its first answer
                await asyncio.wait([embedding])
        if self.embedder is not None and self.embedder.dims:
            self.cache.use(self.embedder.name, self.embedder.dims)
        try:
            return await self._search_memories(prefixes, query, ran, limit, embedding)
        finally:
            if embedding is not None and not embedding.done():
                embedding.cancel()

    async def _search_memories(
        self, prefixes: list[str], query: str, ran: str, limit: int, embedding: asyncio.Future[np.ndarray] | None
    ) -> MemorySearchResult:
        query_vector, warning = None, None
        async with self.engine.connect() as conn:
            candidates = await self.cache.candidates(conn, prefixes)
            if not candidates.size:
                return MemorySearchResult([], ran)
            if candidates.stale and ran in ("semantic", "hybrid"):
                # cosine against another embedder's vectors ranks at random: words only
                ran = "lexical"
                warning = (f"{candidates.stale} of these memories have vectors of another embedder than "
                           f"{self.embedder.name if self.embedder else 'none'}; searched by words only "
                           "until `artifactflow memory reindex`")
                log.warning("memory search: %s", warning)
            lexical: list[tuple[int, float]] = []
            if ran in ("hybrid", "lexical"):
                stored = sorted({ns for ns in self.cache.entries if records.covered(ns, prefixes)})
                lexical = await lexical_scores(conn, stored, query, max(LEXICAL_POOL, limit * 4))
            if ran in ("semantic", "hybrid"):
                assert embedding is not None
                query_vector = (await embedding)[0]
            scores = combine(ran, candidates, query_vector, lexical, self.settings.weights, query, limit)
            best = top(scores, limit)
            rows = await records.by_seqs(conn, [int(candidates.seqs[i]) for i in best])
        if ran == "recency":
            fresh = recency(candidates.updated_at, self.settings.weights)
            scores = fresh
        hits = []
        for i in best:
            row = rows.get(int(candidates.seqs[i]))
            if row is not None:
                similarity = None
                if query_vector is not None and ran in ("semantic", "hybrid") and candidates.has_vector[i]:
                    similarity = round(float(candidates.vector(i) @ query_vector), 6)
                hits.append(MemoryHit(row.id, row.namespace, row.text, round(float(scores[i]), 6),
                                      row.created_at, row.updated_at, similarity))
        return MemorySearchResult(hits, ran, warning)

    async def list_memories(
        self, namespaces: Sequence[tuple[str, ...]], *, limit: int = 100, offset: int = 0
    ) -> list[MemoryHit]:
        """Memories in `namespaces` (and below), newest first."""
        prefixes = [ns_key(n) for n in namespaces]
        users = sorted({n[0] for n in namespaces})
        statement = (
            sa.select(*records.ROW_COLUMNS)
            .where(m.c.user_id.in_(users), records.under(m.c.namespace, prefixes))
            .order_by(m.c.updated_at.desc(), m.c.seq.desc())
            .limit(limit).offset(offset)
        )
        async with self.engine.connect() as conn:
            rows = [MemoryRow.of(r) for r in (await conn.execute(statement)).all()]
        return [MemoryHit(r.id, r.namespace, r.text, 0.0, r.created_at, r.updated_at) for r in rows]

    async def get_memory(self, user_id: str | None, memory_id: str) -> MemoryHit | None:
        """The memory `memory_id` if it is `user_id`'s (another user's is None, like a missing one)."""
        async with self.engine.connect() as conn:
            row = await records.by_id(conn, memory_id)
        if row is None or row.namespace[0] != (user_id or LOCAL_USER):
            return None
        return MemoryHit(row.id, row.namespace, row.text, 0.0, row.created_at, row.updated_at)

    async def forget(self, user_id: str | None, memory_id: str) -> bool:
        """Delete `user_id`'s memory `memory_id`; False when there is none (or not theirs)."""
        async with self.store.transaction() as conn:
            row = await records.by_id(conn, memory_id)
            if row is None or row.namespace[0] != (user_id or LOCAL_USER):
                return False
            await records.delete(conn, row.seq, row.namespace)
        return True

    async def reindex(self, user_id: str | None = None, *, batch: int = 256) -> int:
        """Re-embed every memory whose vector is missing or made by another embedder (after
        `memory.embedder` changed); the number re-embedded."""
        if self.embedder is None:
            return 0
        done = 0
        where = [sa.or_(m.c.embedder.is_(None), m.c.embedder != self.embedder.name)]
        if user_id is not None:
            where.append(m.c.user_id == user_id)
        while True:
            async with self.engine.connect() as conn:
                rows = (await conn.execute(
                    sa.select(m.c.seq, m.c.namespace, m.c.text).where(*where).order_by(m.c.seq).limit(batch)
                )).all()
            if not rows:
                return done
            name, vectors = await self._vectors([r.text for r in rows])
            async with self.store.transaction() as conn:
                for row, vector in zip(rows, vectors, strict=True):
                    await conn.execute(m.update().where(m.c.seq == row.seq).values(embedder=name, vector=vector))
                for namespace in {r.namespace for r in rows}:
                    await records.bump(conn, namespace, [r.seq for r in rows if r.namespace == namespace])
            done += len(rows)

    # --- BaseStore -----------------------------------------------------------------------

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        self.loop = self.loop or asyncio.get_running_loop()
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(await self._get(op))
            elif isinstance(op, PutOp):
                await self._put(op)
                results.append(None)
            elif isinstance(op, SearchOp):
                results.append(await self._search(op))
            elif isinstance(op, ListNamespacesOp):
                results.append(await self._list_namespaces(op))
            else:
                raise UserError(f"MemoryStore does not know the operation {type(op).__name__}")
        return results

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        loop = self.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            raise UserError(
                "MemoryStore.batch (the synchronous API) must be called from another thread than "
                "the store's event loop; use the async methods (aget, aput, asearch) there"
            )
        return asyncio.run_coroutine_threadsafe(self.abatch(list(ops)), loop).result()

    async def _get(self, op: GetOp) -> Item | None:
        async with self.engine.connect() as conn:
            row = await records.by_key(conn, tuple(op.namespace), op.key)
        if row is None:
            return None
        return Item(value=row.value, key=row.key, namespace=row.namespace,
                    created_at=_dt(row.created_at), updated_at=_dt(row.updated_at))

    async def _put(self, op: PutOp) -> None:
        namespace = tuple(op.namespace)
        if op.value is None:
            async with self.store.transaction() as conn:
                row = await records.by_key(conn, namespace, op.key)
                if row is not None:
                    await records.delete(conn, row.seq, row.namespace)
            return
        value = dict(op.value)
        text = _text_of(value)
        embedder, (vector,) = (None, [None]) if op.index is False else await self._vectors([text])
        async with self.store.transaction() as conn:
            row = await records.by_key(conn, namespace, op.key)
            if row is not None:
                await records.update(conn, row, value=value, text=text, embedder=embedder, vector=vector)
            else:
                await records.insert(conn, id=uuid.uuid4().hex, namespace=namespace, key=op.key,
                                     value=value, text=text, embedder=embedder, vector=vector)

    async def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        wanted = op.offset + op.limit
        if op.query and prefix:
            # rank more than asked when a filter may drop some
            found = await self.search_memories([prefix], op.query, mode="hybrid",
                                               limit=wanted * (4 if op.filter else 1))
            rows_by_id = {}
            async with self.engine.connect() as conn:
                rows_by_id = await records.by_ids(conn, [h.id for h in found.hits])
            scored = [(rows_by_id[h.id], h.score) for h in found.hits if h.id in rows_by_id]
        else:
            statement = sa.select(*records.ROW_COLUMNS).order_by(m.c.updated_at.desc(), m.c.seq.desc())
            if prefix:
                statement = statement.where(records.under(m.c.namespace, [ns_key(prefix)]))
            if not op.filter:
                statement = statement.limit(wanted)
            async with self.engine.connect() as conn:
                scored = [(MemoryRow.of(r), None) for r in (await conn.execute(statement)).all()]
        if op.filter:
            scored = [(row, score) for row, score in scored if matches(row.value, op.filter)]
        return [
            SearchItem(namespace=row.namespace, key=row.key, value=row.value,
                       created_at=_dt(row.created_at), updated_at=_dt(row.updated_at), score=score)
            for row, score in scored[op.offset : wanted]
        ]

    async def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        statement = sa.select(m.c.namespace).distinct()
        owner = owner_of(op)
        if owner is not None:
            statement = statement.where(m.c.user_id == owner)
        async with self.engine.connect() as conn:
            stored = list((await conn.execute(statement)).scalars())
        return listed(stored, op)

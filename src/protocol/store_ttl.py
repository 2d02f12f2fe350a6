"""Store items with a time to live: `ttl` (minutes) on `put_item`, `refresh_ttl` on reads, and
a sweeper that deletes what expired.

The long-term store (`memory.MemoryStore`) keeps no expiry itself, so `TTLStore` wraps it: a
put with a TTL writes the item there and its expiry in `af_store_ttl`; a put without one clears
the expiry (the item is kept for good, as in LangGraph's stores); a read finds an expired item
gone (and deletes it), and with `refresh_ttl` (the default, as LangGraph's) moves its expiry on;
a search leaves expired items out. `sweep` deletes every expired item (the HTTP app runs it
every `store_ttl.sweep_seconds`), so an agent reading memory directly stops seeing an item by
the next sweep at the latest.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from fastapi import Request
from langgraph.store.base import (
    BaseStore,
    GetOp,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from ..core.store.schema import store_ttl as table
from ..errors import UserError
from .deps import protocol_of

if TYPE_CHECKING:
    from ..core.store.repository import AppStore

log = logging.getLogger("artifactflow.store")


def _ns(namespace: tuple[str, ...]) -> str:
    return json.dumps(list(namespace))


class TTLStore(BaseStore):
    """`inner` with item expiry kept in the app store."""

    supports_ttl = True

    def __init__(self, inner: BaseStore, store: AppStore, clock: Callable[[], float] = time.time) -> None:
        self.inner, self.store, self.clock = inner, store, clock

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        raise NotImplementedError("TTLStore is async: use abatch (aget, aput, asearch)")

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return [await self._one(op) for op in ops]

    async def _one(self, op: Op) -> Result:
        if isinstance(op, PutOp):
            if isinstance(op.ttl, int | float) and not op.ttl > 0:
                raise UserError(f"ttl must be a positive number of minutes, not {op.ttl}")
            await self.inner.abatch([PutOp(op.namespace, op.key, op.value, op.index, None)])
            await self._set(op.namespace, op.key, None if op.value is None else op.ttl)
            return None
        if isinstance(op, GetOp):
            if await self._expired(op.namespace, op.key):
                return None
            found = (await self.inner.abatch([op]))[0]
            if found is not None and op.refresh_ttl:
                await self._refresh([(op.namespace, op.key)])
            return found
        if isinstance(op, SearchOp):
            hits = (await self.inner.abatch([op]))[0]
            assert isinstance(hits, list)
            kept: list[SearchItem] = [
                h for h in hits if isinstance(h, SearchItem) and not await self._expired(h.namespace, h.key)
            ]
            if op.refresh_ttl:
                await self._refresh([(h.namespace, h.key) for h in kept])
            return kept
        assert isinstance(op, ListNamespacesOp)
        return (await self.inner.abatch([op]))[0]

    async def _set(self, namespace: tuple[str, ...], key: str, ttl: Any) -> None:
        where = (table.c.namespace == _ns(namespace), table.c.key == key)
        statements: list[sa.Executable] = [table.delete().where(*where)]
        if isinstance(ttl, int | float):
            statements.append(
                table.insert().values(
                    namespace=_ns(namespace), key=key, ttl_minutes=float(ttl), expires_at=self.clock() + ttl * 60
                )
            )
        await self.store.write(*statements)

    async def _expired(self, namespace: tuple[str, ...], key: str) -> bool:
        """Whether the item has expired; an expired one is deleted here and now."""
        expires = await self.store.fetch_value(
            sa.select(table.c.expires_at).where(table.c.namespace == _ns(namespace), table.c.key == key)
        )
        if expires is None or expires > self.clock():
            return False
        await self._delete(namespace, key)
        return True

    async def _refresh(self, items: list[tuple[tuple[str, ...], str]]) -> None:
        now = self.clock()
        for namespace, key in items:
            await self.store.write(
                table.update()
                .where(table.c.namespace == _ns(namespace), table.c.key == key)
                .values(expires_at=now + table.c.ttl_minutes * 60)
            )

    async def _delete(self, namespace: tuple[str, ...], key: str) -> None:
        await self.inner.adelete(namespace, key)
        await self.store.write(table.delete().where(table.c.namespace == _ns(namespace), table.c.key == key))

    async def sweep(self) -> int:
        """Delete every expired item; how many."""
        rows = await self.store.fetch_rows(
            sa.select(table.c.namespace, table.c.key).where(table.c.expires_at <= self.clock())
        )
        for row in rows:
            await self._delete(tuple(json.loads(row["namespace"])), row["key"])
        return len(rows)


def ttl_store_of(state: Any) -> TTLStore:
    """The app's store with TTL (one per client), over its long-term memory store."""
    client = state.client
    current = getattr(state, "ttl_store", None)
    if current is None or current.inner is not client.memories.store:
        current = state.ttl_store = TTLStore(client.memories.store, client.admin.store)
    return current


def request_store(request: Request) -> BaseStore:
    """The store the `/store` endpoints use (`store.store_router`)."""
    protocol_of(request)  # 503 while the server starts or stops
    return ttl_store_of(request.app.state)

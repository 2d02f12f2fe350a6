"""LangGraph's `BaseStore` front methods, with dots allowed in namespace labels.

`BaseStore.aput`/`aget`/`asearch`/`adelete`/`alist_namespaces` (and their sync twins) refuse a
label holding "." because LangGraph's own stores join labels with dots. `MemoryStore` stores
each label escaped (records.py), so a dot is harmless there; refusing it would lock a user
whose id is an e-mail address (`john.smith@example.com`) out of the Agent Protocol store and
of `get_store()` in graph nodes. These methods build the same operations as LangGraph's and
check the other rules (non-empty namespace, non-empty string labels without NUL, not under
"langgraph")."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    NotProvided,
    PutOp,
    SearchItem,
    SearchOp,
)

Index = Literal[False] | list[str] | None


def check_labels(namespace: tuple[str, ...]) -> None:
    for label in namespace:
        if not isinstance(label, str) or not label or "\x00" in label:
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} in {namespace}: labels are non-empty strings without NUL"
            )


def check_namespace(namespace: tuple[str, ...]) -> None:
    if not namespace:
        raise InvalidNamespaceError("Namespace cannot be empty.")
    check_labels(namespace)
    if namespace[0] == "langgraph":
        raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {namespace}')


class DottedLabels(BaseStore):
    """The front methods; the subclass implements `abatch` and `batch`."""

    def _refresh(self, refresh_ttl: bool | None) -> bool:
        if refresh_ttl is not None:
            return refresh_ttl
        return bool((self.ttl_config or {}).get("refresh_on_read", True))

    def _put_op(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any] | None,
                index: Index, ttl: float | None | NotProvided) -> PutOp:
        check_namespace(tuple(namespace)) if value is not None else check_labels(tuple(namespace))
        if ttl not in (NOT_PROVIDED, None) and not self.supports_ttl:
            raise NotImplementedError(f"TTL is not supported by {type(self).__name__}; pass ttl=None")
        default = (self.ttl_config or {}).get("default_ttl")
        return PutOp(tuple(namespace), str(key), dict(value) if value is not None else None, index=index,
                     ttl=default if isinstance(ttl, NotProvided) else ttl)

    def _search_op(self, prefix: tuple[str, ...], query: str | None, filter: dict[str, Any] | None,
                   limit: int, offset: int, refresh_ttl: bool | None) -> SearchOp:
        check_labels(tuple(prefix))
        return SearchOp(tuple(prefix), filter, limit, offset, query, self._refresh(refresh_ttl))

    @staticmethod
    def _list_op(prefix: tuple[str, ...] | None, suffix: tuple[str, ...] | None, max_depth: int | None,
                 limit: int, offset: int) -> ListNamespacesOp:
        check_labels(tuple(prefix or ()))
        check_labels(tuple(suffix or ()))
        conditions = [MatchCondition(match_type="prefix", path=tuple(prefix))] if prefix else []
        if suffix:
            conditions.append(MatchCondition(match_type="suffix", path=tuple(suffix)))
        return ListNamespacesOp(match_conditions=tuple(conditions), max_depth=max_depth, limit=limit, offset=offset)

    def put(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any], index: Index = None,
            *, ttl: float | None | NotProvided = NOT_PROVIDED) -> None:
        self.batch([self._put_op(namespace, key, value, index, ttl)])

    async def aput(self, namespace: tuple[str, ...], key: str, value: Mapping[str, Any], index: Index = None,
                   *, ttl: float | None | NotProvided = NOT_PROVIDED) -> None:
        await self.abatch([self._put_op(namespace, key, value, index, ttl)])

    def get(self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None) -> Item | None:
        check_labels(tuple(namespace))
        return self.batch([GetOp(tuple(namespace), str(key), self._refresh(refresh_ttl))])[0]  # type: ignore[return-value]

    async def aget(self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None) -> Item | None:
        check_labels(tuple(namespace))
        return (await self.abatch([GetOp(tuple(namespace), str(key), self._refresh(refresh_ttl))]))[0]  # type: ignore[return-value]

    def delete(self, namespace: tuple[str, ...], key: str) -> None:
        self.batch([self._put_op(namespace, key, None, None, None)])

    async def adelete(self, namespace: tuple[str, ...], key: str) -> None:
        await self.abatch([self._put_op(namespace, key, None, None, None)])

    def search(self, namespace_prefix: tuple[str, ...], /, *, query: str | None = None,
               filter: dict[str, Any] | None = None, limit: int = 10, offset: int = 0,
               refresh_ttl: bool | None = None) -> list[SearchItem]:
        return self.batch([self._search_op(namespace_prefix, query, filter, limit, offset, refresh_ttl)])[0]  # type: ignore[return-value]

    async def asearch(self, namespace_prefix: tuple[str, ...], /, *, query: str | None = None,
                      filter: dict[str, Any] | None = None, limit: int = 10, offset: int = 0,
                      refresh_ttl: bool | None = None) -> list[SearchItem]:
        op = self._search_op(namespace_prefix, query, filter, limit, offset, refresh_ttl)
        return (await self.abatch([op]))[0]  # type: ignore[return-value]

    def list_namespaces(self, *, prefix: tuple[str, ...] | None = None, suffix: tuple[str, ...] | None = None,
                        max_depth: int | None = None, limit: int = 100, offset: int = 0) -> list[tuple[str, ...]]:
        return self.batch([self._list_op(prefix, suffix, max_depth, limit, offset)])[0]  # type: ignore[return-value]

    async def alist_namespaces(self, *, prefix: tuple[str, ...] | None = None, suffix: tuple[str, ...] | None = None,
                               max_depth: int | None = None, limit: int = 100, offset: int = 0) -> list[tuple[str, ...]]:
        return (await self.abatch([self._list_op(prefix, suffix, max_depth, limit, offset)]))[0]  # type: ignore[return-value]

"""The Agent Protocol's store endpoints, as `langgraph_sdk`'s `client.store` calls them.

`PUT /store/items`, `GET /store/items?namespace=a.b&key=k`, `DELETE /store/items` (a JSON body),
`POST /store/items/search`, `POST /store/namespaces`, on one LangGraph `BaseStore` — the same
store long-term memory uses (`MemoryStore`), so what an agent remembers a LangGraph client can
read, and what the client writes an agent can recall.

**Per user.** Every namespace is stored under its owner: the client's `["global"]` is the
store's `(user, "global")`. That is exactly memory's layout (`(user, "global")`, `(user,
"project", name)`, `(user, "conversation", id)`, `(user, "knowledge", base)`), so a client sees
its own memories at `["global"]`, `["project", name]`, … and never another user's: another
user's item is 404 and absent from searches and namespace listings, with no way to name it.
With auth off there is one user, `LOCAL_USER` (memory's own), the one the CLI writes
memories as: `artifactflow memory add` and `client.store.search_items(["global"])` meet.

Errors are LangGraph's shape, `{"detail": ...}` with 401/404/422 (`deps.ProtocolRoute`), not the
`/api/v1` `{"error": {...}}` envelope; request bodies are validated inside the route, so a
malformed one is a 422 in the same shape.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from langgraph.store.base import BaseStore, InvalidNamespaceError, Item, SearchItem
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from starlette.exceptions import HTTPException

from ..memory import LOCAL_USER
from .deps import ProtocolRoute, caller, protocol_of
from .wire import MAX_LIMIT, MAX_OFFSET, JSONObject, Text, check_body, check_json

UserDependency = Callable[..., Awaitable[str | None]]
StoreSource = BaseStore | Callable[[Request], BaseStore]


def app_memory_store(request: Request) -> BaseStore:
    """The app's long-term memory store (`MemoryStore`, durable in the app store): the one the
    graph's `get_store()`, the memory tools, the CLI and `/api/v1/memories` use."""
    return protocol_of(request).client.memories.store


# --- wire formats ------------------------------------------------------------------------------

Label = Text
ORDER_OPS = ("$gt", "$gte", "$lt", "$lte")


def check_filter(value: dict[str, Any]) -> dict[str, Any]:
    """A search filter the store can apply: `{field: value}` (equality) or `{field: {op:
    value}}` with `$eq`/`$ne` (any JSON) or an order operator comparing a number or a string
    (`$gt: null` or an object cannot be ordered: 422, not a failed search)."""
    check_json(value)
    for field, wanted in value.items():
        if isinstance(wanted, dict) and wanted and all(k.startswith("$") for k in wanted):
            for op, operand in wanted.items():
                if op not in ("$eq", "$ne", *ORDER_OPS):
                    raise ValueError(f"filter.{field}: unknown operator {op}")
                if op in ORDER_OPS and (
                    isinstance(operand, bool) or not isinstance(operand, int | float | str)
                ):
                    raise ValueError(f"filter.{field}.{op} compares a number or a string")
    return value


MAX_TTL_MINUTES = 100 * 365 * 24 * 60  # a century; more is a typo or a fuzzer, not a policy


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)

    @model_validator(mode="before")
    @classmethod
    def _bounded(cls, data: Any) -> Any:
        return check_body(data)


class PutItemBody(_Body):
    namespace: list[Label] = Field(description="The item's namespace path, e.g. ['global']")
    key: Text = Field(min_length=1)
    value: JSONObject
    index: Literal[False] | list[str] | None = Field(
        None, description="Fields to index for search: None (the store's default) or False"
    )
    ttl: float | None = Field(
        None, le=MAX_TTL_MINUTES, description="Minutes to keep the item (stores with TTL)"
    )


class DeleteItemBody(_Body):
    namespace: list[Label]
    key: Text = Field(min_length=1)


class SearchItemsBody(_Body):
    namespace_prefix: list[Label] = Field(default_factory=list)
    filter: Annotated[dict[str, Any], AfterValidator(check_filter)] | None = None
    limit: int = Field(10, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)
    query: Text | None = Field(None, description="Natural-language query (ranked search)")
    refresh_ttl: bool | None = None


class ListNamespacesBody(_Body):
    prefix: list[Label] | None = None
    suffix: list[Label] | None = None
    max_depth: int | None = Field(None, ge=1, le=MAX_LIMIT)
    limit: int = Field(100, ge=1, le=1000)
    offset: int = Field(0, ge=0, le=MAX_OFFSET)


def _iso(moment: datetime) -> str:
    return moment.isoformat()


def _item(item: Item, owner_depth: int = 1) -> dict[str, Any]:
    out: dict[str, Any] = {
        "namespace": list(item.namespace[owner_depth:]),
        "key": item.key,
        "value": item.value,
        "created_at": _iso(item.created_at),
        "updated_at": _iso(item.updated_at),
    }
    if isinstance(item, SearchItem):
        out["score"] = item.score
    return out


def _labels(labels: list[str], what: str) -> tuple[str, ...]:
    for label in labels:
        if not label or "." in label:
            raise HTTPException(
                422, f"invalid {what} label {label!r}: labels are non-empty and contain no '.'"
            )
    return tuple(labels)


def _owned(user: str | None, labels: list[str], what: str = "namespace") -> tuple[str, ...]:
    return (user or LOCAL_USER, *_labels(labels, what))


# --- the router --------------------------------------------------------------------------------


def store_router(store: StoreSource = app_memory_store, *, user: UserDependency = caller
                 ) -> APIRouter:
    """The store endpoints on `store` (a `BaseStore`, or a function of the request that returns
    one; default: the app's memory store), each caller confined to their own namespaces.
    `user` is the dependency naming the caller (default: `X-Api-Key` or bearer token)."""
    router = APIRouter(prefix="/store", tags=["store"], route_class=ProtocolRoute)

    def resolve(request: Request) -> BaseStore:
        return store if isinstance(store, BaseStore) else store(request)

    @router.put("/items", status_code=204, summary="Store or update an item")
    async def put_item(
        body: PutItemBody, request: Request, caller: str | None = Depends(user)
    ) -> Response:
        target = resolve(request)
        if body.ttl is not None and not target.supports_ttl:
            raise HTTPException(422, f"this server's store ({type(target).__name__}) keeps no TTL")
        namespace = _owned(caller, body.namespace)
        try:
            if body.ttl is None:
                await target.aput(namespace, body.key, body.value, body.index)
            else:
                await target.aput(namespace, body.key, body.value, body.index, ttl=body.ttl)
        except InvalidNamespaceError as exc:
            raise HTTPException(422, str(exc)) from exc
        return Response(status_code=204)

    @router.get("/items", summary="Get an item")
    async def get_item(
        request: Request,
        key: str = Query(min_length=1),
        namespace: str = Query("", description="The namespace, labels joined by '.'"),
        refresh_ttl: bool | None = Query(None),
        caller: str | None = Depends(user),
    ) -> dict[str, Any]:
        labels = namespace.split(".") if namespace else []
        found = await resolve(request).aget(
            _owned(caller, labels), key, refresh_ttl=refresh_ttl
        )
        if found is None:
            raise HTTPException(404, f"item {key!r} not found in namespace {labels}")
        return _item(found)

    @router.delete("/items", status_code=204, summary="Delete an item")
    async def delete_item(
        body: DeleteItemBody, request: Request, caller: str | None = Depends(user)
    ) -> Response:
        await resolve(request).adelete(_owned(caller, body.namespace), body.key)
        return Response(status_code=204)

    @router.post("/items/search", summary="Search items under a namespace prefix")
    async def search_items(
        body: SearchItemsBody, request: Request, caller: str | None = Depends(user)
    ) -> dict[str, Any]:
        try:
            hits = await resolve(request).asearch(
                _owned(caller, body.namespace_prefix, "namespace_prefix"),
                query=body.query,
                filter=body.filter,
                limit=body.limit,
                offset=body.offset,
                refresh_ttl=body.refresh_ttl,
            )
        except TypeError as exc:  # an order operator met a stored value of another type
            raise HTTPException(
                422, f"filter compares values of unlike types (a number with a string?): {exc}"
            ) from None
        return {"items": [_item(hit) for hit in hits]}

    @router.post("/namespaces", summary="List namespaces")
    async def list_namespaces(
        body: ListNamespacesBody, request: Request, caller: str | None = Depends(user)
    ) -> dict[str, Any]:
        found = await resolve(request).alist_namespaces(
            prefix=_owned(caller, body.prefix or [], "prefix"),
            suffix=_labels(body.suffix, "suffix") if body.suffix else None,
            max_depth=None if body.max_depth is None else body.max_depth + 1,
            limit=body.limit,
            offset=body.offset,
        )
        return {"namespaces": [list(namespace[1:]) for namespace in found]}

    return router


__all__ = [
    "LOCAL_USER",
    "app_memory_store",
    "store_router",
]

"""The store, through `client.store`."""

from __future__ import annotations

import uuid

from langgraph_sdk.errors import NotFoundError

from .conftest import Server


async def test_store_round_trip(server: Server) -> None:
    store = server.client.store
    ns = ["suite", uuid.uuid4().hex]
    await store.put_item(ns, "a", {"text": "alpha", "kind": "fact"})
    await store.put_item([*ns, "sub"], "b", {"text": "beta", "kind": "note"})
    item = await store.get_item(ns, "a")
    assert item["namespace"] == ns and item["key"] == "a" and item["value"]["text"] == "alpha"
    assert item["created_at"] and item["updated_at"]

    found = await store.search_items(ns)
    assert sorted(i["key"] for i in found["items"]) == ["a", "b"]
    only = await store.search_items(ns, filter={"kind": "note"})
    assert [i["key"] for i in only["items"]] == ["b"]

    listed = await store.list_namespaces(prefix=ns)
    assert sorted(map(tuple, listed["namespaces"])) == [tuple(ns), (*ns, "sub")]

    await store.delete_item(ns, "a")
    try:
        gone = await store.get_item(ns, "a")
    except NotFoundError:
        gone = None
    assert gone is None  # artifactflow: 404; LangGraph's dev server: 200 null
    assert [i["key"] for i in (await store.search_items(ns))["items"]] == ["b"]

"""The Agent Protocol store endpoints, driven by the real `langgraph_sdk` client over a real
uvicorn socket on 127.0.0.1: a round trip, `{"detail": ...}` errors, and per-user isolation
with both `X-Api-Key` (the Python SDK) and `Authorization: Bearer` (the JS SDK's header)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from browser_helpers import serving
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError, UnprocessableEntityError

from artifactflow.api.app import create_app

from .conftest import REFERENCE_URL

pytestmark = pytest.mark.skipif(
    bool(REFERENCE_URL), reason="artifactflow's own store endpoints (auth, errors), not protocol"
)


@pytest_asyncio.fixture
async def open_server(make_client: Any) -> AsyncIterator[str]:
    af = await make_client()
    async with serving(create_app(client=af)) as base:
        yield base


@pytest_asyncio.fixture
async def authed(make_client: Any) -> AsyncIterator[tuple[str, str, str]]:
    af = await make_client(yaml_text="auth:\n  enabled: true\n")
    _, alice = await af.admin.store.create_token("alice")
    _, bob = await af.admin.store.create_token("bob")
    async with serving(create_app(client=af)) as base:
        yield base, alice, bob


async def test_round_trip_with_the_sdk(open_server: str) -> None:
    client = get_client(url=open_server, api_key=None)
    store = client.store
    await store.put_item(["global"], "tea", {"text": "likes green tea", "n": 1})
    await store.put_item(["project", "alpha"], "k1", {"text": "alpha uses PostgreSQL"})
    await store.put_item(["project", "beta"], "k2", {"text": "beta uses SQLite"})

    item = await store.get_item(["global"], "tea")
    assert item["namespace"] == ["global"] and item["key"] == "tea"
    assert item["value"] == {"text": "likes green tea", "n": 1}
    assert item["created_at"] and item["updated_at"]

    await store.put_item(["global"], "tea", {"text": "likes oolong", "n": 2})
    updated = await store.get_item(["global"], "tea")
    assert updated["value"]["n"] == 2 and updated["updated_at"] >= item["updated_at"]

    found = await store.search_items(["project"])
    assert sorted(i["key"] for i in found["items"]) == ["k1", "k2"]
    assert all(i["namespace"][0] == "project" for i in found["items"])
    filtered = await store.search_items(["project"], filter={"text": "beta uses SQLite"})
    assert [i["key"] for i in filtered["items"]] == ["k2"]
    paged = await store.search_items([], limit=1, offset=1)
    assert len(paged["items"]) == 1
    everything = await store.search_items([], limit=10)
    assert len(everything["items"]) == 3

    listed = await store.list_namespaces()
    assert sorted(map(tuple, listed["namespaces"])) == [
        ("global",), ("project", "alpha"), ("project", "beta")
    ]
    assert (await store.list_namespaces(prefix=["project"], max_depth=1))["namespaces"] == [
        ["project"]
    ]
    assert (await store.list_namespaces(suffix=["beta"]))["namespaces"] == [["project", "beta"]]

    await store.delete_item(["project", "alpha"], "k1")
    with pytest.raises(NotFoundError):
        await store.get_item(["project", "alpha"], "k1")
    assert [i["key"] for i in (await store.search_items(["project"]))["items"]] == ["k2"]


async def test_errors_are_detail_bodies(open_server: str) -> None:
    async with httpx.AsyncClient(base_url=open_server) as http:
        missing = await http.get("/store/items", params={"namespace": "global", "key": "nope"})
        assert missing.status_code == 404 and isinstance(missing.json()["detail"], str)
        bad = await http.put("/store/items", json={"namespace": ["global"], "key": "k"})
        assert bad.status_code == 422 and "detail" in bad.json()
        empty_label = await http.put(
            "/store/items", json={"namespace": ["global", ""], "key": "k", "value": {}}
        )
        assert empty_label.status_code == 422 and "label" in empty_label.json()["detail"]
        ttl = await http.put(  # a TTL is kept (issue 35), a negative one refused
            "/store/items", json={"namespace": ["a"], "key": "k", "value": {}, "ttl": -5}
        )
        assert ttl.status_code == 422 and "ttl" in ttl.json()["detail"]
        negative = await http.post("/store/items/search", json={"offset": -1})
        assert negative.status_code == 422 and isinstance(negative.json()["detail"], list)
    with pytest.raises(UnprocessableEntityError):
        await get_client(url=open_server, api_key=None).store.search_items([], limit=0)


async def test_each_user_sees_only_their_items(authed: tuple[str, str, str]) -> None:
    base, alice_token, bob_token = authed
    alice = get_client(url=base, api_key=alice_token)  # sends X-Api-Key
    bob = get_client(url=base, api_key=None, headers={"Authorization": f"Bearer {bob_token}"})
    await alice.store.put_item(["global"], "secret", {"text": "alice's secret"})
    await bob.store.put_item(["global"], "mine", {"text": "bob's note"})

    assert (await alice.store.get_item(["global"], "secret"))["value"]["text"] == "alice's secret"
    with pytest.raises(NotFoundError):
        await bob.store.get_item(["global"], "secret")
    assert [i["key"] for i in (await bob.store.search_items([]))["items"]] == ["mine"]
    assert [i["key"] for i in (await alice.store.search_items(["global"]))["items"]] == ["secret"]
    assert (await bob.store.list_namespaces())["namespaces"] == [["global"]]

    await bob.store.delete_item(["global"], "secret")  # names nothing of bob's: a no-op
    assert (await alice.store.get_item(["global"], "secret"))["key"] == "secret"

    async with httpx.AsyncClient(base_url=base) as http:
        anonymous = await http.post("/store/items/search", json={})
        assert anonymous.status_code == 401 and "detail" in anonymous.json()
        wrong = await http.get(
            "/store/items", params={"namespace": "global", "key": "secret"},
            headers={"X-Api-Key": "af_not-a-token"},
        )
        assert wrong.status_code == 401


async def test_the_store_is_long_term_memory(make_client: Any) -> None:
    """What the memory verbs save the store endpoints read, and the reverse (one `MemoryStore`),
    in memory's namespaces without the user label."""
    af = await make_client()
    saved = await af.memories.add("the staging database is PostgreSQL 16")
    async with serving(create_app(client=af)) as base:
        store = get_client(url=base, api_key=None).store
        found = await store.search_items(["global"])
        assert [i["value"]["text"] for i in found["items"]] == ["the staging database is PostgreSQL 16"]
        assert found["items"][0]["namespace"] == ["global"]
        ranked = await store.search_items(["global"], query="which database does staging use")
        assert ranked["items"][0]["key"] == found["items"][0]["key"]
        assert isinstance(ranked["items"][0]["score"], float)
        await store.put_item(["global"], "pref", {"text": "answers in French"})
    listed = await af.memories.list()
    assert sorted(h.text for h in listed) == ["answers in French", "the staging database is PostgreSQL 16"]
    assert saved.id


async def test_json_bodies_sent_as_text_plain_are_read(open_server: str) -> None:
    """A proxy in front of the server (agent-chat-ui's API passthrough) forwards JSON bodies as
    text/plain; LangGraph's server reads them as JSON, and so do these endpoints."""
    plain = {"Content-Type": "text/plain;charset=UTF-8"}
    async with httpx.AsyncClient(base_url=open_server) as http:
        put = await http.put(
            "/store/items", content=b'{"namespace": ["global"], "key": "k", "value": {"a": 1}}',
            headers=plain,
        )
        assert put.status_code == 204, put.text
        found = await http.post("/store/items/search", content=b'{"namespace_prefix": []}',
                                headers=plain)
        assert [i["key"] for i in found.json()["items"]] == ["k"]
        threads = await http.post("/threads/search", content=b'{"limit": 5}', headers=plain)
        assert threads.status_code == 200 and isinstance(threads.json(), list)
        broken = await http.post("/threads/search", content=b'{"limit": ', headers=plain)
        assert broken.status_code == 422 and "detail" in broken.json()

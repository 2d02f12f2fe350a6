"""Meta, assistants and threads, through the real `langgraph_sdk` client."""

from __future__ import annotations

import uuid

import httpx
import pytest
from langgraph_sdk.errors import ConflictError, NotFoundError

from .conftest import Server


async def test_ok_and_info(server: Server) -> None:
    async with httpx.AsyncClient(base_url=server.url) as http:
        ok = await http.get("/ok")
        assert ok.status_code == 200 and ok.json()["ok"] is True
        info = await http.get("/info")
        assert info.status_code == 200 and isinstance(info.json(), dict)


async def test_assistants_search_and_get(server: Server) -> None:
    found = await server.client.assistants.search()
    assert found, "at least one assistant"
    for assistant in found:
        assert {"assistant_id", "graph_id", "name", "metadata", "config"} <= set(assistant)
    first = found[0]
    got = await server.client.assistants.get(first["assistant_id"])
    assert got["assistant_id"] == first["assistant_id"] and got["graph_id"] == first["graph_id"]
    by_graph = await server.client.assistants.search(graph_id=first["graph_id"])
    assert first["assistant_id"] in [a["assistant_id"] for a in by_graph]
    with pytest.raises(NotFoundError):
        await server.client.assistants.get(str(uuid.uuid4()))


async def test_thread_lifecycle(server: Server) -> None:
    threads = server.client.threads
    tag = uuid.uuid4().hex
    created = await threads.create(metadata={"suite": tag, "n": 1})
    thread_id = created["thread_id"]
    assert created["status"] == "idle" and created["metadata"]["suite"] == tag

    got = await threads.get(thread_id)
    assert got["thread_id"] == thread_id and got["metadata"]["n"] == 1

    patched = await threads.update(thread_id, metadata={"n": 2, "extra": "x"})
    assert patched["metadata"]["n"] == 2 and patched["metadata"]["suite"] == tag
    assert (await threads.get(thread_id))["metadata"]["extra"] == "x"

    found = await threads.search(metadata={"suite": tag})
    assert [t["thread_id"] for t in found] == [thread_id]
    assert await threads.search(metadata={"suite": tag}, status="busy") == []
    assert [t["thread_id"] for t in await threads.search(metadata={"suite": tag}, status="idle")] == [
        thread_id
    ]

    again = await threads.create(thread_id=thread_id, if_exists="do_nothing")
    assert again["thread_id"] == thread_id
    with pytest.raises(ConflictError):
        await threads.create(thread_id=thread_id, if_exists="raise")

    await threads.delete(thread_id)
    with pytest.raises(NotFoundError):
        await threads.get(thread_id)
    assert await threads.search(metadata={"suite": tag}) == []


async def test_thread_search_pages(server: Server) -> None:
    tag = uuid.uuid4().hex
    ids = [(await server.client.threads.create(metadata={"page": tag}))["thread_id"] for _ in range(3)]
    first = await server.client.threads.search(metadata={"page": tag}, limit=2)
    rest = await server.client.threads.search(metadata={"page": tag}, limit=2, offset=2)
    assert len(first) == 2 and len(rest) == 1
    assert sorted(t["thread_id"] for t in first + rest) == sorted(ids)

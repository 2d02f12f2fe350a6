"""Ended messages' renderings are stored (`protocol/renderings.py`, `ap_renderings`): a process
that starts afresh reads a long thread's state and history from them, rendering no message
from its events, and says byte for byte what a rendering from the events says; a message that
changes after it ended, or a change of the renderer, is rendered again. On SQLite and
PostgreSQL."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
import sqlalchemy as sa

from .helpers import approve, human
from .toy import NOTES, toy_route, write_note

LENGTH = 40  # messages in the thread


@pytest_asyncio.fixture(params=["sqlite", "postgres"])
async def database(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield ""
        return
    from pg import fresh_database

    async with fresh_database() as url:
        yield f"database_url: {url}\n"


def _opener(tmp_path: Path, database: str) -> Callable[[], Any]:
    from conftest import make_config

    from artifactflow import Client, load_settings

    config = make_config(tmp_path, lead_tools=["write_note"], yaml_text=database)

    async def open_client() -> Any:  # a process's client: its own memory of renderings
        return await Client.open(load_settings(config, tmp_path / "data"), extra_tools=[write_note])

    return open_client


def _http(client: Any) -> httpx.AsyncClient:
    from artifactflow.api.app import create_app

    transport = httpx.ASGITransport(app=create_app(client=client))
    return httpx.AsyncClient(transport=transport, base_url="http://af", timeout=60)


async def _ok(response: Any) -> Any:
    assert response.status_code == 200, (response.status_code, response.text[:300])
    return response


async def _thread(client: Any) -> str:
    """A thread of a tool turn (asked, approved, answered) and an answer, run for real, then
    lengthened to LENGTH messages with copies of those two (their rows and events)."""
    async with _http(client) as http:
        thread_id = (await _ok(await http.post("/threads", json={}))).json()["thread_id"]
        for body in ({"input": human("write a note: milk")}, {"command": approve()},
                     {"input": human("hello there")}):
            await _ok(await http.post(f"/threads/{thread_id}/runs/wait",
                                      json={"assistant_id": "lead_agent", **body}))
    from artifactflow.core.store import schema as t

    store = client.admin.store
    seeds = [dict(r) for r in await store.fetch_rows(
        sa.select(t.messages).where(t.messages.c.conversation_id == thread_id)
        .order_by(t.messages.c.created_at)
    )]
    assert [m["status"] for m in seeds] == ["completed", "completed"]
    tip, now = seeds[-1]["id"], time.time()
    for n in range(LENGTH - len(seeds)):
        seed, mid = seeds[n % 2], uuid.uuid4().hex
        rows = await store.fetch_rows(sa.select(t.events).where(t.events.c.message_id == seed["id"]))
        await store.write(
            t.messages.insert().values({**seed, "id": mid, "parent_id": tip, "thread_id": mid,
                                        "created_at": now + n, "updated_at": now + n}),
            t.events.insert().values([{**dict(r), "message_id": mid} for r in rows]),
        )
        tip = mid
    await store.touch_conversation(thread_id, active_message_id=tip)
    return thread_id


async def _reads(client: Any, thread_id: str, middle: str) -> dict[str, bytes]:
    """The bodies of the reads that show the thread's states."""
    async with _http(client) as http:
        out = {}
        for name, method, path, body in [
            ("open", "GET", f"/threads/{thread_id}", None),
            ("state", "GET", f"/threads/{thread_id}/state", None),
            ("state at a step", "GET", f"/threads/{thread_id}/state/{middle}:1", None),
            ("history page", "POST", f"/threads/{thread_id}/history", {"limit": 10}),
            ("history, all", "POST", f"/threads/{thread_id}/history", {"limit": 1000}),
            ("history before", "POST", f"/threads/{thread_id}/history",
             {"limit": 5, "before": {"checkpoint_id": middle}}),
            ("branch history", "POST", f"/threads/{thread_id}/history",
             {"limit": 1000, "checkpoint": {"checkpoint_id": middle}}),
            ("search", "POST", "/threads/search", {"ids": [thread_id], "limit": 20}),
        ]:
            out[name] = (await _ok(await http.request(method, path, json=body))).content
        return out


@pytest.fixture
def rendered(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the messages rendered from their events, as `message_steps` is called."""
    from artifactflow.protocol import renderings

    calls: list[str] = []
    real = renderings.message_steps

    def counted(message: dict[str, Any], events: Any) -> Any:
        calls.append(message["id"])
        return real(message, events)

    monkeypatch.setattr(renderings, "message_steps", counted)
    return calls


async def _forget(client: Any) -> None:
    """No rendering stored or in memory: the next read renders every message from events."""
    from artifactflow.core.store import schema as t
    from artifactflow.protocol.renderings import cache_of

    await client.admin.store.write(t.ap_renderings.delete())
    cache_of(client).clear()


async def test_a_fresh_process_reads_stored_renderings_and_says_the_same(
    tmp_path: Path, database: str, llm_env: Any, rendered: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from artifactflow.core.store import schema as t
    from artifactflow.protocol import renderings
    from artifactflow.protocol.views import path_messages, path_to

    llm_env.route(toy_route)
    NOTES.clear()
    open_client = _opener(tmp_path, database)
    first = await open_client()
    try:
        thread_id = await _thread(first)
        messages = [dict(m) for m in await first.conversations.messages(thread_id)]
        assert len(messages) == LENGTH
        middle = messages[LENGTH // 2]["id"]
        await _forget(first)  # the runs' own reads rendered their messages already
        rendered.clear()
        before = await _reads(first, thread_id, middle)
        assert sorted(rendered) == sorted(m["id"] for m in messages)  # each once
        stored = await first.admin.store.fetch_value(sa.select(sa.func.count()).select_from(t.ap_renderings))
        assert stored == LENGTH
    finally:
        await first.aclose()

    second = await open_client()  # as after a restart: nothing in memory
    try:
        rendered.clear()
        cold = await _reads(second, thread_id, middle)
        assert rendered == []  # not one message rendered from its events
        assert renderings.cache_of(second).loaded == LENGTH
        assert cold == before

        # what the events say, rendered again: the same bytes; and the messages as
        # convert.message_messages builds them from the events, alone
        await _forget(second)
        assert await _reads(second, thread_id, middle) == before
        assert len(rendered) == LENGTH
        path = path_to({m["id"]: m for m in messages}, messages[-1]["id"])
        from_events = json.loads(json.dumps(await path_messages(second, path)))
        assert json.loads(before["state"])["values"]["messages"] == from_events
        assert len(from_events) == LENGTH * 3  # each: a question, a tool round of 3 or an answer
        # a message that changes after it ended (its status, its `updated_at`) is rendered again
        await second.admin.store.update_message(middle, status="failed", error="gone")
        rendered.clear()
        changed = await _reads(second, thread_id, middle)
        assert rendered == [middle]
        async with _http(second) as http:
            state = (await _ok(await http.get(f"/threads/{thread_id}/state/{middle}"))).json()
        assert state["metadata"]["status"] == "failed"
        await _forget(second)
        assert await _reads(second, thread_id, middle) == changed
        # a new renderer renders every message again, whatever is stored
        renderings.cache_of(second).clear()
        monkeypatch.setattr(renderings, "VERSION", renderings.VERSION + 1)
        rendered.clear()
        assert await _reads(second, thread_id, middle) == changed
        assert len(rendered) == LENGTH
        # the renderings go with their thread
        async with _http(second) as http:
            assert (await http.delete(f"/threads/{thread_id}")).status_code == 204
        count = sa.select(sa.func.count()).select_from(t.ap_renderings)
        assert await second.admin.store.fetch_value(count) == 0
    finally:
        await second.aclose()

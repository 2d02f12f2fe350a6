"""Text the database cannot take, and database errors people must not see (D6, D9).

PostgreSQL cannot store NUL (U+0000) in text; SQLite can. A request carrying one is refused
with 422 before anything is written (no empty conversation left behind); a path naming an id
with a NUL names nothing (404); text produced by the model is stored the same on both backends.
Database errors reach people without SQL text or parameters (those go to the debug log).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from conftest import make_config
from pg import fresh_database
from scripted_llm import Call, Text, ToolCalls

from artifactflow import Client, ToolContext, UserError, load_settings, tool
from artifactflow.api.app import create_app

API = "/api/v1"


@tool
async def break_store(note: str, ctx: ToolContext) -> str:
    """Write something the database refuses (a message without content).

    Args:
        note: Stored next to it.
    """
    await ctx.service("store").update_message(ctx.message_id, content=None, error=note)
    return "unreachable"


@contextlib.asynccontextmanager
async def serving(
    backend: str, tmp_path: Path
) -> AsyncIterator[tuple[httpx.AsyncClient, Client]]:
    config = make_config(tmp_path, lead_tools=["break_store"])
    async with fresh_database() as url:
        settings = load_settings(
            config, tmp_path / "data", database_url=url if backend == "postgres" else None
        )
        client = await Client.open(settings, extra_tools=[break_store])
        app = create_app(client=client)
        transport = httpx.ASGITransport(app=app)
        try:
            async with httpx.AsyncClient(transport=transport, base_url="http://testserver") as http:
                yield http, client
        finally:
            await client.aclose()


@pytest_asyncio.fixture(params=["sqlite", "postgres"])
async def served(
    request: pytest.FixtureRequest, tmp_path: Path, llm_env: Any
) -> AsyncIterator[tuple[httpx.AsyncClient, Client]]:
    async with serving(request.param, tmp_path) as pair:
        yield pair


async def test_nul_in_a_request_is_refused_before_anything_is_written(served: Any):
    http, client = served
    for body in (
        {"content": "a\u0000b"},
        {"content": "ok", "conversation_id": "c\u0000"},
        {"content": "ok", "parent_message_id": "m\u0000"},
    ):
        response = await http.post(f"{API}/chat", json=body)
        assert response.status_code == 422, response.text
        assert response.json()["error"]["code"] == "validation_error"
        assert "NUL" in response.json()["error"]["message"]
    assert await client.admin.store.count_conversations() == 0
    for method, path in (
        ("GET", "/messages/a%00b"),
        ("GET", "/messages/a%00b/events"),
        ("GET", "/stream/a%00b"),
        ("POST", "/chat/a%00b/cancel"),
        ("GET", "/conversations/a%00b"),
        ("GET", "/conversations/a%00b/artifacts/x%00y"),
    ):
        response = await http.request(method, API + path)
        assert response.status_code == 404, (path, response.text)
        assert response.json()["error"]["code"] == "not_found"
    response = await http.post(f"{API}/chat/a%00b/resume", json={"decisions": "approve"})
    assert response.status_code == 404, response.text


async def test_nul_through_the_python_api_is_refused_like_over_http(served: Any):
    _, client = served
    with pytest.raises(UserError, match="NUL"):
        await client.runs.start("a\u0000b")
    assert await client.conversations.count() == 0


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_nul_from_the_model_is_stored_alike_on_both_backends(
    backend: str, tmp_path: Path, llm_env: Any
):
    async with serving(backend, tmp_path) as (_, client):
        llm_env.script(Text("before\u0000after"))
        result = await client.run("say it")
        assert result.status == "completed", result.error
        assert result.response == "before\ufffdafter"
        stored = await client.admin.store.get_message(result.message_id)
        assert stored["response"] == "before\ufffdafter"
        # The event log is JSON (NUL escaped), so it keeps the model's exact text.
        complete = [e for e in result.events if e.type == "llm_complete"][-1]
        assert complete.data.content == "before\u0000after"


async def test_database_errors_reach_people_without_sql(
    served: Any, llm_env: Any, caplog: pytest.LogCaptureFixture
):
    http, _ = served
    llm_env.script(ToolCalls([Call("break_store", {"note": "sekrit"})]), Text("done"))
    with caplog.at_level(logging.DEBUG, logger="artifactflow"):
        response = await http.post(f"{API}/chat", json={"content": "break it"})
        message_id = response.json()["message_id"]
        await http.get(f"{API}/stream/{message_id}")
    events = (await http.get(f"{API}/messages/{message_id}/events")).json()["events"]
    text = next(e for e in events if e["type"] == "tool_complete")["data"]["result"]["error"]
    assert "IntegrityError" in text and "content" in text  # the database's own reason stays
    for leak in ("[SQL", "UPDATE", "parameters", "sekrit", "sqlalche.me"):
        assert leak not in text, text
    logged = [r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG]
    assert any("[SQL: UPDATE af_messages" in m and "sekrit" in m for m in logged)

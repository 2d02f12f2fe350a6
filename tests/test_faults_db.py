"""Database outages on a private PostgreSQL server (tests/private_pg.py) that the test restarts
and stops under a live `Client` and its HTTP app.

- D2: after `pg_ctl restart -m fast` every pooled connection is dead. Both pools (the app
  store's SQLAlchemy engine and the checkpoint saver's psycopg pool) check a connection on
  checkout, so the next runs all complete and no endpoint answers 500.
- D3: while the server is down, endpoints answer 503 `database_unavailable` with
  `Retry-After`; a run in flight when it went away ends with a final status and event once it
  is back (its final write is retried), never `running` for good.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import pytest_asyncio
from private_pg import PrivatePostgres, private_postgres
from scripted_llm import Delay, Text
from waiting import ceiling, wait_until

from artifactflow import Client, MessageStatus
from artifactflow.api.app import create_app


@pytest_asyncio.fixture
async def server() -> AsyncIterator[PrivatePostgres]:
    with private_postgres() as pg:
        yield pg


@pytest_asyncio.fixture
async def client(
    server: PrivatePostgres, make_client: Any, monkeypatch: pytest.MonkeyPatch
) -> Client:
    monkeypatch.setenv("ARTIFACTFLOW_DATABASE_URL", server.url)
    monkeypatch.setenv("ARTIFACTFLOW_DATABASE_POOL_SIZE", "3")
    client: Client = await make_client()
    return client


def _http(client: Client) -> httpx.AsyncClient:
    app = create_app(client=client)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test")


async def test_runs_complete_after_a_fast_restart(
    client: Client, server: PrivatePostgres, llm_env: Any
) -> None:
    llm_env.script(Text("before"))
    assert (
        await (await client.runs.start("warm the pools")).result()
    ).status is MessageStatus.COMPLETED

    await asyncio.to_thread(server.restart, "fast")

    codes, outcomes = [], []
    async with _http(client) as http:
        for n in range(10):
            llm_env.script(Text(f"after {n}"))
            codes.append((await http.get("/api/v1/conversations")).status_code)
            result = await (await client.runs.start(f"run {n}")).result()
            outcomes.append(result.status.value)
    assert (codes.count(500), 10 - outcomes.count("completed")) == (0, 0), (codes, outcomes)
    bus = client._engine.rt.bus  # noqa: SLF001 - the LISTEN connection listens again
    await wait_until(lambda: bus._conn is not None and not bus._conn.is_closed(), what="the bus")  # noqa: SLF001


async def test_outage_answers_503_and_the_run_in_flight_ends(
    client: Client, server: PrivatePostgres, llm_env: Any
) -> None:
    llm_env.script(Delay(60, Text("too late")))  # the model answers only after the outage
    run = await client.runs.start("a run the database leaves")
    reader = asyncio.create_task(_read_all(run))  # a reader attached before the outage (the CLI)
    await wait_until(lambda: llm_env.request_count == 1, what="the model request")

    await asyncio.to_thread(server.stop, "fast")
    try:
        async with _http(client) as http:
            answer = await http.get("/api/v1/conversations")
            assert answer.status_code == 503, answer.text
            assert answer.headers["Retry-After"].isdigit()
            assert answer.json()["error"]["code"] == "database_unavailable"
            assert "database" in answer.json()["error"]["message"]

            llm_env.close()  # the model call fails now, while the database is down
            events = await reader  # the stream ends with the reason, the database still down
            assert events[-1].type == "error" and "database unavailable" in events[-1].data.message
            assert (await http.get(f"/api/v1/messages/{run.message_id}")).status_code == 503
    finally:
        await asyncio.to_thread(server.start)

    stored = await wait_until(
        lambda: _final_events(client, run.message_id),
        timeout=ceiling(300),
        what="the final event stored after the database returned",
    )
    assert stored[-1].type == "error"
    message = await client.conversations.message(run.message_id)
    assert message["status"] == "failed", message
    async with _http(client) as http:
        assert (await http.get(f"/api/v1/messages/{run.message_id}")).status_code == 200


async def _read_all(run: Any) -> list[Any]:
    return [e async for e in run]


async def _final_events(client: Client, message_id: str) -> list[Any]:
    try:
        events = await client.runs.events(message_id)
    except Exception:  # the pools may still be reconnecting
        return []
    return events if events and events[-1].is_final else []


async def test_durable_writes_commit_synchronously_on_postgres() -> None:
    """Sessions default to `synchronous_commit=off`; the ledger's "started" record, final
    statuses and a claim's accepted decisions are committed with it `on` (what the server
    itself reports inside them)."""
    from pg import fresh_database
    from sqlalchemy import event as sa_event

    from artifactflow.core.store.repository import AppStore

    async with fresh_database() as url:
        store = await AppStore.open(url, synchronous_commit="off")
        try:
            async with store.transaction() as conn:
                assert (await conn.exec_driver_sql("SHOW synchronous_commit")).scalar() == "off"
            async with store.transaction(durable=True) as conn:
                assert (await conn.exec_driver_sql("SHOW synchronous_commit")).scalar() == "on"

            seen: list[str] = []
            sa_event.listen(
                store.engine.sync_engine,
                "before_cursor_execute",
                lambda _c, _cur, statement, *_: seen.append(statement.split()[0:3]),
            )
            assert await store.ledger_begin("m1", "call-1") == "started"  # the tool node's call
            assert seen[-3:-1] == [
                ["SET", "LOCAL", "synchronous_commit"],
                ["INSERT", "INTO", "af_tool_executions"],
            ]
            seen.clear()
            await store.change_status("no-such-message", expected_status="running", status="failed")
            assert seen[0] == ["SET", "LOCAL", "synchronous_commit"] and seen[1][0] == "UPDATE"
            seen.clear()
            await store.change_status(
                "no-such-message", expected_status="running", status="waiting"
            )
            assert seen and seen[0][0] == "UPDATE"  # a pause is not final: the bulk setting
            seen.clear()
            await store.change_status(  # a resume's claim that stores the accepted decisions
                "no-such-message", expected_status="waiting", status="running", decisions={"d": 1}
            )
            assert seen[0] == ["SET", "LOCAL", "synchronous_commit"] and seen[1][0] == "UPDATE"
        finally:
            await store.close()

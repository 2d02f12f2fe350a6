"""Recorded requests store a tool result once: a reference to its `tool_complete` event.

A real run (scripted model over HTTP; a SQLite data folder, then PostgreSQL) with results of every kind: plain
text (referred to), text the model saw truncated, a dict the model saw as JSON, a failure the
model saw as `ERROR: …` (all kept literally). Every reader must get the request exactly as it
was sent: the export equals the request bodies the model server received, and equals the
export of the same rows rewritten whole (the form rows had before references, which must
still read). A reference that does not resolve is an error, never a guess.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import sqlalchemy as sa
from conftest import make_config
from scripted_llm import Call, Text, ToolCalls

from artifactflow import Client, load_settings, read_session, replay_session, tool
from artifactflow.core.store import schema as t
from artifactflow.replay import store as recorded_calls
from artifactflow.replay.session import Session

TRUNCATE_AT = 300


def text_of(n: int, size: int) -> str:
    words = [f"w{(n * 7919 + i * 104729) % 9973}" for i in range(size)]
    return " ".join(words)[:size]


@tool
def page(n: int) -> str:
    """Return one page of text.

    Args:
        n: Page number.
    """
    return text_of(n, 250)


@tool
def long_page(n: int) -> str:
    """Return a page longer than the model is shown.

    Args:
        n: Page number.
    """
    return text_of(n, 1000)


@tool
def stats(n: int) -> dict[str, Any]:
    """Return figures about a page.

    Args:
        n: Page number.
    """
    return {"page": n, "words": text_of(n, 120).split()}


@tool
def broken(n: int) -> str:
    """Always fails.

    Args:
        n: Page number.
    """
    raise RuntimeError("the archive is closed " + text_of(n, 100))


TOOLS = [page, long_page, stats, broken]


@pytest_asyncio.fixture(params=["sqlite", "postgres"])
async def open_client(
    request: pytest.FixtureRequest, llm_env, tmp_path: Path
) -> AsyncIterator[Any]:
    """Opens a client on a SQLite data folder, then on a fresh PostgreSQL database."""
    config = make_config(
        tmp_path,
        lead_tools=[t_.name for t_ in TOOLS],
        yaml_text=f"tools:\n  max_result_chars: {TRUNCATE_AT}\n",
    )
    async with AsyncExitStack() as stack:
        url = None
        if request.param == "postgres":
            from pg import fresh_database

            url = await stack.enter_async_context(fresh_database())

        async def opener() -> Client:
            settings = load_settings(config, tmp_path / "data", database_url=url)
            client = await Client.open(settings, extra_tools=TOOLS)
            stack.push_async_callback(client.aclose)
            return client

        yield opener


async def record(open_client, llm) -> tuple[Any, str]:
    client = await open_client()
    llm.script(
        ToolCalls(
            [
                Call("page", {"n": 1}, id="p1"),
                Call("long_page", {"n": 2}, id="l1"),
                Call("stats", {"n": 3}, id="s1"),
                Call("broken", {"n": 4}, id="b1"),
            ]
        ),
        ToolCalls([Call("page", {"n": 5}, id="p1")]),  # a model that reuses a call id
        ToolCalls([Call("page", {"n": 6}, id="p3")]),
        Text("done"),
    )
    result = await client.run("read the pages")
    assert (result.status, result.response) == ("completed", "done"), result.error
    return client, result.message_id


async def raw_calls(store: Any, message_id: str) -> list[tuple[int, dict[str, Any]]]:
    table = t.model_calls
    query = (
        sa.select(table.c.seq, table.c.data_z)
        .where(table.c.message_id == message_id, table.c.kind == "call")
        .order_by(table.c.seq)
    )
    async with store.engine.connect() as conn:
        return [(seq, json.loads(zlib.decompress(blob))) for seq, blob in await conn.execute(query)]


def exported_text(session: Session, path: Path) -> str:
    session.exported_at = 0.0
    return session.write(path).read_text(encoding="utf-8")


async def test_a_stored_text_result_is_referred_to_and_exports_exactly_as_sent(
    open_client, llm, tmp_path
):
    client, mid = await record(open_client, llm)
    store = client.admin.store

    # What was stored: the plain-text results as references, the others as the model saw them.
    stored = await raw_calls(store, mid)
    literal: dict[str, str] = {}
    referred: list[str] = []
    for _, data in stored:
        refs = {index for index, _ in data.get("results") or []}
        for index, message in enumerate(data["append"]):
            if message.get("role") != "tool":
                continue
            if index in refs:
                assert message["content"] is None
                referred.append(message["tool_call_id"])
            else:
                literal[message["tool_call_id"]] = message["content"]
    assert referred == ["p1", "p1", "p3"]
    assert sorted(literal) == ["b1", "l1", "s1"]
    assert literal["l1"].startswith(text_of(2, 1000)[:TRUNCATE_AT]) and len(literal["l1"]) < 1000
    assert literal["s1"] == json.dumps({"page": 3, "words": text_of(3, 120).split()})
    assert literal["b1"].startswith("ERROR: ") and "the archive is closed" in literal["b1"]

    # Every reader sees the requests as the model server received them.
    session = await client.runs.export(mid)
    sent = [request["messages"] for request in llm.requests]
    assert [call.messages for call in session.calls] == sent
    assert sent[2][-1]["content"] == text_of(5, 250)  # the reused id resolves to its own result
    assert sent[3][-1]["content"] == text_of(6, 250)
    rows = await recorded_calls.rows(store, mid)
    assert all("results" not in r["data"] for r in rows)

    # The same rows written whole, as before references existed, export to the same file.
    with_refs = exported_text(session, tmp_path / "refs.jsonl")
    resolved = {r["seq"]: r["data"] for r in rows if r["kind"] == "call"}
    async with store.engine.begin() as conn:
        for seq, data in resolved.items():
            await conn.execute(
                t.model_calls.update()
                .where(t.model_calls.c.message_id == mid, t.model_calls.c.seq == seq)
                .values(data_z=recorded_calls.pack(data))
            )
    assert all("results" not in data for _, data in await raw_calls(store, mid))
    whole = exported_text(await client.runs.export(mid), tmp_path / "whole.jsonl")
    assert with_refs == whole

    report = await replay_session(tmp_path / "refs.jsonl", client.settings)
    assert report.line() == "same (4 steps)", report.divergence
    assert [c.messages for c in read_session(tmp_path / "refs.jsonl").calls] == sent


async def test_a_reference_the_event_log_does_not_back_is_an_error(open_client, llm):
    client, mid = await record(open_client, llm)
    store = client.admin.store
    _, data = (await raw_calls(store, mid))[-1]
    [[_, event_id]] = data["results"]
    async with store.engine.begin() as conn:  # the event now holds another call's result
        where = (t.events.c.message_id == mid, t.events.c.event_id == event_id)
        row = (
            await conn.execute(sa.select(t.events.c.data, t.events.c.data_z).where(*where))
        ).one()
        event = json.loads(zlib.decompress(row.data_z) if row.data_z else row.data)
        assert event["result"]["data"] == text_of(6, 250)
        event["tool_call_id"] = "someone-else"
        await conn.execute(
            t.events.update().where(*where).values(data=json.dumps(event), data_z=None)
        )
    with pytest.raises(ValueError, match=f"refers to tool result event {event_id}"):
        await recorded_calls.rows(store, mid)

"""The group commit of event batches (SQLite: on the store's writer thread; PostgreSQL: through
SQLAlchemy): what one shared transaction stores, and how one run's failure stays its own."""

from __future__ import annotations

import asyncio
import time

import pytest
import sqlalchemy.exc

from artifactflow.core.store.group_commit import group_commit_for
from artifactflow.core.store.repository import AppStore
from artifactflow.core.store.sqlite_writer import sqlite_writer_for
from artifactflow.errors import LeaseLostError


def _event(event_id: int, agent: str | None = "lead_agent", **data: object) -> dict[str, object]:
    return {
        "event_id": event_id,
        "type": "agent_start",
        "agent": agent,
        "timestamp": time.time(),
        "data": data,
    }


async def _message(store: AppStore, token: str) -> str:
    conv = await store.create_conversation()
    message = await store.add_message(
        conversation_id=conv["id"], content="x", parent_id=None, status="running", run_token=token
    )
    return message["id"]


async def test_batches_of_several_runs_share_a_transaction_and_keep_their_rows(store: AppStore):
    a, b = await _message(store, "ta"), await _message(store, "tb")
    group = group_commit_for(store)
    big = "w" * 4000  # compressed into data_z
    await asyncio.gather(
        group.append(
            a, [_event(1, text="one"), _event(2, agent="bad\x00name", text=big)], run_token="ta"
        ),
        group.append(b, [_event(1, text="other")], run_token="tb"),
        group.append(b, [_event(2)]),  # no token: not checked
    )
    writer = sqlite_writer_for(store)
    assert (writer is not None) == store.is_sqlite  # SQLite: the batches went to its writer
    assert writer is None or writer.transactions >= 1
    rows = await store.events(a)
    assert [(r["event_id"], r["agent"], r["data"]) for r in rows] == [
        (1, "lead_agent", {"text": "one"}),
        (2, "bad\ufffdname", {"text": big}),  # NUL replaced as on every string column
    ]
    assert [(r["event_id"], r["data"]) for r in await store.events(b)] == [
        (1, {"text": "other"}),
        (2, {}),
    ]


async def test_a_run_that_lost_its_message_writes_nothing_and_fails_alone(store: AppStore):
    a, b = await _message(store, "ta"), await _message(store, "tb")
    group = group_commit_for(store)
    results = await asyncio.gather(
        group.append(a, [_event(1)], run_token="stale"),
        group.append(b, [_event(1)], run_token="tb"),
        return_exceptions=True,
    )
    assert isinstance(results[0], LeaseLostError) and results[1] is None
    assert await store.events(a) == []
    assert [r["event_id"] for r in await store.events(b)] == [1]
    assert await store.holds_run(b, "tb") and not await store.holds_run(a, "stale")


async def test_a_bad_batch_fails_its_run_with_the_usual_error_and_spares_the_others(
    store: AppStore,
):
    a, b = await _message(store, "ta"), await _message(store, "tb")
    group = group_commit_for(store)
    await group.append(a, [_event(1)], run_token="ta")
    results = await asyncio.gather(
        group.append(a, [_event(1)], run_token="ta"),  # a duplicate event id
        group.append(b, [_event(1)], run_token="tb"),
        return_exceptions=True,
    )
    assert isinstance(results[0], sqlalchemy.exc.IntegrityError) and results[1] is None
    assert [r["event_id"] for r in await store.events(a)] == [1]
    assert [r["event_id"] for r in await store.events(b)] == [1]
    with pytest.raises(sqlalchemy.exc.IntegrityError):
        await group.append(a, [_event(1)], run_token="ta")


async def test_rows_written_together_keep_exact_values(store: AppStore):
    """Event ids, float timestamps, compressed payloads (`data_z`) and text come back exactly
    as written (on PostgreSQL they travel as text arrays cast in the statement)."""
    mid = await _message(store, "tok")
    stamps = [1795664725.6062639, 0.1 + 0.2, 1e-300, 2.0**53 + 1]
    big = "payload " * 600  # compressed into data_z
    events = [
        {**_event(i + 1, text=big if i == 1 else f"n{i}"), "timestamp": stamp}
        for i, stamp in enumerate(stamps)
    ]
    await group_commit_for(store).append(mid, events, run_token="tok")
    rows = await store.events(mid)
    assert [(r["event_id"], r["timestamp"], r["data"]) for r in rows] == [
        (e["event_id"], e["timestamp"], e["data"]) for e in events
    ]


@pytest.mark.parametrize("store", ["postgres"], indirect=True)  # a PostgreSQL-only question
async def test_postgres_batches_need_no_array_type_lookup(store: AppStore):
    """Every array of the one-statement batch is a `text[]`: asyncpg knows it from the start,
    while `int8[]`, `float8[]` or `bytea[]` made each new pooled connection look the types up
    in the catalog (a costly query on the server) before its first batch."""
    from artifactflow.core.store import schema as t
    from artifactflow.core.store.pg_unnest import unnest_for

    for table in (t.events, t.model_calls, t.tool_executions):
        unnest = unnest_for(table, store.engine.dialect)
        assert unnest is not None
        async with store.engine.connect() as conn:
            raw = (await conn.get_raw_connection()).driver_connection
            assert raw is not None
            prepared = await raw.prepare(unnest.sql(1, extra=["run_token"]))
            assert {p.name for p in prepared.get_parameters()} == {"text[]"}, table.name

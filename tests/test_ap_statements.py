"""The Agent Protocol's thread and run rows: the same rows on both backends, and on SQLite
without a SQLAlchemy statement (`core/store/ap_statements.py`, on the store's writer)."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy import event

from artifactflow.core.store.schema import ap_runs, ap_threads
from artifactflow.protocol.records import ProtocolRecords


def _count_statements(store: Any) -> list[str]:
    seen: list[str] = []

    def before(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if "ap_runs" in statement or "ap_threads" in statement:
            seen.append(statement)

    event.listen(store.engine.sync_engine, "before_cursor_execute", before)
    return seen


async def test_run_and_thread_rows_round_trip_as_stored(store: Any) -> None:
    records = ProtocolRecords(store)
    thread = (await store.create_conversation(None))["id"]
    through_sqlalchemy = _count_statements(store)

    made = await records.put_thread(thread, None, {"a": 1})
    assert made["metadata"] == {"a": 1}
    await records.add_thread_defaults(thread, None, {"a": 2, "graph_id": "agent"})
    assert (await records.thread_row(thread))["metadata"] == {"a": 1, "graph_id": "agent"}

    first = await records.add_run(
        thread_id=thread, assistant_id="agent", status="running",
        multitask_strategy="reject", metadata={"k": "v"}, request={"stream_mode": ["values"]},
    )
    second = await records.add_run(
        thread_id=thread, assistant_id="agent", status="pending",
        multitask_strategy="enqueue", metadata={},
    )
    # the row returned is the row stored
    stored = await records.run(first["run_id"])
    assert stored == first
    assert await records.run(second["run_id"]) == second
    assert await records.run("no-such-run") is None
    assert await records.thread_row("no-such-thread") is None

    # compare-and-set: only from an expected status; the row count says who won
    assert await records.update_run(first["run_id"], when=("pending",), status="success") is None
    moved = await records.update_run(first["run_id"], when=("running",), status="success")
    assert moved is not None
    assert (await records.run(first["run_id"]))["updated_at"] == moved
    active = await records.thread_runs(thread, statuses=("pending", "running"), oldest_first=True)
    assert [r["run_id"] for r in active] == [second["run_id"]]
    newest_first = await records.thread_runs(thread)
    assert [r["status"] for r in newest_first] == ["pending", "success"]

    records_statements = list(through_sqlalchemy)
    # what SQLAlchemy reads is what was written
    truth = await store.fetch_rows(sa.select(ap_runs).where(ap_runs.c.thread_id == thread))
    assert sorted(r["status"] for r in truth) == ["pending", "success"]
    meta = await store.fetch_rows(sa.select(ap_threads.c.metadata))
    assert [r["metadata"] for r in meta] == ['{"a": 1, "graph_id": "agent"}']

    # SQLite: every one of those went to the writer, none through SQLAlchemy
    assert (records_statements == []) == store.is_sqlite

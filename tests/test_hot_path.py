"""Storage upkeep off the runs' path, and the one-hop SQLite drivers under the stores.

The upkeep (vacuum of the checkpoint file, emptying both write-ahead logs) is only asked for
when a message finishes and is done once for many runs at a quiet moment, or when the engine
closes. The one-hop drivers (the app store's aiosqlite cursors, the checkpoint saver) must
read back exactly what they wrote, and keep the driver's errors.
"""

from __future__ import annotations

import contextlib
import random
import sqlite3
import string
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
import sqlalchemy.exc
from scripted_llm import Call, Text, ToolCalls

from artifactflow import ToolContext, tool
from artifactflow.core.run.maintenance import run_metrics
from artifactflow.core.sqlite_saver import OneHopSqliteSaver
from artifactflow.core.store import schema as t
from artifactflow.core.store.one_hop import OneHopConnection
from artifactflow.core.store.repository import AppStore
from artifactflow.events.payloads import ArtifactCreatedData


@tool
def add(a: int, b: int) -> int:
    """Add two integers (a sync tool).

    Args:
        a: First.
        b: Second.
    """
    return a + b


@tool
def page(n: int) -> str:
    """A long page (its checkpoints fill pages of the file).

    Args:
        n: Page number.
    """
    rng = random.Random(n)
    return "".join(rng.choice(string.ascii_letters) for _ in range(100_000))  # incompressible


async def test_upkeep_waits_for_a_quiet_moment_and_runs_once_at_close(make_client, llm):
    client = await make_client(lead_tools=["page"], extra_tools=[page])
    rt = client._engine.rt
    rt.upkeep.quiet_seconds = 3600  # never quiet during the test: only close does it
    for n in range(3):
        llm.script(ToolCalls([Call("page", {"n": n})]), Text(f"done {n}"))
        result = await client.run(f"add {n}")
        assert result.status == "completed" and result.response == f"done {n}"
        assert not await client.admin.checkpoints.has_checkpoint(result.thread_id)
    assert rt.upkeep.passes == 0 and rt.upkeep.due  # asked three times, not done yet
    path = client.settings.checkpoint_db_path
    assert free_pages(path) > 0  # the deleted checkpoints' pages, not handed back yet
    await client.aclose()
    assert rt.upkeep.passes == 1 and not rt.upkeep.due  # once, for all three
    assert free_pages(path) == 0


def free_pages(path: Path) -> int:
    with contextlib.closing(sqlite3.connect(path)) as conn:
        return conn.execute("PRAGMA freelist_count").fetchone()[0]


async def test_upkeep_runs_when_quiet(make_client, llm):
    client = await make_client()
    upkeep = client._engine.rt.upkeep
    upkeep.quiet_seconds = 0.01
    llm.script(Text("hello"))
    assert (await client.run("hi")).status == "completed"
    await upkeep.idle()  # waits for the pass itself, not for time
    assert upkeep.passes == 1 and not upkeep.due


async def test_one_hop_app_store_reads_back_and_keeps_driver_errors(tmp_path: Path):
    store = await AppStore.open(None, sqlite_path=tmp_path / "app.db")
    try:
        async with store.engine.connect() as conn:
            raw = await conn.get_raw_connection()
            assert isinstance(raw.driver_connection, OneHopConnection)
        conversation = await store.create_conversation("c1", user_id="u")
        assert conversation["id"] == "c1"
        rows = await store.fetch_all(sa.select(t.conversations), dict)
        assert [r["id"] for r in rows] == ["c1"] and rows[0]["user_id"] == "u"
        count = await store.write(sa.update(t.conversations).values(title="x"))
        assert count == 1  # rowcount of a write
        with pytest.raises(sqlalchemy.exc.IntegrityError):
            await store.create_conversation("c1", user_id="u")
        assert await store.fetch_value(sa.select(sa.func.count()).select_from(t.conversations)) == 1
    finally:
        await store.close()


async def test_one_hop_checkpoint_saver_round_trip(make_client, llm):
    client = await make_client(lead_tools=["add"], extra_tools=[add])
    saver = client.admin.checkpoints.saver
    assert isinstance(saver, OneHopSqliteSaver)
    llm.script(ToolCalls([Call("add", {"a": 2, "b": 3})]), Text("five"))
    result = await client.run("add")
    assert result.status == "completed" and result.response == "five"
    assert llm.requests[1]["messages"][-1]["content"] == "5"


async def test_fresh_run_metrics_equal_those_read_from_the_log(make_client, llm, monkeypatch):
    """A first segment computes its metrics from the events it published (the forms its sink
    stored, not serialised again); they are the metrics the stored log gives."""
    from artifactflow.core.run import segment

    dumped_again: list[object] = []
    monkeypatch.setattr(segment, "metric_view", lambda e: dumped_again.append(e) or {})
    client = await make_client(lead_tools=["add"], extra_tools=[add])
    llm.script(ToolCalls([Call("add", {"a": 1, "b": 1})]), Text("two"))
    result = await client.run("add")
    assert result.status == "completed" and result.metrics
    assert dumped_again == []
    from_log = await run_metrics(client._engine.rt, result.message_id, time.perf_counter())
    stored = dict(result.metrics)
    assert stored.pop("wall_ms") >= 0 and from_log.pop("wall_ms") >= 0
    assert stored.pop("conversation") and from_log.pop("conversation")
    assert stored == from_log and stored["llm_calls"] == 2


async def test_checkpoint_operations_of_many_runs_share_trips(tmp_path: Path):
    """Operations that wait while a trip is under way go together in the next one and commit
    together; when one fails, each runs again alone, so each gets its own result or error and
    the failed one leaves nothing behind; a caller cancelled before its trip runs nothing."""
    import asyncio

    import aiosqlite

    conn = await aiosqlite.connect(tmp_path / "c.db")
    saver = OneHopSqliteSaver(conn)
    try:
        await saver.setup()
        trips = 0
        plain = saver._on_thread

        async def counted(fn):
            nonlocal trips
            trips += 1
            return await plain(fn)

        saver._on_thread = counted  # type: ignore[method-assign]

        await conn.execute("CREATE TABLE t (i INTEGER)")
        await conn.commit()

        def op(i: int):
            def run(c: sqlite3.Connection) -> int:
                c.execute("INSERT INTO t VALUES (?)", (i,)).close()
                if i == 3:  # after its insert: the shared transaction is rolled back, redone
                    raise sqlite3.IntegrityError("three")
                return i

            return run

        results = await asyncio.gather(*(saver._shared_trip(op(i)) for i in range(20)), return_exceptions=True)
        assert [r for r in results if not isinstance(r, Exception)] == [i for i in range(20) if i != 3]
        assert isinstance(results[3], sqlite3.IntegrityError)
        assert trips < 20  # shared

        late = asyncio.ensure_future(saver._shared_trip(op(99)))
        late.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await late
        await saver._shared_trip(lambda c: None)
        rows = (await (await conn.execute("SELECT i FROM t ORDER BY i")).fetchall())
        assert [r[0] for r in rows] == [i for i in range(20) if i != 3]  # 99 never ran
    finally:
        await conn.close()


async def test_objects_alive_at_the_first_opening_are_frozen_once(make_client, monkeypatch):
    """The first engine of a process moves the objects alive then out of the cyclic
    collector's reach (once); `ARTIFACTFLOW_GC_FREEZE=0` leaves the collector alone."""
    import gc

    from artifactflow.core import engine

    calls: list[int] = []
    monkeypatch.setattr(engine, "_FROZEN", [])
    monkeypatch.setattr(engine.gc, "freeze", lambda: calls.append(1))
    monkeypatch.setenv("ARTIFACTFLOW_GC_FREEZE", "0")
    await make_client()
    assert calls == [] and engine._FROZEN == []
    monkeypatch.setenv("ARTIFACTFLOW_GC_FREEZE", "1")
    await make_client()
    await make_client()
    assert calls == [1] and engine._FROZEN == [True]  # once per process
    assert gc.isenabled()


async def test_the_model_client_is_built_before_the_freeze(make_client, llm, monkeypatch):
    """The first engine builds its agents' model client (whose modules, `openai` and
    `aiohttp`, are most of what a first run used to import) before it freezes the objects
    alive, so they are frozen too; the runs use that same client."""
    from artifactflow.core import engine

    built_at_freeze: list[list[str]] = []
    clients: list[object] = []

    def freeze() -> None:
        picker = clients[0] if clients else None
        built_at_freeze.append(sorted(getattr(picker, "_models", {})))

    real_prepare = engine.Services.prepare_models

    def prepare(self: engine.Services) -> None:
        clients.append(self.llm)
        real_prepare(self)

    monkeypatch.setattr(engine, "_FROZEN", [])
    monkeypatch.setattr(engine.gc, "freeze", freeze)
    monkeypatch.setattr(engine.Services, "prepare_models", prepare)
    client = await make_client()
    assert built_at_freeze == [["chat_completions"]]
    picker = client._engine.services.llm
    model = picker._models["chat_completions"]
    llm.script(Text("hello"))
    result = await client.run("hi")
    assert result.status == "completed" and result.response == "hello"
    assert picker._models == {"chat_completions": model}  # the run used the prepared one


@tool
def note_page(n: int, ctx: ToolContext) -> str:
    """Report an artifact from a sync tool's thread.

    Args:
        n: Page.
    """
    ctx.emit(ArtifactCreatedData(artifact_id=f"p{n}", title="Page", version=1, content_type="text/plain"))
    return f"page {n}"


async def test_events_a_sync_tool_emits_from_its_thread_reach_the_log_in_order(make_client, llm):
    """Chat-graph nodes hand events straight to the run; a sync tool's event, emitted on its
    own thread, still reaches the log, numbered in order, before its `tool_complete`."""
    client = await make_client(lead_tools=["note_page"], extra_tools=[note_page])
    llm.script(ToolCalls([Call("note_page", {"n": 1})]), Text("noted"))
    result = await client.run("note")
    assert result.status == "completed" and result.response == "noted"
    types = [e.type.value for e in result.events]
    assert types.index("tool_start") < types.index("artifact_created") < types.index("tool_complete")
    assert [e.event_id for e in result.events] == list(range(1, len(result.events) + 1))


async def test_fresh_run_ends_from_its_stream_not_from_the_state(make_client, llm, monkeypatch):
    """A fresh chat message's completion takes its response and outcome from the writes its
    segment streamed, which match the final checkpoint's; its start stores the conversation,
    the message and the conversation's active message in one transaction."""
    client = await make_client(lead_tools=["add"], extra_tools=[add])
    rt = client._engine.rt
    graph_class = type(rt.graph)
    read: list[object] = []
    original = graph_class.aget_state

    async def counted(self, config, *args, **kwargs):
        read.append(config)
        return await original(self, config, *args, **kwargs)

    monkeypatch.setattr(graph_class, "aget_state", counted)
    kept = rt.services.settings.checkpoints.keep_completed
    rt.services.settings.checkpoints.keep_completed = True  # the final state stays readable
    try:
        llm.script(ToolCalls([Call("add", {"a": 2, "b": 2})]), Text("four"))
        result = await client.run("add")
    finally:
        rt.services.settings.checkpoints.keep_completed = kept
    assert result.status == "completed" and result.response == "four"
    assert read == []
    config = {"configurable": {"thread_id": result.thread_id}}
    values = (await original(rt.graph, config)).values
    assert values["graph_response"] == result.response and values["outcome"] == result.outcome
    conversation = await rt.store.get_conversation(result.conversation_id)
    assert conversation is not None and conversation["active_message_id"] == result.message_id
    assert conversation["title"]

"""MemoryStore on both backends (a SQLite file, a fresh PostgreSQL database): the memory verbs,
LangGraph's `BaseStore` operations, isolation by user and project, deletion with the
conversation, and the vector cache seeing another worker's writes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.store.base import BaseStore

from artifactflow.errors import MemoryTextError
from artifactflow.memory import MemoryStore, call_key, scope_namespace
from artifactflow.settings.memory import MemorySettings


@pytest.fixture
def memory(store: Any) -> MemoryStore:
    return MemoryStore(store)


async def test_add_search_forget(memory: MemoryStore) -> None:
    assert isinstance(memory, BaseStore)
    alice = ("alice", "global")
    rex = await memory.add_memory(alice, "My dog is a golden retriever called Biscuit")
    await memory.add_memory(alice, "The production database password rotates every 90 days")
    found = await memory.search_memories([("alice",)], "what is my pet puppy named", mode="hybrid", limit=2)
    assert found.mode == "hybrid" and found.hits[0].id == rex.id
    assert found.hits[0].namespace == alice and found.hits[0].score > found.hits[1].score
    semantic = await memory.search_memories([alice], "database credentials", mode="semantic", limit=1)
    assert semantic.mode == "semantic" and "password" in semantic.hits[0].text
    assert await memory.forget("bob", rex.id) is False  # not bob's
    assert await memory.forget("alice", rex.id) is True
    assert await memory.forget("alice", rex.id) is False
    assert [h.text for h in await memory.list_memories([("alice",)])] == [
        "The production database password rotates every 90 days"
    ]


async def test_true_duplicate_merges_and_says_deduped(memory: MemoryStore) -> None:
    ns = ("alice", "global")
    first = await memory.add_memory(ns, "I take my coffee black with no sugar.")
    again = await memory.add_memory(ns, "I take my coffee black, with no sugar")
    assert again.deduped and again.id == first.id
    other_scope = await memory.add_memory(("alice", "project", "p1"), "I take my coffee black with no sugar.")
    assert not other_scope.deduped and other_scope.id != first.id
    listed = await memory.list_memories([("alice",)])
    assert [h.text for h in listed] == ["I take my coffee black with no sugar."] * 2
    assert await memory.history("alice", first.id) == []  # nothing was replaced


async def test_near_pairs_are_stored_beside(memory: MemoryStore) -> None:
    """Near vectors are not the same fact: each of these pairs stays two memories."""
    ns = ("alice", "global")
    pairs = [
        ("time.strftime(format[, t]) Convert a tuple or struct_time representing a time to a string.",
         "time.strptime(string[, format]) Parse a string representing a time according to a format."),
        ("re.sub(pattern, repl, string) Return the string obtained by replacing occurrences.",
         "re.subn(pattern, repl, string) Return the string obtained by replacing occurrences."),
        ("I like C", "I like C++"),
    ]
    for a, b in pairs:
        first = await memory.add_memory(ns, a)
        second = await memory.add_memory(ns, b)
        assert not second.deduped and second.id != first.id, (a, b)
    texts = {h.text for h in await memory.list_memories([ns])}
    assert texts == {t for pair in pairs for t in pair}


async def test_extended_text_replaces_and_keeps_history(store: Any) -> None:
    # a low threshold: what decides here is that the new text contains the stored one
    memory = MemoryStore(store, MemorySettings(dedupe_threshold=0.5))
    ns = ("alice", "global")
    first = await memory.add_memory(ns, "Falcon ships in Q3")
    longer = await memory.add_memory(ns, "Falcon ships in Q3, on a Friday.")
    assert longer.deduped and longer.id == first.id
    got = await memory.get_memory("alice", first.id)
    assert got is not None and got.text == "Falcon ships in Q3, on a Friday."
    history = await memory.history("alice", first.id)
    assert history is not None and [h["text"] for h in history] == ["Falcon ships in Q3"]
    assert await memory.history("bob", first.id) is None  # not bob's
    # a BaseStore put that replaces an item's text keeps the previous version too
    await memory.aput(("alice", "notes"), "k", {"text": "v1"})
    await memory.aput(("alice", "notes"), "k", {"text": "v2"})
    item = await memory.aget(("alice", "notes"), "k")
    assert item is not None and item.value == {"text": "v2"}
    async with memory.engine.connect() as conn:
        from artifactflow.memory import records

        row = await records.by_key(conn, ("alice", "notes"), "k")
        assert row is not None
        assert [h["text"] for h in await records.history_of(conn, row.seq)] == ["v1"]


async def test_text_limits(store: Any) -> None:
    memory = MemoryStore(store, MemorySettings(max_chars=50))
    with pytest.raises(MemoryTextError, match="empty"):
        await memory.add_memory(("alice", "global"), "   ")
    with pytest.raises(MemoryTextError, match="at most 50 characters"):
        await memory.add_memory(("alice", "global"), "x" * 51)
    assert await memory.list_memories([("alice",)]) == []


async def test_recency_mode_is_newest_first(memory: MemoryStore) -> None:
    ns = ("alice", "global")
    for text in ("first fact about apples", "second fact about pears", "third fact about plums"):
        await memory.add_memory(ns, text)
        await asyncio.sleep(0.01)
    found = await memory.search_memories([ns], "apples", mode="recency", limit=3)
    assert found.mode == "recency"
    assert [h.text for h in found.hits] == [
        "third fact about plums", "second fact about pears", "first fact about apples"
    ]


async def test_users_and_projects_are_isolated(memory: MemoryStore) -> None:
    await memory.add_memory(scope_namespace("alice", "project", project="alpha"), "Alpha ships on Fridays")
    await memory.add_memory(scope_namespace("alice", "project", project="beta"), "Beta ships on Mondays")
    await memory.add_memory(scope_namespace("bob", "global"), "Bob's secret: ships on Sundays")
    alpha = await memory.search_memories([("alice", "global"), ("alice", "project", "alpha")], "when does it ship", mode="hybrid", limit=10)
    assert [h.text for h in alpha.hits] == ["Alpha ships on Fridays"]
    alice = await memory.search_memories([("alice",)], "ships", mode="hybrid", limit=10)
    assert {h.text for h in alice.hits} == {"Alpha ships on Fridays", "Beta ships on Mondays"}
    bob_id = (await memory.list_memories([("bob",)]))[0].id
    assert await memory.get_memory("alice", bob_id) is None
    assert (await memory.get_memory("bob", bob_id)) is not None


async def test_tool_call_key_saves_once(memory: MemoryStore) -> None:
    ns = ("alice", "conversation", "c1")
    key = call_key("m1", "call_1")
    first = await memory.add_memory(ns, "The launch moved to Q3", key=key)
    replayed = await memory.add_memory(ns, "The launch moved to Q3", key=key)
    assert first.id == replayed.id == key
    assert len(await memory.list_memories([("alice",)])) == 1


async def test_conversation_memories_go_with_the_conversation(memory: MemoryStore, store: Any) -> None:
    conversation = await store.create_conversation(user_id="alice")
    cid = conversation["id"]
    kept = await memory.add_memory(("alice", "global"), "I prefer metric units")
    await memory.add_memory(("alice", "conversation", cid), "This chat is about the Falcon launch")
    assert len((await memory.search_memories([("alice",)], "Falcon launch", mode="hybrid", limit=5)).hits) == 2
    await store.delete_conversation(cid)
    left = await memory.search_memories([("alice",)], "Falcon launch", mode="hybrid", limit=5)
    assert [h.id for h in left.hits] == [kept.id]
    assert [h.id for h in await memory.list_memories([("alice",)])] == [kept.id]


async def test_another_workers_write_reaches_the_cache(store: Any) -> None:
    one, two = MemoryStore(store), MemoryStore(store)  # two processes' caches over one database
    ns = ("alice", "global")
    await one.add_memory(ns, "The VPN certificate expires on 14 February")
    assert len((await one.search_memories([ns], "vpn", mode="semantic", limit=5)).hits) == 1
    added = await two.add_memory(ns, "My sister Clara lives in Lisbon")
    found = await one.search_memories([ns], "where does my sister live", mode="semantic", limit=1)
    assert found.hits[0].id == added.id
    assert one.cache.reads == {"full": 1, "incremental": 1, "file": 0}  # only the new row was read
    await two.forget("alice", added.id)
    assert [h.id for h in (await one.search_memories([ns], "sister", mode="semantic", limit=5)).hits] != [added.id]


async def test_base_store_operations(memory: MemoryStore) -> None:
    ns = ("alice", "project", "alpha")
    await memory.aput(ns, "pref", {"text": "Answer in British English", "kind": "style", "n": 3})
    await memory.aput(("alice", "global"), "other", {"text": "Runs on Saturdays", "kind": "habit"})
    item = await memory.aget(ns, "pref")
    assert item is not None and item.value["kind"] == "style" and item.namespace == ns
    await memory.aput(ns, "pref", {"text": "Answer in American English", "kind": "style", "n": 4})
    assert (await memory.aget(ns, "pref")).value["n"] == 4  # type: ignore[union-attr]
    listed = await memory.asearch(("alice",))
    assert {i.key for i in listed} == {"pref", "other"}
    assert [i.key for i in await memory.asearch(("alice",), filter={"n": {"$gte": 4}})] == ["pref"]
    ranked = await memory.asearch(("alice",), query="which spelling should answers use", limit=1)
    assert ranked[0].key == "pref" and ranked[0].score is not None
    assert await memory.alist_namespaces(prefix=("alice",)) == [("alice", "global"), ("alice", "project", "alpha")]
    assert await memory.alist_namespaces(max_depth=2) == [("alice", "global"), ("alice", "project")]
    await memory.adelete(ns, "pref")
    assert await memory.aget(ns, "pref") is None
    # the synchronous API from another thread, on the store's loop
    memory.loop = asyncio.get_running_loop()
    got = await asyncio.to_thread(memory.get, ("alice", "global"), "other")
    assert got is not None and got.value["kind"] == "habit"


async def test_no_embedder_runs_lexical(store: Any, caplog: pytest.LogCaptureFixture) -> None:
    memory = MemoryStore(store, MemorySettings(embedder="none"))
    assert "memory.embedder is 'none'" in caplog.text
    ns = ("alice", "global")
    await memory.add_memory(ns, "Invoices for Acme go to billing@acme.example")
    await memory.add_memory(ns, "My dog is called Biscuit")
    found = await memory.search_memories([ns], "Acme invoices", mode="hybrid", limit=5)
    assert found.mode == "lexical" and [h.text for h in found.hits] == ["Invoices for Acme go to billing@acme.example"]
    assert (await memory.add_memory(ns, "My dog is called Biscuit")).deduped  # same text
    newest = await memory.search_memories([ns], "", mode="semantic", limit=5)
    assert newest.mode == "recency" and len(newest.hits) == 2


async def test_reindex_after_embedder_change(store: Any) -> None:
    plain = MemoryStore(store, MemorySettings(embedder="none"))
    saved = await plain.add_memory(("alice", "global"), "My sister Clara lives in Lisbon")
    static = MemoryStore(store)
    assert await static.reindex() == 1
    assert await static.reindex() == 0
    found = await static.search_memories([("alice",)], "where does my sibling live", mode="semantic", limit=1)
    assert found.hits[0].id == saved.id and found.hits[0].score > 0.3



"""Namespaces that cannot collide, on SQLite and PostgreSQL: hostile user ids, project names
and conversation ids (dots, slashes, `%`, LIKE wildcards, unicode, escape look-alikes) never
read or write another's memories, through the memory verbs and LangGraph's `BaseStore`
operations; empty ids are refused and store nothing; a version 5 database (labels joined by
".") is upgraded in place by schema step 6 and then reads the same memories by their real ids.

Hypothesis drives a synchronous function in a worker thread that runs each operation on the
store's own event loop (the store and its connections belong to that loop)."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from artifactflow.core.store import schema as t
from artifactflow.core.store.repository import AppStore
from artifactflow.errors import UserError
from artifactflow.memory import MemoryStore, scope_namespace
from artifactflow.memory.records import ns_key, ns_tuple
from artifactflow.settings.memory import MemorySettings

T = TypeVar("T")

NASTY = ["a", "a.b", "a%", "a%2E", "a%25", "a.", ".a", "%", "%%", "_", "a_", "*", "a/b", "a\\b",
         "é", "用户", "john.smith@example.com", "alice", "alice.project", "alice.global", "x\x01y",
         "a b", "global", "project", "conversation", "%00"]
LABEL = st.one_of(
    st.sampled_from(NASTY),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=12),
)
WHO = st.lists(st.tuples(LABEL, LABEL, LABEL), min_size=2, max_size=4, unique_by=lambda w: w)


@pytest.fixture
def memory(store: Any) -> MemoryStore:
    return MemoryStore(store, MemorySettings(embedder="none"))


def key_roundtrip(labels: tuple[str, ...]) -> bool:
    return ns_tuple(ns_key(labels)) == labels


@given(st.lists(LABEL, min_size=1, max_size=5).map(tuple), st.lists(LABEL, min_size=1, max_size=5).map(tuple))
def test_keys_are_one_to_one_and_prefixes_exact(a: tuple[str, ...], b: tuple[str, ...]) -> None:
    assert key_roundtrip(a) and key_roundtrip(b)
    assert (ns_key(a) == ns_key(b)) == (a == b)
    below = ns_key(b).startswith(ns_key(a) + ".")
    assert below == (len(b) > len(a) and b[: len(a)] == a)


async def test_hostile_ids_never_reach_another(memory: MemoryStore) -> None:
    loop = asyncio.get_running_loop()
    written: dict[tuple[str, ...], set[str]] = defaultdict(set)  # namespace → texts, all examples
    ids: dict[str, tuple[str, ...]] = {}

    def run(coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(timeout=300)

    def seen(prefix: tuple[str, ...]) -> set[str]:
        return {t for ns, texts in written.items() if ns[: len(prefix)] == prefix for t in texts}

    @settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(WHO)
    def check(who: list[tuple[str, str, str]]) -> None:
        for user, project, conversation in who:
            for scope in ("global", "project", "conversation"):
                ns = scope_namespace(user, scope, project=project, conversation_id=conversation)
                text = f"{scope} note {uuid.uuid4().hex}"
                saved = run(memory.add_memory(ns, text))
                assert saved.namespace == ns and not saved.deduped
                written[ns].add(text)
                ids[saved.id] = ns
            run(memory.aput((user, "items"), "k", {"text": f"item of {user}"}))
            written[(user, "items")] = {f"item of {user}"}
        for user, project, conversation in who:
            mine = run(memory.list_memories([(user,)], limit=10_000))
            assert {h.text for h in mine} == seen((user,))
            assert all(h.namespace[0] == user for h in mine)
            in_project = run(memory.list_memories([(user, "project", project)], limit=10_000))
            assert {h.text for h in in_project} == seen((user, "project", project))
            found = run(memory.search_memories([(user, "conversation", conversation)], "note", mode="hybrid", limit=1000))
            assert {h.text for h in found.hits} == seen((user, "conversation", conversation))
            item = run(memory.aget((user, "items"), "k"))
            assert item is not None and item.value == {"text": f"item of {user}"}
            spaces = run(memory.alist_namespaces(prefix=(user,), limit=10_000))
            assert spaces and all(ns[0] == user for ns in spaces)
            assert set(spaces) == {ns for ns in written if ns[0] == user}
            hits = run(memory.asearch((user,), query="note", limit=100))
            assert hits and all(h.namespace[0] == user for h in hits)
        for memory_id, ns in list(ids.items())[-12:]:
            for other, *_ in who:
                got = run(memory.get_memory(other, memory_id))
                assert (got is not None) == (other == ns[0])

    await asyncio.to_thread(check)


async def test_empty_ids_are_refused_and_store_nothing(memory: MemoryStore) -> None:
    for user, scope, project, conversation in [
        ("", "global", None, None), ("u", "project", "", None), ("u", "conversation", None, ""),
        ("u\x00", "global", None, None), ("u", "project", "p\x00", None),
    ]:
        with pytest.raises(UserError):
            ns = scope_namespace(user, scope, project=project, conversation_id=conversation)
            await memory.add_memory(ns, "must not be stored")
    assert await memory.list_memories([("u",), ("local",)]) == []


async def _open(backend: str, tmp_path: Path, url: str | None) -> AppStore:
    return await AppStore.open(url) if backend == "postgres" else await AppStore.open(None, sqlite_path=tmp_path / "app.db")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_version_5_namespaces_are_upgraded(backend: str, tmp_path: Path) -> None:
    """Rows written by schema 5 (labels joined by "." as they were) read back by their real
    labels after step 6; other users' rows stay theirs; the history column is added."""
    from pg import fresh_database

    async def scenario(url: str | None) -> None:
        store = await _open(backend, tmp_path, url)
        memory = MemoryStore(store, MemorySettings(embedder="none"))
        users = ["john.smith@example.com", "john", "a%", "a%25", "alice"]
        for user in users:
            await memory.add_memory((user, "global"), f"global of {user}")
            await memory.add_memory((user, "project", "p_1"), f"project of {user}")
        async with store.engine.begin() as conn:  # turn the rows back into version 5's form
            for table in (t.memories, t.memory_namespaces):
                keys = [k for (k,) in (await conn.execute(sa.select(table.c.namespace).distinct())).all()]
                for n, key in enumerate(keys):  # two passes: an old key may be another's new one
                    await conn.execute(table.update().where(table.c.namespace == key).values(namespace=f"tmp{n}"))
                for n, key in enumerate(keys):
                    old = ".".join(ns_tuple(key))
                    await conn.execute(table.update().where(table.c.namespace == f"tmp{n}").values(namespace=old))
            await conn.execute(t.memory_changes.delete())
            await conn.execute(sa.text("ALTER TABLE af_memories DROP COLUMN history"))
            await conn.execute(t.meta.update().where(t.meta.c.key == "schema").values(value="5"))
        await store.close()
        store = await _open(backend, tmp_path, url)
        try:
            assert await store.schema_version() == t.SCHEMA_VERSION
            memory = MemoryStore(store, MemorySettings(embedder="none"))
            for user in users:
                texts = sorted(h.text for h in await memory.list_memories([(user,)]))
                assert texts == [f"global of {user}", f"project of {user}"], user
                spaces = await memory.alist_namespaces(prefix=(user,))
                assert sorted(spaces) == [(user, "global"), (user, "project", "p_1")]
            saved = await memory.add_memory(("john.smith@example.com", "global"), "global of john.smith@example.com")
            assert saved.deduped  # the upgraded row is found again by its real namespace
            await memory.aput(("a%", "global"), "k", {"text": "v1"})
            await memory.aput(("a%", "global"), "k", {"text": "v2"})  # the history column is there
            assert await memory.history("a%", saved.id) is None  # john's, not a%'s
        finally:
            await store.close()

    if backend == "postgres":
        async with fresh_database() as url:
            await scenario(url)
    else:
        await scenario(None)

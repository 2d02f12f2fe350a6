"""The vector files (src/memory/vector_file.py) on both backends: a new process's first search
reads a namespace's vectors from its file, and the file is never trusted past what the
database says: rows added, replaced and deleted by another worker after it was written are
seen, a file of another database (recreated at the same place) is refused, and one user's
file never serves another's search."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from artifactflow.core.store.repository import AppStore
from artifactflow.memory import MemoryStore
from artifactflow.settings.memory import MemorySettings

SETTINGS = MemorySettings(embedder="static")
ALICE = ("alice", "global")
FACTS = [f"Server {name} runs {role} in rack {i}" for i, (name, role) in enumerate(
    [("atlas", "the billing database"), ("boreas", "the search index"), ("castor", "the mail relay"),
     ("deimos", "the build farm"), ("eris", "the VPN gateway"), ("fenrir", "the metrics store"),
     ("gaia", "the backup jobs"), ("helios", "the web front end"), ("io", "the message queue"),
     ("juno", "the DNS resolver"), ("kronos", "the cron scheduler"), ("luna", "the object storage")])]


def opened(store: Any, folder: Path) -> MemoryStore:
    """A new process's `MemoryStore`: an empty cache, files kept from 1 row on."""
    memory = MemoryStore(store, SETTINGS, vector_dir=folder)
    assert memory.cache.files is not None
    memory.cache.files.min_rows = 1
    return memory


async def texts(memory: MemoryStore, query: str, user: str = "alice") -> list[str]:
    found = await memory.search_memories([(user,)], query, mode="hybrid", limit=50)
    assert found.mode == "hybrid"
    return [hit.text for hit in found.hits]


async def test_a_restart_reads_the_file_and_sees_later_writes(store: Any, tmp_path: Path) -> None:
    folder = tmp_path / "vectors"
    first = opened(store, folder)
    ids = await first.add_many(ALICE, FACTS)
    assert "Server atlas runs the billing database in rack 0" in await texts(first, "billing database")
    first.cache.wait_for_files()
    assert first.cache.reads["full"] == 1 and len(list(folder.glob("*.npy"))) == 1

    restarted = opened(store, folder)
    assert await texts(restarted, "billing database") == await texts(first, "billing database")
    assert restarted.cache.reads == {"full": 0, "incremental": 0, "file": 1}

    worker = opened(store, folder)  # another worker writes after the file was written
    await worker.add_memory(ALICE, "Server zephyr runs the payroll service in rack 99")
    await worker.aput(ALICE, ids[1], {"text": "Server boreas was retired and holds nothing now"})  # key = id
    assert await worker.forget("alice", ids[2])

    again = opened(store, folder)
    found = await texts(again, "server rack")
    assert again.cache.reads["file"] == 1 and again.cache.reads["full"] == 0
    assert "Server zephyr runs the payroll service in rack 99" in found
    assert "Server boreas was retired and holds nothing now" in found
    assert "Server boreas runs the search index in rack 1" not in found
    assert "Server castor runs the mail relay in rack 2" not in found
    assert len(found) == len(FACTS)  # 12 + 1 added - 1 deleted, each once
    semantic = await again.search_memories([ALICE], "payroll", mode="semantic", limit=1)
    assert semantic.hits[0].text == "Server zephyr runs the payroll service in rack 99"

    # the same worker's cache, warm: its own writes are seen without a restart
    await again.forget("alice", ids[3])
    assert "Server deimos runs the build farm in rack 3" not in await texts(again, "server rack")


@asynccontextmanager
async def other_database(store: Any, tmp_path: Path) -> AsyncIterator[Any]:
    if store.engine.dialect.name == "sqlite":
        other = await AppStore.open(None, sqlite_path=tmp_path / "other.db")
        try:
            yield other
        finally:
            await other.close()
    else:
        from pg import fresh_database

        async with fresh_database() as url:
            other = await AppStore.open(url)
            try:
                yield other
            finally:
                await other.close()


async def test_a_file_of_another_database_is_refused(store: Any, tmp_path: Path) -> None:
    folder = tmp_path / "vectors"
    first = opened(store, folder)
    await first.add_many(ALICE, FACTS)
    await texts(first, "billing")
    first.cache.wait_for_files()
    async with other_database(store, tmp_path) as other:
        # the same namespace at the same version, other rows: as a database recreated at the
        # same path (or restored from a backup) would be
        second = opened(other, folder)
        assert second.cache.files is not None and first.cache.files is not None
        second.cache.files.database = first.cache.files.database
        await second.add_many(ALICE, [f"Printer {i} is on floor {i}" for i in range(len(FACTS))])
        found = await texts(second, "printer floor")
        assert second.cache.reads == {"full": 1, "incremental": 0, "file": 0}
        assert sorted(found) == sorted(f"Printer {i} is on floor {i}" for i in range(len(FACTS)))


async def test_files_never_cross_users(store: Any, tmp_path: Path) -> None:
    folder = tmp_path / "vectors"
    first = opened(store, folder)
    await first.add_many(ALICE, FACTS)
    await first.add_many(("bob", "global"), ["Bob's server runs the billing database too"])
    await texts(first, "billing")
    await texts(first, "billing", user="bob")
    first.cache.wait_for_files()
    assert len(list(folder.glob("*.npz"))) == 2
    restarted = opened(store, folder)
    assert await texts(restarted, "billing database", user="bob") == ["Bob's server runs the billing database too"]
    assert all(text.startswith("Server") for text in await texts(restarted, "billing database"))
    assert restarted.cache.reads["file"] == 2


async def test_a_deleted_conversations_file_goes_with_it(store: Any, tmp_path: Path) -> None:
    folder = tmp_path / "vectors"
    memory = opened(store, folder)
    conversation = (await store.create_conversation(user_id="alice"))["id"]
    await memory.add_many(("alice", "conversation", conversation), FACTS)
    assert len(await texts(memory, "server rack")) == len(FACTS)
    memory.cache.wait_for_files()
    assert len(list(folder.glob("*.npz"))) == 1
    await store.delete_conversation(conversation)
    assert await texts(memory, "server rack") == []
    assert list(folder.iterdir()) == []


async def test_changed_rows_die_in_the_cache_and_are_compacted_away(store: Any, tmp_path: Path) -> None:
    """A warm cache after another worker replaced and deleted most rows: the old copies are
    never found again, before and after the dead rows pass a quarter and are dropped."""
    reader = MemoryStore(store, SETTINGS, vector_dir=tmp_path / "vectors")
    worker = MemoryStore(store, SETTINGS, vector_dir=tmp_path / "vectors")
    ids = await reader.add_many(ALICE, [f"Ticket {i} is about the printer on floor {i}" for i in range(120)])
    assert len(await texts(reader, "printer floor")) == 50
    await worker.aput(ALICE, ids[0], {"text": "Ticket 0 was closed: the toner was empty"})
    found = [h.text for h in (await reader.search_memories([ALICE], "ticket toner", mode="hybrid", limit=200)).hits]
    assert len(found) == 120 and "Ticket 0 was closed: the toner was empty" in found and "Ticket 0 is about the printer on floor 0" not in found
    assert reader.cache.entries[next(iter(reader.cache.entries))].dead == 1
    for memory_id in ids[1:100]:
        assert await worker.forget("alice", memory_id)
    left = await reader.search_memories([ALICE], "printer floor", mode="hybrid", limit=200)
    assert sorted(h.text for h in left.hits) == sorted(
        ["Ticket 0 was closed: the toner was empty"] + [f"Ticket {i} is about the printer on floor {i}" for i in range(100, 120)])
    entry = next(iter(reader.cache.entries.values()))
    assert entry.dead == 0 and entry.alive == 21  # compacted

"""The Agent Protocol's tables (`ap_threads`, `ap_runs`) come from the app store's numbered
schema step, not from the protocol's first request: a fresh store has them, and a database of
the previous release, whose protocol made them on first use, keeps its rows through the
upgrade."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from artifactflow.core.store import schema as t
from artifactflow.core.store.repository import AppStore


async def _open(backend: str, tmp_path: Path, url: str | None) -> AppStore:
    if backend == "sqlite":
        return await AppStore.open(None, sqlite_path=tmp_path / "app.db")
    return await AppStore.open(url)


async def _tables(store: AppStore) -> set[str]:
    async with store.engine.connect() as conn:
        return set(await conn.run_sync(lambda c: sa.inspect(c).get_table_names()))


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_protocol_tables_come_from_the_schema_step(backend: str, tmp_path: Path) -> None:
    from pg import fresh_database

    async def scenario(url: str | None) -> None:
        store = await _open(backend, tmp_path, url)
        try:
            assert {"ap_threads", "ap_runs"} <= await _tables(store)  # before any protocol use
            now = time.time()
            async with store.engine.begin() as conn:  # a previous release's database: version 5
                await conn.execute(t.ap_threads.insert().values(
                    thread_id="t1", user_id="u", metadata='{"k": 1}', created_at=now, updated_at=now
                ))
                for table in ("af_store_ttl", "af_webhook_deliveries", "af_crons", "af_run_configs",
                              "af_assistant_versions", "af_assistants"):
                    await conn.execute(sa.text(f"DROP TABLE {table}"))
                await conn.execute(t.meta.update().where(t.meta.c.key == "schema").values(value="5"))
        finally:
            await store.close()
        store = await _open(backend, tmp_path, url)
        try:
            assert await store.schema_version() == t.SCHEMA_VERSION
            assert {"ap_threads", "ap_runs", "af_crons", "af_assistants"} <= await _tables(store)
            rows = await store.fetch_rows(sa.select(t.ap_threads.c.thread_id, t.ap_threads.c.metadata))
            assert [(r["thread_id"], r["metadata"]) for r in rows] == [("t1", '{"k": 1}')]
        finally:
            await store.close()

    if backend == "sqlite":
        await scenario(None)
    else:
        async with fresh_database() as url:
            await scenario(url)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_version_7_threads_get_public_ids_and_keep_their_rows(backend: str, tmp_path: Path) -> None:
    """Issue 34: a version 7 database (no `ap_threads.public_id`) gains the column; its
    threads keep their rows, and their id is their key (public_id NULL)."""
    from pg import fresh_database

    async def scenario(url: str | None) -> None:
        store = await _open(backend, tmp_path, url)
        try:
            now = time.time()
            async with store.engine.begin() as conn:
                await conn.execute(sa.text("ALTER TABLE ap_threads DROP COLUMN public_id"))
                await conn.execute(sa.text(
                    "INSERT INTO ap_threads (thread_id, user_id, metadata, created_at, updated_at) "
                    f"VALUES ('t1', 'u', '{{\"k\": 1}}', {now}, {now})"
                ))
                await conn.execute(t.meta.update().where(t.meta.c.key == "schema").values(value="7"))
        finally:
            await store.close()
        store = await _open(backend, tmp_path, url)
        try:
            assert await store.schema_version() == t.SCHEMA_VERSION
            rows = await store.fetch_rows(sa.select(t.ap_threads))
            assert [(r["thread_id"], r["metadata"], r["public_id"]) for r in rows] == [("t1", '{"k": 1}', None)]
        finally:
            await store.close()

    if backend == "sqlite":
        await scenario(None)
    else:
        async with fresh_database() as url:
            await scenario(url)

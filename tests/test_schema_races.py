"""Any number of processes may start at once on a fresh data folder or database (D7).

Each test starts real processes (forked from the tests' CLI fork server, tests/cli_fork.py:
each a process of its own, without the start-up imports) that wait at a file barrier and are
released together. The
race being tested is "check whether the schema exists, then create it"; to make it certain
rather than 1-in-30, each child widens that window: SQLAlchemy's `has_table` answers and then
waits (the app store), and the PostgreSQL saver's no-op migration step becomes a sleep.
Without a lock the processes all see an empty database and collide; with it they queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import textwrap
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import sqlalchemy as sa
from cli_fork import fork_python
from conftest import make_config
from pg import fresh_database
from sqlalchemy.engine import Connection
from waiting import ceiling, wait_until_sync

from artifactflow.core.store import migrate, schema
from artifactflow.core.store.repository import AppStore
from artifactflow.errors import ConfigError

CHILD = textwrap.dedent(
    """
    import asyncio, sys, time
    from pathlib import Path

    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver

    WINDOW = 0.3
    waited = []
    for dialect in ("sqlite", "postgresql"):
        module = __import__(f"sqlalchemy.dialects.{dialect}.base", fromlist=["x"])
        cls = module.SQLiteDialect if dialect == "sqlite" else module.PGDialect
        original = cls.has_table

        def slow_has_table(self, *args, _original=original, **kwargs):
            found = _original(self, *args, **kwargs)
            if not waited:  # the check-then-create window, made wide (once per process)
                waited.append(True)
                time.sleep(WINDOW)
            return found

        cls.has_table = slow_has_table
    steps = list(AsyncPostgresSaver.MIGRATIONS)
    # Was "SELECT 1": the same window in the saver, longer than the app store's, so the
    # savers of processes the app store's lock set apart still overlap.
    steps[5] = f"SELECT pg_sleep({2 * WINDOW})"
    AsyncPostgresSaver.MIGRATIONS = steps

    from artifactflow import Client, load_settings

    folder, config, data, url, index = sys.argv[1:6]
    Path(folder, f"ready-{index}").touch()
    while not Path(folder, "go").exists():
        time.sleep(0.005)

    async def main():
        settings = load_settings(config, data, database_url=url or None)
        client = await Client.open(settings)
        await client.aclose()

    asyncio.run(main())
    print("opened")
    """
)


def start_together(tmp_path: Path, count: int, url: str = "") -> list[tuple[int, str]]:
    """Start `count` children, release them at once, return (exit code, output) of each."""
    config = make_config(tmp_path)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARTIFACTFLOW_")}
    env["OPENAI_API_KEY"] = "test-key"
    args = [str(barrier), str(config), str(tmp_path / "data"), url]
    with ThreadPoolExecutor(count) as pool:  # each thread waits for its child's end
        children = [
            pool.submit(fork_python, CHILD, [*args, str(i)], env, ceiling(600), str(Path(__file__).parent))
            for i in range(count)
        ]
        try:
            wait_until_sync(  # or a child died before the barrier: its output says why
                lambda: len(list(barrier.glob("ready-*"))) >= count or any(c.done() for c in children),
                timeout=ceiling(300),
                what="every child at the barrier",
            )
        finally:
            (barrier / "go").touch()  # never leave a child waiting (a hang kills it at 600 s)
        ended = [child.result() for child in children]
    return [(proc.returncode, proc.stdout + proc.stderr) for proc in ended]


def assert_all_opened(results: list[tuple[int, str]]) -> None:
    failures = [out[-1500:] for code, out in results if code != 0 or "opened" not in out]
    assert not failures, "\n---\n".join(failures)


def test_four_processes_open_a_fresh_data_folder_together(tmp_path: Path):
    """App store and checkpoint saver, both SQLite files in one data folder."""
    assert_all_opened(start_together(tmp_path, 4))
    assert (tmp_path / "data" / "artifactflow.db").exists()
    assert (tmp_path / "data" / "checkpoints.db").exists()


async def test_two_servers_start_on_a_fresh_postgres_database(tmp_path: Path):
    """App store and the PostgreSQL saver's own setup (its migrations table)."""
    async with fresh_database() as url:
        results = await asyncio.to_thread(start_together, tmp_path, 2, url)
    assert_all_opened(results)


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_upgrade_steps_run_once_under_the_lock(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A newer release's step upgrades an older database once, however many open it."""
    async with contextlib.AsyncExitStack() as stack:
        url = await stack.enter_async_context(fresh_database()) if backend == "postgres" else None
        path = tmp_path / "app.db"
        old = await AppStore.open(url, sqlite_path=path)
        await old.create_conversation("c1")
        await old.close()

        calls = []

        def add_pinned(conn: Connection) -> None:
            calls.append(1)
            conn.execute(sa.text("ALTER TABLE af_conversations ADD COLUMN pinned BOOLEAN"))

        current, newer = schema.SCHEMA_VERSION, schema.SCHEMA_VERSION + 1
        monkeypatch.setattr(schema, "SCHEMA_VERSION", newer)
        monkeypatch.setitem(migrate.STEPS, newer, add_pinned)
        stores = await asyncio.gather(*(AppStore.open(url, sqlite_path=path) for _ in range(3)))
        try:
            assert calls == [1]
            assert [await s.schema_version() for s in stores] == [newer] * 3
            async with stores[0].engine.connect() as conn:
                pinned = await conn.execute(sa.text("SELECT id, pinned FROM af_conversations"))
                assert pinned.all() == [("c1", None)]
        finally:
            for s in stores:
                await s.close()

        monkeypatch.setattr(schema, "SCHEMA_VERSION", current)
        with pytest.raises(ConfigError, match=f"schema is version {newer}, newer than this artifactflow"):
            await AppStore.open(url, sqlite_path=path)

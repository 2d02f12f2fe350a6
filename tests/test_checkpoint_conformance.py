"""LangGraph's checkpointer conformance suite on the savers this project opens.

`CheckpointStore.open_sqlite` (LangGraph's `AsyncSqliteSaver` with our `CompressingSerializer`,
a real file) and `CheckpointStore.open_postgres` (our lock-free `PooledPostgresSaver`, a fresh
database) must both pass every base capability (put, put_writes, get_tuple, list,
delete_thread) and every extended one they implement. Neither implements `copy_thread` or
`delete_for_runs`, and the SQLite saver has no `prune`: nothing here needs them (a finished
message's thread is deleted whole; branching reads the event log, not old checkpoints), so the
suite reports them "not implemented" and the test pins that list, so a saver that gains or
loses one is noticed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import CapabilityReport
from pg import fresh_database

from artifactflow.core.checkpoints import CheckpointStore, CompressingSerializer
from artifactflow.core.pg_saver import PooledPostgresSaver

BASE = {"put", "put_writes", "get_tuple", "list", "delete_thread"}


def _summary(report: CapabilityReport) -> dict[str, bool | None]:
    """Capability → passed (None when the saver does not implement it), with failures shown
    by pytest's assertion diff."""
    return {name: result.passed for name, result in sorted(report.results.items())}


def _failures(report: CapabilityReport) -> list[str]:
    return [f"{name}: {text}" for name, r in report.results.items() for text in r.failures]


async def test_sqlite_saver_conforms(tmp_path: Path) -> None:
    files = iter(range(100))

    @checkpointer_test(name="artifactflow sqlite")
    async def sqlite_saver() -> AsyncIterator[BaseCheckpointSaver]:
        store = await CheckpointStore.open_sqlite(tmp_path / f"checkpoints-{next(files)}.db")
        try:
            assert isinstance(store.saver.serde, CompressingSerializer)
            yield store.saver
        finally:
            await store.close()

    report = await validate(sqlite_saver)
    assert not _failures(report)
    assert report.passed_all_base() and report.passed_all()
    assert _summary(report) == {
        **dict.fromkeys(BASE, True),
        "copy_thread": None,
        "delete_for_runs": None,
        "prune": None,
    }


async def test_postgres_saver_conforms() -> None:
    async with fresh_database() as url:

        @checkpointer_test(name="artifactflow postgres")
        async def postgres_saver() -> AsyncIterator[BaseCheckpointSaver]:
            store = await CheckpointStore.open_postgres(url, pool_size=4)
            try:
                assert isinstance(store.saver, PooledPostgresSaver)
                assert isinstance(store.saver.serde, CompressingSerializer)
                yield store.saver
            finally:
                await store.close()

        report = await validate(postgres_saver)
    assert not _failures(report)
    assert report.passed_all_base() and report.passed_all()
    assert _summary(report) == {
        **dict.fromkeys(BASE, True),
        "copy_thread": None,
        "delete_for_runs": None,
        "prune": True,
    }

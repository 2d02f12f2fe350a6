"""A run's checkpoints are written only while it owns its message (`core/run/ownership.py`), on
both backends: SQLite checks on the checkpoint connection's thread (`aput_checked`),
PostgreSQL in the checkpoint's own statement (`PooledPostgresSaver.aput_owned`). A stale run's
checkpoint raises `LeaseLostError` and writes nothing, its blobs included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from artifactflow.core.checkpoints import CheckpointStore
from artifactflow.core.run.ownership import guard_saver, owned_by
from artifactflow.errors import LeaseLostError

CONFIG: Any = {"configurable": {"thread_id": "thread-1", "checkpoint_ns": ""}}


def _checkpoint(step: int) -> Any:
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"history": [step] * 3, "phase": f"step {step}"}
    checkpoint["channel_versions"] = {"history": step, "phase": step}
    return checkpoint


async def _open(store: Any, tmp_path: Path) -> CheckpointStore:
    if store.is_sqlite:
        return await CheckpointStore.open_sqlite(tmp_path / "checkpoints.db")
    url = store.engine.url.render_as_string(hide_password=False)
    return await CheckpointStore.open_postgres(url, pool_size=2)


async def test_only_the_owning_run_writes_checkpoints(store: Any, tmp_path: Path) -> None:
    conv = await store.create_conversation()
    message = await store.add_message(
        conversation_id=conv["id"], content="x", parent_id=None, status="running", run_token="ours"
    )
    checkpoints = await _open(store, tmp_path)
    try:
        saver = guard_saver(checkpoints.saver)
        first = _checkpoint(1)
        with owned_by(store, message["id"], "ours"):
            await saver.aput(CONFIG, first, {}, {"history": 1, "phase": 1})

        with owned_by(store, message["id"], "stale"), pytest.raises(LeaseLostError):
            await saver.aput(CONFIG, _checkpoint(2), {}, {"history": 2, "phase": 2})

        stored = await saver.aget_tuple(CONFIG)
        assert stored is not None and stored.checkpoint["id"] == first["id"]
        assert stored.checkpoint["channel_values"] == {"history": [1, 1, 1], "phase": "step 1"}
        versions = [c.checkpoint["channel_versions"]["history"] async for c in saver.alist(CONFIG)]
        assert versions == [1]
        if not store.is_sqlite:  # the stale checkpoint's blob was not written either
            async with checkpoints.saver._cursor() as cur:  # noqa: SLF001 - its pooled cursor
                await cur.execute("SELECT version FROM checkpoint_blobs WHERE channel = 'history'")
                assert [row["version"] for row in await cur.fetchall()] == ["1"]

        await saver.aput(CONFIG, _checkpoint(3), {}, {"history": 3, "phase": 3})  # outside a run
        assert (await saver.aget_tuple(CONFIG)).checkpoint["channel_values"]["phase"] == "step 3"  # type: ignore[union-attr]
    finally:
        await checkpoints.close()

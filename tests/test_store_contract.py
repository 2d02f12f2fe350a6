"""One contract suite for the app store, run against SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio

import pytest
import sqlalchemy as sa

from artifactflow.core.conversations import ConversationManager
from artifactflow.core.store.repository import AppStore, normalize_database_url
from artifactflow.core.store.schema import SCHEMA_VERSION
from artifactflow.errors import ArtifactConflictError, ConfigError


def test_database_urls_normalized():
    assert normalize_database_url("postgresql://u@h:5432/db") == "postgresql+asyncpg://u@h:5432/db"
    assert normalize_database_url("postgres://u@h/db") == "postgresql+asyncpg://u@h/db"
    assert normalize_database_url("sqlite:///x.db") == "sqlite+aiosqlite:///x.db"
    with pytest.raises(ConfigError, match="unsupported database URL"):
        normalize_database_url("mysql://x")


async def test_schema_versioned_and_migrate_idempotent(store: AppStore):
    assert await store.schema_version() == SCHEMA_VERSION
    await store.migrate()
    await asyncio.gather(store.migrate(), store.migrate())
    assert await store.schema_version() == SCHEMA_VERSION


async def test_conversations_paged_newest_first_and_per_user(store: AppStore):
    for i in range(5):
        await store.create_conversation(f"c{i}", user_id="u1" if i % 2 == 0 else "u2")
        await store.touch_conversation(f"c{i}")
        await asyncio.sleep(0.01)
    page = await store.list_conversations(limit=2, offset=0)
    assert [c["id"] for c in page] == ["c4", "c3"]
    page = await store.list_conversations(limit=2, offset=2)
    assert [c["id"] for c in page] == ["c2", "c1"]
    assert [c["id"] for c in await store.list_conversations(user_id="u1", limit=10)] == ["c4", "c2", "c0"]
    assert await store.count_conversations(user_id="u2") == 2


async def test_message_tree_branching(store: AppStore):
    manager = ConversationManager(store)
    conv = await manager.start_conversation()
    a = await manager.add_message(conv["id"], "A")
    await store.update_message(a["id"], response="ra", status="completed")
    b = await manager.add_message(conv["id"], "B")
    await store.update_message(b["id"], response="rb", status="completed")
    fork = await manager.add_message(conv["id"], "B2", parent_id=a["id"])
    assert fork["parent_id"] == a["id"]
    history = await manager.format_conversation_history(fork["parent_id"])
    assert history == [{"role": "user", "content": "A"}, {"role": "assistant", "content": "ra"}]
    assert [m["content"] for m in await manager.get_active_branch(conv["id"])] == ["A", "B2"]
    assert [m["content"] for m in await manager.path_to(b["id"])] == ["A", "B"]
    root = await manager.add_message(conv["id"], "fresh", parent_id=None)
    assert root["parent_id"] is None
    tree = await manager.tree(conv["id"])
    node_a = next(m for m in tree["messages"] if m["id"] == a["id"])
    assert set(node_a["children"]) == {b["id"], fork["id"]}
    assert set(tree["roots"]) == {a["id"], root["id"]}


async def test_claim_is_exclusive(store: AppStore):
    conv = await store.create_conversation()
    msg = await store.add_message(conversation_id=conv["id"], content="x", parent_id=None, status="waiting", run_token="t0")
    results = await asyncio.gather(
        *(store.claim_message(msg["id"], expected_status="waiting", expected_run_token="t0",
                              run_token=f"t{i}", lease_expires_at=0) for i in range(1, 6))
    )
    assert results.count(True) == 1
    stored = await store.get_message(msg["id"])
    assert stored["status"] == "running"
    assert await store.update_message(msg["id"], run_token="t0", status="failed") is False


async def test_renew_lease_reports_the_cancel_flag_and_only_for_the_owner(store: AppStore):
    conv = await store.create_conversation()
    msg = await store.add_message(conversation_id=conv["id"], content="x", parent_id=None,
                                  status="running", run_token="t1")
    assert await store.renew_lease(msg["id"], "t1", 100.0) is False
    assert (await store.get_message(msg["id"]))["lease_expires_at"] == 100.0
    assert (await store.request_cancel(msg["id"], now=1.0)).won
    assert await store.renew_lease(msg["id"], "t1", 200.0) is True
    assert (await store.get_message(msg["id"]))["lease_expires_at"] == 200.0
    assert await store.renew_lease(msg["id"], "other", 300.0) is None  # not its run: no write
    assert (await store.get_message(msg["id"]))["lease_expires_at"] == 200.0


async def test_events_append_replay_after(store: AppStore):
    conv = await store.create_conversation()
    msg = await store.add_message(conversation_id=conv["id"], content="x", parent_id=None)
    for i in range(1, 6):
        await store.append_event(msg["id"], {"event_id": i, "type": "tool_complete", "agent": "a",
                                             "timestamp": float(i), "data": {"n": i, "text": "é" * i}})
    assert [e["event_id"] for e in await store.events(msg["id"])] == [1, 2, 3, 4, 5]
    after = await store.events(msg["id"], after_event_id=3)
    assert [e["data"]["n"] for e in after] == [4, 5]
    assert await store.last_event_id(msg["id"]) == 5
    with pytest.raises(sa.exc.IntegrityError):
        await store.append_event(msg["id"], {"event_id": 5, "type": "x", "timestamp": 0.0, "data": {}})


async def test_artifacts_versions_and_optimistic_lock(store: AppStore):
    await store.create_artifact("c", "doc", title="Doc", content="v1", content_type="text/markdown")
    with pytest.raises(ArtifactConflictError):
        await store.create_artifact("c", "doc", title="Doc", content="again", content_type="text/markdown")
    assert await store.write_artifact_version("c", "doc", expected_version=1, content="v2", change="update") == 2
    with pytest.raises(ArtifactConflictError):
        await store.write_artifact_version("c", "doc", expected_version=1, content="stale", change="update")
    versions = await store.artifact_versions("c", "doc")
    assert [(v["version"], v["content"], v["change"]) for v in versions] == [(1, "v1", "create"), (2, "v2", "update")]
    assert (await store.get_artifact("c", "doc"))["content"] == "v2"
    assert (await store.get_artifact_version("c", "doc", 1))["content"] == "v1"


async def test_approvals_ledger_tokens(store: AppStore):
    await store.allow_always("c", ["t1", "t2"])
    await store.allow_always("c", ["t1"])
    assert await store.always_allowed("c") == {"t1", "t2"}
    assert await store.ledger_start("m", "k") is True
    assert await store.ledger_start("m", "k") is False
    await store.ledger_finish("m", "k", {"success": True, "data": 1})
    assert (await store.ledger_get("m", "k"))["result"] == {"success": True, "data": 1}
    await store.ledger_clear("m")
    assert await store.ledger_get("m", "k") is None
    user, token = await store.create_token("alice")
    assert await store.user_for_token(token) == user
    assert await store.user_for_token("nope") is None
    user2, _ = await store.create_token("alice")
    assert user2 == user


async def test_delete_conversation_removes_everything(store: AppStore):
    conv = await store.create_conversation()
    msg = await store.add_message(conversation_id=conv["id"], content="x", parent_id=None)
    await store.append_event(msg["id"], {"event_id": 1, "type": "metadata", "timestamp": 0.0, "data": {}})
    await store.create_artifact(conv["id"], "a", title="A", content="c", content_type="text/plain")
    threads = await store.delete_conversation(conv["id"])
    assert threads == [msg["thread_id"]]
    assert await store.get_conversation(conv["id"]) is None
    assert await store.get_message(msg["id"]) is None
    assert await store.events(msg["id"]) == []
    assert await store.list_artifacts(conv["id"]) == []

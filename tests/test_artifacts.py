"""Tests for the artifact tools and ArtifactService, on a real SQLite AppStore."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from artifactflow.artifacts import ArtifactService
from artifactflow.core.store.repository import AppStore
from artifactflow.errors import ArtifactConflictError, NotFoundError
from artifactflow.events import EventData
from artifactflow.tools.base import Permission, ToolResult
from artifactflow.tools.builtin.artifacts import (
    ARTIFACT_TOOLS,
    FUZZY_THRESHOLD,
    find_closest,
    similarity,
)
from artifactflow.tools.context import ToolContext
from artifactflow.tools.registry import ToolRegistry, run_tool_call

CONV = "c1"

DOC = (
    "# Report\n"
    "\n"
    "## Findings\n"
    "The quick brown fox jumps over the lazy dog.\n"
    "Prices rose by 4% in the second quarter.\n"
    "\n"
    "## Code\n"
    "def total(items):\n"
    "    return sum(items)\n"
    "\n"
    "## Next steps\n"
    "- [ ] collect more data\n"
    "- [ ] write the summary\n"
)


class Events:
    def __init__(self) -> None:
        self.items: list[tuple[str, dict[str, Any]]] = []

    def __call__(self, data: EventData) -> None:  # a tool's ctx.emit: a typed payload
        self.items.append((data.type.value, data.to_dict()))

    def of(self, type_: str) -> list[dict[str, Any]]:
        return [data for t, data in self.items if t == type_]


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[AppStore]:
    app_store = await AppStore.open(None, sqlite_path=tmp_path / "a.db")
    try:
        yield app_store
    finally:
        await app_store.close()


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry(ARTIFACT_TOOLS)


@pytest.fixture
def ctx(store: AppStore, events: Events) -> ToolContext:
    return ToolContext(
        conversation_id=CONV,
        message_id="m1",
        agent="lead_agent",
        tool_call_id="t1",
        services={"store": store},
        emit=events,
    )


async def call(registry: ToolRegistry, ctx: ToolContext, name: str, **args: Any) -> ToolResult:
    result, _ = await run_tool_call(registry, name, json.dumps(args), ctx, default_timeout=5)
    return result


async def make_doc(registry: ToolRegistry, ctx: ToolContext, content: str = DOC) -> ToolResult:
    result = await call(registry, ctx, "create_artifact", id="report", title="Report", content=content)
    assert result.success, result.error
    return result


# --- schema and registration -----------------------------------------------------------------

def test_tools_are_auto_and_hide_the_context(registry: ToolRegistry) -> None:
    assert registry.names() == sorted(
        ["create_artifact", "update_artifact", "rewrite_artifact", "read_artifact", "list_artifacts"]
    )
    for tool in ARTIFACT_TOOLS:
        assert tool.permission is Permission.AUTO
        schema = tool.json_schema()
        assert "ctx" not in schema.get("properties", {})
        assert tool.description
    update = registry.get("update_artifact")
    assert update is not None
    props = update.json_schema()["properties"]
    assert set(props) == {"id", "old_str", "new_str"}
    assert all(props[name].get("description") for name in props)
    create = registry.get("create_artifact")
    assert create is not None
    assert create.json_schema()["properties"]["content_type"]["default"] == "text/markdown"


# --- create --------------------------------------------------------------------------------

async def test_create_artifact(registry: ToolRegistry, ctx: ToolContext, store: AppStore, events: Events) -> None:
    result = await make_doc(registry, ctx)
    assert result.data["artifact_id"] == "report"
    assert result.data["version"] == 1
    row = await store.get_artifact(CONV, "report")
    assert row is not None
    assert row["content"] == DOC
    assert row["content_type"] == "text/markdown"
    versions = await store.artifact_versions(CONV, "report")
    assert [(v["version"], v["change"], v["agent"], v["message_id"]) for v in versions] == [
        (1, "create", "lead_agent", "m1")
    ]
    assert events.of("artifact_created") == [
        {"artifact_id": "report", "title": "Report", "version": 1, "content_type": "text/markdown"}
    ]


async def test_create_duplicate_is_a_clear_error(registry: ToolRegistry, ctx: ToolContext, store: AppStore, events: Events) -> None:
    await make_doc(registry, ctx)
    result = await call(registry, ctx, "create_artifact", id="report", title="Other", content="x")
    assert not result.success
    assert "already exists" in result.error
    assert "update_artifact" in result.error and "rewrite_artifact" in result.error
    row = await store.get_artifact(CONV, "report")
    assert row is not None and row["content"] == DOC and row["version"] == 1
    assert len(events.of("artifact_created")) == 1


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        ({"id": "bad id", "title": "T", "content": "x"}, "invalid id"),
        ({"id": "a/b", "title": "T", "content": "x"}, "invalid id"),
        ({"id": "x" * 129, "title": "T", "content": "x"}, "limit is 128"),
        ({"id": "", "title": "T", "content": "x"}, "must not be empty"),
        ({"id": "ok", "title": "   ", "content": "x"}, "title must not be empty"),
        ({"id": "ok", "title": "T", "content": "x", "content_type": "not a type"}, "content_type"),
    ],
)
async def test_create_validation(registry: ToolRegistry, ctx: ToolContext, store: AppStore, args: dict[str, Any], fragment: str) -> None:
    result = await call(registry, ctx, "create_artifact", **args)
    assert not result.success
    assert fragment in result.error
    assert await store.list_artifacts(CONV) == []


async def test_create_accepts_valid_ids_and_content_types(registry: ToolRegistry, ctx: ToolContext, store: AppStore) -> None:
    result = await call(
        registry, ctx, "create_artifact",
        id="data-v2.final_x" + "y" * 112, title="Data", content="{}", content_type="application/json",
    )
    assert result.success, result.error
    result = await call(registry, ctx, "create_artifact", id="plain", title="P", content="hi", content_type="text")
    assert result.success, result.error
    row = await store.get_artifact(CONV, "plain")
    assert row is not None and row["content_type"] == "text/plain"


# --- update --------------------------------------------------------------------------------

async def test_update_exact(registry: ToolRegistry, ctx: ToolContext, store: AppStore, events: Events) -> None:
    await make_doc(registry, ctx)
    result = await call(
        registry, ctx, "update_artifact",
        id="report", old_str="- [ ] collect more data", new_str="- [x] collect more data",
    )
    assert result.success, result.error
    assert result.data["version"] == 2
    assert result.data["match"] == "exact"
    row = await store.get_artifact(CONV, "report")
    assert row is not None
    assert row["version"] == 2
    assert row["content"] == DOC.replace("- [ ] collect", "- [x] collect")
    versions = await store.artifact_versions(CONV, "report")
    assert [(v["version"], v["change"]) for v in versions] == [(1, "create"), (2, "update")]
    assert events.of("artifact_updated") == [
        {
            "artifact_id": "report",
            "title": "Report",
            "version": 2,
            "previous_version": 1,
            "change": "update",
            "content_type": "text/markdown",
        }
    ]


async def test_update_can_delete_text(registry: ToolRegistry, ctx: ToolContext, store: AppStore) -> None:
    await make_doc(registry, ctx)
    result = await call(
        registry, ctx, "update_artifact", id="report", old_str="- [ ] write the summary\n", new_str=""
    )
    assert result.success, result.error
    row = await store.get_artifact(CONV, "report")
    assert row is not None and "write the summary" not in row["content"]


async def test_update_ambiguous_reports_count(registry: ToolRegistry, ctx: ToolContext, store: AppStore, events: Events) -> None:
    await make_doc(registry, ctx)
    result = await call(registry, ctx, "update_artifact", id="report", old_str="- [ ] ", new_str="- [x] ")
    assert not result.success
    assert "2 times" in result.error
    assert "context" in result.error
    assert result.metadata["occurrences"] == 2
    row = await store.get_artifact(CONV, "report")
    assert row is not None and row["version"] == 1 and row["content"] == DOC
    assert events.of("artifact_updated") == []


async def test_update_fuzzy_typo(registry: ToolRegistry, ctx: ToolContext, store: AppStore, events: Events) -> None:
    await make_doc(registry, ctx)
    result = await call(
        registry, ctx, "update_artifact",
        id="report",
        old_str="The quick brwon fox jumps over the lazy dog.",
        new_str="The slow red fox walks past the lazy dog.",
    )
    assert result.success, result.error
    assert result.data["match"] == "fuzzy"
    assert result.metadata["match"] == "fuzzy"
    assert FUZZY_THRESHOLD <= result.data["similarity"] < 1.0
    assert result.data["replaced"] == "The quick brown fox jumps over the lazy dog."
    row = await store.get_artifact(CONV, "report")
    assert row is not None
    assert row["content"] == DOC.replace(
        "The quick brown fox jumps over the lazy dog.", "The slow red fox walks past the lazy dog."
    )
    assert events.of("artifact_updated")[-1]["version"] == 2


async def test_update_fuzzy_whitespace(registry: ToolRegistry, ctx: ToolContext, store: AppStore) -> None:
    await make_doc(registry, ctx)
    result = await call(
        registry, ctx, "update_artifact",
        id="report",
        old_str="def total(items):\n  return sum(items)\n",  # 2-space indent; the artifact has 4
        new_str="def total(items):\n    return sum(items) if items else 0\n",
    )
    assert result.success, result.error
    assert result.data["match"] == "fuzzy"
    assert result.data["similarity"] >= FUZZY_THRESHOLD
    assert result.data["replaced"] == "def total(items):\n    return sum(items)\n"
    row = await store.get_artifact(CONV, "report")
    assert row is not None
    assert "    return sum(items) if items else 0\n\n## Next steps" in row["content"]
    assert "return sum(items)\n" not in row["content"]


async def test_update_fuzzy_substituted_first_character(registry: ToolRegistry, ctx: ToolContext, store: AppStore) -> None:
    await make_doc(registry, ctx)
    result = await call(
        registry, ctx, "update_artifact",
        id="report", old_str="Xrices rose by 4% in the second quarter.", new_str="Prices fell.",
    )
    assert result.success, result.error
    assert result.data["replaced"] == "Prices rose by 4% in the second quarter."
    row = await store.get_artifact(CONV, "report")
    assert row is not None and "\nPrices fell.\n" in row["content"]


async def test_update_not_found_shows_closest_text(registry: ToolRegistry, ctx: ToolContext, store: AppStore, events: Events) -> None:
    await make_doc(registry, ctx)
    result = await call(
        registry, ctx, "update_artifact",
        id="report", old_str="Prices fell sharply by 9% in the third quarter.", new_str="x",
    )
    assert not result.success
    assert "not found" in result.error
    assert "Prices rose by 4% in the second quarter." in result.error
    assert "similarity" in result.error
    assert result.metadata["similarity"] < FUZZY_THRESHOLD
    assert "Prices rose" in result.metadata["closest"]
    row = await store.get_artifact(CONV, "report")
    assert row is not None and row["version"] == 1
    assert events.of("artifact_updated") == []


async def test_update_fuzzy_ambiguous_is_refused(registry: ToolRegistry, ctx: ToolContext, store: AppStore) -> None:
    content = "alpha: the value is ready\nbeta\nalpha: the value is ready\n"
    await make_doc(registry, ctx, content)
    result = await call(
        registry, ctx, "update_artifact", id="report", old_str="alpha: the valeu is ready", new_str="x"
    )
    assert not result.success
    assert "2 places" in result.error
    row = await store.get_artifact(CONV, "report")
    assert row is not None and row["content"] == content


async def test_update_errors(registry: ToolRegistry, ctx: ToolContext) -> None:
    await make_doc(registry, ctx)
    missing = await call(registry, ctx, "update_artifact", id="nope", old_str="a", new_str="b")
    assert not missing.success
    assert "nope" in missing.error and "'report'" in missing.error
    empty = await call(registry, ctx, "update_artifact", id="report", old_str="", new_str="b")
    assert not empty.success and "must not be empty" in empty.error
    same = await call(registry, ctx, "update_artifact", id="report", old_str="Report", new_str="Report")
    assert not same.success and "identical" in same.error
    short = await call(registry, ctx, "update_artifact", id="report", old_str="zq", new_str="b")
    assert not short.success and "not found" in short.error


# --- rewrite, read, list -------------------------------------------------------------------

async def test_rewrite_and_read_versions(registry: ToolRegistry, ctx: ToolContext, store: AppStore, events: Events) -> None:
    await make_doc(registry, ctx)
    result = await call(registry, ctx, "rewrite_artifact", id="report", content="# New\n\nAll new.\n", title="New report")
    assert result.success, result.error
    assert result.data["version"] == 2 and result.data["change"] == "rewrite"
    assert events.of("artifact_updated")[-1] == {
        "artifact_id": "report",
        "title": "New report",
        "version": 2,
        "previous_version": 1,
        "change": "rewrite",
        "content_type": "text/markdown",
    }

    current = await call(registry, ctx, "read_artifact", id="report")
    assert current.success
    assert current.data.endswith("\n# New\n\nAll new.\n")
    assert current.metadata["version"] == 2
    assert current.metadata["current_version"] == 2
    assert current.metadata["title"] == "New report"
    assert current.metadata["content_type"] == "text/markdown"

    old = await call(registry, ctx, "read_artifact", id="report", version=1)
    assert old.success
    assert old.data.split("\n", 1)[1] == DOC
    assert old.metadata["version"] == 1 and old.metadata["current_version"] == 2
    assert old.metadata["title"] == "Report"
    assert "current is v2" in old.data.split("\n", 1)[0]

    # title kept when omitted
    again = await call(registry, ctx, "rewrite_artifact", id="report", content="v3\n")
    assert again.success and again.data["version"] == 3
    row = await store.get_artifact(CONV, "report")
    assert row is not None and row["title"] == "New report"


async def test_rewrite_unchanged_writes_nothing(registry: ToolRegistry, ctx: ToolContext, store: AppStore, events: Events) -> None:
    await make_doc(registry, ctx)
    result = await call(registry, ctx, "rewrite_artifact", id="report", content=DOC)
    assert result.success
    assert result.data["version"] == 1
    assert len(await store.artifact_versions(CONV, "report")) == 1
    assert events.of("artifact_updated") == []


async def test_read_errors_list_what_exists(registry: ToolRegistry, ctx: ToolContext) -> None:
    empty = await call(registry, ctx, "read_artifact", id="report")
    assert not empty.success and "no artifacts" in empty.error
    await make_doc(registry, ctx)
    missing = await call(registry, ctx, "read_artifact", id="other")
    assert not missing.success and "'report'" in missing.error
    bad_version = await call(registry, ctx, "read_artifact", id="report", version=7)
    assert not bad_version.success
    assert "no version 7" in bad_version.error and "1 to 1" in bad_version.error


async def test_list_artifacts(registry: ToolRegistry, ctx: ToolContext) -> None:
    empty = await call(registry, ctx, "list_artifacts")
    assert empty.success and empty.data == []
    await make_doc(registry, ctx)
    await call(registry, ctx, "create_artifact", id="data", title="Data", content='{"a": 1}', content_type="application/json")
    await call(registry, ctx, "rewrite_artifact", id="data", content='{"a": 2}')
    result = await call(registry, ctx, "list_artifacts")
    assert result.success
    assert result.data == [
        {"id": "report", "title": "Report", "version": 1, "content_type": "text/markdown", "size": len(DOC)},
        {"id": "data", "title": "Data", "version": 2, "content_type": "application/json", "size": 8},
    ]


async def test_conversations_are_isolated(registry: ToolRegistry, ctx: ToolContext, store: AppStore) -> None:
    await make_doc(registry, ctx)
    other = ToolContext(
        conversation_id="c2", message_id="m9", agent="lead_agent", tool_call_id="t9",
        services={"store": store},
    )
    result = await call(registry, other, "read_artifact", id="report")
    assert not result.success
    created = await call(registry, other, "create_artifact", id="report", title="Mine", content="x")
    assert created.success, created.error  # no emit set: must still work


# --- optimistic locking --------------------------------------------------------------------

async def test_store_conflict_only_one_writer_wins(store: AppStore) -> None:
    await store.create_artifact(CONV, "doc", title="Doc", content="v1", content_type="text/plain")
    seen = await store.get_artifact(CONV, "doc")
    assert seen is not None
    version = seen["version"]
    assert await store.write_artifact_version(
        CONV, "doc", expected_version=version, content="writer A", change="update"
    ) == 2
    with pytest.raises(ArtifactConflictError):
        await store.write_artifact_version(
            CONV, "doc", expected_version=version, content="writer B", change="update"
        )
    versions = await store.artifact_versions(CONV, "doc")
    assert [v["version"] for v in versions] == [1, 2]
    row = await store.get_artifact(CONV, "doc")
    assert row is not None and row["content"] == "writer A" and row["version"] == 2


async def test_tool_reports_conflict_when_artifact_changes_mid_update(
    registry: ToolRegistry, ctx: ToolContext, store: AppStore, events: Events, monkeypatch: pytest.MonkeyPatch
) -> None:
    await make_doc(registry, ctx)
    real_get = store.get_artifact
    interfered = False

    async def get_then_interfere(conversation_id: str, artifact_id: str) -> dict[str, Any] | None:
        nonlocal interfered
        row = await real_get(conversation_id, artifact_id)
        if not interfered and row is not None:
            interfered = True  # another writer lands between the tool's read and its write
            await store.write_artifact_version(
                conversation_id, artifact_id, expected_version=row["version"],
                content=row["content"] + "appended by someone else\n", change="update",
                agent="other_agent",
            )
        return row

    monkeypatch.setattr(store, "get_artifact", get_then_interfere)
    result = await call(
        registry, ctx, "update_artifact",
        id="report", old_str="- [ ] write the summary", new_str="- [x] write the summary",
    )
    assert not result.success
    assert "changed by another writer" in result.error
    assert "read it again" in result.error.lower() or "Read it again" in result.error
    assert result.metadata["conflict"] is True
    versions = await store.artifact_versions(CONV, "report")
    assert [(v["version"], v["agent"]) for v in versions] == [(1, "lead_agent"), (2, "other_agent")]
    row = await real_get(CONV, "report")
    assert row is not None
    assert row["content"].endswith("appended by someone else\n")
    assert "- [ ] write the summary" in row["content"]
    assert events.of("artifact_updated") == []


async def test_rewrite_conflict_is_reported(
    registry: ToolRegistry, ctx: ToolContext, store: AppStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    await make_doc(registry, ctx)
    real_get = store.get_artifact

    async def stale(conversation_id: str, artifact_id: str) -> dict[str, Any] | None:
        row = await real_get(conversation_id, artifact_id)
        await store.write_artifact_version(
            conversation_id, artifact_id, expected_version=row["version"], content="bumped", change="rewrite"
        )
        return row

    monkeypatch.setattr(store, "get_artifact", stale)
    result = await call(registry, ctx, "rewrite_artifact", id="report", content="mine")
    assert not result.success and "changed by another writer" in result.error
    assert [v["content"] for v in await store.artifact_versions(CONV, "report")] == [DOC, "bumped"]


async def test_concurrent_updates_never_lose_an_edit(registry: ToolRegistry, ctx: ToolContext, store: AppStore, events: Events) -> None:
    await make_doc(registry, ctx)
    edits = [
        ("- [ ] collect more data", "- [x] collect more data"),
        ("- [ ] write the summary", "- [x] write the summary"),
    ]
    for _ in range(5):
        results = await asyncio.gather(
            *(call(registry, ctx, "update_artifact", id="report", old_str=old, new_str=new) for old, new in edits)
        )
        row = await store.get_artifact(CONV, "report")
        assert row is not None
        winners = [edit for edit, res in zip(edits, results, strict=True) if res.success]
        losers = [res for res in results if not res.success]
        assert winners, [r.error for r in results]
        for res in losers:
            assert "changed by another writer" in res.error
        for _old, new in winners:
            assert new in row["content"]  # every reported success is in the final text
        for (old, _new), res in zip(edits, results, strict=True):
            if not res.success:
                assert old in row["content"]  # a loser changed nothing
        versions = await store.artifact_versions(CONV, "report")
        assert [v["version"] for v in versions] == list(range(1, row["version"] + 1))
        assert sorted(r.data["version"] for r in results if r.success) == list(
            range(row["version"] - len(winners) + 1, row["version"] + 1)
        )
        # reset for the next round
        reset = await call(registry, ctx, "rewrite_artifact", id="report", content=DOC)
        assert reset.success, reset.error
    # every successful write produced exactly one event with its own version
    updated = [e["version"] for e in events.of("artifact_updated")]
    assert len(set(updated)) == len(updated)


# --- fuzzy matcher -------------------------------------------------------------------------

def test_similarity_basics() -> None:
    assert similarity("", "") == 1.0
    assert similarity("abc", "abc") == 1.0
    assert similarity("abc", "xyz") == 0.0
    assert 0.9 < similarity("hello world", "hello wrold") < 1.0


def test_find_closest_is_fast_on_large_documents() -> None:
    rng = random.Random(7)
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()
    lines = [f"{i}: " + " ".join(rng.choice(words) for _ in range(8)) for i in range(2000)]
    content = "\n".join(lines) + "\n"
    assert len(content) > 90_000
    block = "\n".join(lines[1500:1512]) + "\n"
    target = block.replace("alpha", "alpah", 2).replace("\n", " \n", 3)
    started = time.perf_counter()
    matches = find_closest(content, target)
    elapsed = time.perf_counter() - started
    assert matches and matches[0].text == block
    assert matches[0].line == 1501
    assert matches[0].similarity >= FUZZY_THRESHOLD
    nothing = find_closest(content, "completely unrelated words about something else")
    assert nothing and nothing[0].similarity < FUZZY_THRESHOLD
    assert time.perf_counter() - started < 2.0, elapsed


def test_find_closest_long_single_paragraph() -> None:
    rng = random.Random(3)
    words = "one two three four five six seven eight nine ten".split()
    paragraphs = [" ".join(rng.choice(words) for _ in range(400)) for _ in range(10)]
    content = "\n\n".join(paragraphs)
    target = paragraphs[6].replace("three", "thre", 2)
    best = find_closest(content, target)[0]
    assert best.text == paragraphs[6]
    assert best.similarity > 0.99


# --- ArtifactService -----------------------------------------------------------------------

async def test_service_get_list_versions(registry: ToolRegistry, ctx: ToolContext, store: AppStore) -> None:
    service = ArtifactService(store)
    await make_doc(registry, ctx)
    await call(registry, ctx, "update_artifact", id="report", old_str="4%", new_str="5%")
    listed = await service.list(CONV)
    assert [(a["artifact_id"], a["version"], a["size"]) for a in listed] == [("report", 2, len(DOC))]
    assert "content" not in listed[0]
    current = await service.get(CONV, "report")
    assert current["version"] == 2 and "5%" in current["content"]
    first = await service.get(CONV, "report", 1)
    assert first["version"] == 1 and first["current_version"] == 2 and first["content"] == DOC
    assert first["change"] == "create"
    history = await service.versions(CONV, "report")
    assert [(v["version"], v["change"], v["agent"]) for v in history] == [
        (1, "create", "lead_agent"),
        (2, "update", "lead_agent"),
    ]
    with pytest.raises(NotFoundError, match="no artifact 'missing'.*report"):
        await service.get(CONV, "missing")
    with pytest.raises(NotFoundError, match="no version 9"):
        await service.get(CONV, "report", 9)
    with pytest.raises(NotFoundError):
        await service.versions(CONV, "missing")
    assert await service.list("other") == []


async def test_service_diff(registry: ToolRegistry, ctx: ToolContext, store: AppStore) -> None:
    service = ArtifactService(store)
    await make_doc(registry, ctx)
    await call(registry, ctx, "update_artifact", id="report", old_str="4%", new_str="5%")
    diff = await service.diff(CONV, "report", 1)
    assert diff.startswith("--- report@v1\n+++ report@v2\n")
    assert "-Prices rose by 4% in the second quarter.\n" in diff
    assert "+Prices rose by 5% in the second quarter.\n" in diff
    assert await service.diff(CONV, "report", 2, 2) == ""
    back = await service.diff(CONV, "report", 2, 1)
    assert back.startswith("--- report@v2\n+++ report@v1\n")
    with pytest.raises(NotFoundError):
        await service.diff(CONV, "report", 5)

    # a missing final newline is marked, as diff -u does
    await call(registry, ctx, "create_artifact", id="n", title="N", content="a\nb", content_type="text/plain")
    await call(registry, ctx, "rewrite_artifact", id="n", content="a\nb\n")
    marked = await service.diff(CONV, "n", 1, 2)
    assert "-b\n\\ No newline at end of file\n+b\n" in marked


async def test_service_export_markdown(registry: ToolRegistry, ctx: ToolContext, store: AppStore, tmp_path: Path) -> None:
    service = ArtifactService(store)
    await make_doc(registry, ctx)
    text = await service.export_markdown(CONV, "report")
    head, meta, body = text.split("\n\n", 2)
    assert head == "# Report"
    assert "`report`" in meta and "version 1 of 1" in meta and "text/markdown" in meta
    assert body == DOC

    code = 'print("hi")\n```\nnested fence\n'
    await call(registry, ctx, "create_artifact", id="script", title="Script", content=code, content_type="text/x-python")
    exported = await service.export_markdown(CONV, "script")
    assert exported.startswith("# Script\n\n")
    assert "````python\n" + code + "````\n" in exported

    await call(registry, ctx, "create_artifact", id="data", title="Data", content='{"a": 1}', content_type="application/json")
    assert '```json\n{"a": 1}\n```\n' in await service.export_markdown(CONV, "data")

    await call(registry, ctx, "rewrite_artifact", id="report", content="# v2\n", title="Report v2")
    old = await service.export_markdown(CONV, "report", version=1)
    assert old.startswith("# Report\n\n") and "version 1 of 2" in old

    path = await service.export_to(tmp_path / "out" / "report.md", CONV, "report")
    assert path.read_text(encoding="utf-8") == await service.export_markdown(CONV, "report")
    assert path.read_text(encoding="utf-8").startswith("# Report v2\n")
    with pytest.raises(NotFoundError):
        await service.export_to(tmp_path / "x.md", CONV, "missing")
    assert not (tmp_path / "x.md").exists()

"""Projects (issue 24 step 5): `run --project`, `"project"` in `POST /api/v1/chat`,
`ARTIFACTFLOW_PROJECT`; a conversation remembers its project, listings show it, and a bad
name is refused before anything is stored (exit 2 / 422)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa
from cli_helpers import CLI, make_cli
from scripted_llm import ScriptedLLM, Text

from artifactflow import Task, load_settings
from artifactflow.api.app import create_app
from artifactflow.core.store import schema as t
from artifactflow.core.store.repository import AppStore
from artifactflow.errors import ConfigError, UserError


async def test_a_conversation_remembers_its_project(make_client: Any, llm: ScriptedLLM) -> None:
    af = await make_client()
    llm.script(Text("one"), Text("two"), Text("three"))
    first = await af.run(Task("hello", project="alpha"))
    assert (await af.conversations.get(first.conversation_id))["project"] == "alpha"
    # continuing it without a project keeps the project; naming another is refused
    await af.run(Task("again", first.conversation_id))
    with pytest.raises(UserError, match="belongs to project alpha, not beta"):
        await af.runs.start(Task("x", first.conversation_id, project="beta"))
    plain = await af.run(Task("no project"))
    rows = {r["id"]: r for r in await af.conversations.list()}
    assert rows[first.conversation_id]["project"] == "alpha"
    assert rows[plain.conversation_id]["project"] is None
    count = await af.conversations.count()
    with pytest.raises(UserError, match="invalid project name 'a b'"):
        await af.runs.start(Task("x", project="a b"))
    assert await af.conversations.count() == count  # nothing stored


async def test_the_project_setting_is_the_default(
    make_client: Any, llm: ScriptedLLM, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ARTIFACTFLOW_PROJECT", "from-env")
    af = await make_client()
    llm.script(Text("ok"))
    result = await af.run("hello")
    assert (await af.conversations.get(result.conversation_id))["project"] == "from-env"
    monkeypatch.setenv("ARTIFACTFLOW_PROJECT", "../etc")
    with pytest.raises(ConfigError, match="invalid project name"):
        load_settings(af.settings.config_dir, tmp_path / "data2")


async def test_http_chat_takes_a_project_and_lists_it(make_client: Any, llm: ScriptedLLM) -> None:
    af = await make_client()
    llm.script(Text("ok"))
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(client=af)), base_url="http://testserver"
    ) as http:
        bad = await http.post("/api/v1/chat", json={"content": "hi", "project": "no/slash"})
        assert bad.status_code == 422, bad.text
        response = await http.post("/api/v1/chat", json={"content": "hi", "project": "web-1"})
        assert response.status_code == 202, response.text
        await af.admin.wait(response.json()["message_id"])
        page = (await http.get("/api/v1/conversations")).json()
        assert [item["project"] for item in page["items"]] == ["web-1"]
        other = (await http.get("/api/v1/conversations", params={"project": "other"})).json()
        assert other["items"] == [] and other["total"] == 0
        assert (await http.get("/api/v1/conversations", params={"project": "a b"})).status_code == 422
        tree = (await http.get(f"/api/v1/conversations/{response.json()['conversation_id']}")).json()
        assert tree["project"] == "web-1"


def test_cli_run_project_and_listing(
    tmp_path: Path, llm_env: ScriptedLLM, capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    cli: CLI = make_cli(tmp_path, capsys)
    llm_env.script(Text("first"), Text("second"))
    assert cli.call("run", "hello", "--project", "alpha").code == 0
    monkeypatch.setenv("ARTIFACTFLOW_PROJECT", "beta")
    assert cli.call("run", "hello").code == 0
    monkeypatch.delenv("ARTIFACTFLOW_PROJECT")
    bad = cli.call("run", "hello", "--project", "a b")
    assert bad.code == 2 and "invalid project name" in bad.err, bad
    listing = cli.call("conversations", "--json")  # the stdlib fast reader
    assert listing.code == 0, listing
    assert sorted(str(r["project"]) for r in json.loads(listing.out)["items"]) == ["alpha", "beta"]
    assert "[alpha]" in cli.call("conversations").out
    only = json.loads(cli.call("conversations", "--project", "beta", "--json").out)
    assert [r["project"] for r in only["items"]] == ["beta"] and only["total"] == 1
    assert cli.call("conversations", "--project", "a/b").code == 2


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
async def test_a_version_4_database_gains_the_project_column(tmp_path: Path, backend: str) -> None:
    from contextlib import AsyncExitStack

    from pg import fresh_database

    async with AsyncExitStack() as stack:
        url = await stack.enter_async_context(fresh_database()) if backend == "postgres" else None
        await _upgrades_from_4(url, tmp_path / "old.db")


async def _upgrades_from_4(url: str | None, path: Path) -> None:
    store = await AppStore.open(url, sqlite_path=path)
    conversation = await store.create_conversation()
    async with store.engine.begin() as conn:  # make it what version 4 created
        await conn.execute(sa.text("DROP INDEX ix_af_conversations_project"))
        await conn.execute(sa.text("ALTER TABLE af_conversations DROP COLUMN project"))
        await conn.execute(t.meta.update().where(t.meta.c.key == "schema").values(value="4"))
    await store.close()
    store = await AppStore.open(url, sqlite_path=path)
    try:
        assert await store.schema_version() == t.SCHEMA_VERSION
        old = await store.get_conversation(conversation["id"])
        assert old is not None and old["project"] is None
        new = await store.create_conversation(project="p")
        assert [c["project"] for c in await store.list_conversations(project="p")] == ["p"]
        assert new["project"] == "p"
    finally:
        await store.close()

"""Memories over HTTP (in process, `httpx.ASGITransport`) and the CLI (the real console
script): add → 201 {id}, list, search with the mode that ran, delete; per user (another user's
id is 404); empty or over-long text → 422 / exit 2 with nothing stored; a conversation-scoped
memory for another user's conversation is 404."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from cli_helpers import CLI
from conftest import make_config
from test_api import API, assert_error

from artifactflow.api.app import create_app


async def _http(make_client: Any, tmp_path: Any, yaml_text: str) -> tuple[httpx.AsyncClient, Any]:
    af = await make_client(config_dir=make_config(tmp_path, yaml_text=yaml_text))
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(client=af)), base_url="http://t"), af


async def test_memories_over_http_per_user(make_client: Any, tmp_path: Any) -> None:
    client, af = await _http(make_client, tmp_path, "auth:\n  enabled: true\nmemory:\n  max_chars: 200\n")
    async with client:
        _, alice = await af.admin.store.create_token("alice")
        _, bob = await af.admin.store.create_token("bob")
        as_alice = {"Authorization": f"Bearer {alice}"}
        as_bob = {"Authorization": f"Bearer {bob}"}
        assert_error(await client.get(f"{API}/memories"), 401, "unauthorized")

        created = await client.post(f"{API}/memories", json={"text": "My sister Clara lives in Lisbon"}, headers=as_alice)
        assert created.status_code == 201, created.text
        memory_id = created.json()["id"]
        assert created.json()["deduped"] is False and created.json()["namespace"][1] == "global"
        again = await client.post(f"{API}/memories", json={"text": "My sister Clara lives in Lisbon."}, headers=as_alice)
        assert again.status_code == 201 and again.json() == {**created.json(), "deduped": True}
        project = await client.post(
            f"{API}/memories", json={"text": "Falcon ships in Q3", "scope": "project", "project": "falcon"},
            headers=as_alice,
        )
        assert project.status_code == 201 and project.json()["namespace"][1:] == ["project", "falcon"]

        for bad in ({"text": ""}, {"text": "   "}, {"text": "x" * 201}, {"text": "ok", "scope": "planet"}):
            assert_error(await client.post(f"{API}/memories", json=bad, headers=as_alice), 422, "validation_error")
        missing = {"text": "about that chat", "scope": "conversation", "conversation_id": "nope"}
        assert_error(await client.post(f"{API}/memories", json=missing, headers=as_alice), 404, "not_found")

        listed = (await client.get(f"{API}/memories", headers=as_alice)).json()
        assert [m["text"] for m in listed["items"]] == ["Falcon ships in Q3", "My sister Clara lives in Lisbon"]  # a true duplicate keeps the stored text
        found = (await client.get(f"{API}/memories/search", params={"q": "where does my sibling live"}, headers=as_alice)).json()
        assert found["mode"] == "hybrid" and found["hits"][0]["id"] == memory_id
        recent = (await client.get(f"{API}/memories/search", params={"q": "x", "mode": "recency", "limit": 1}, headers=as_alice)).json()
        assert recent["mode"] == "recency" and [h["text"] for h in recent["hits"]] == ["Falcon ships in Q3"]

        # bob sees none of it, and alice's ids are 404 to him
        assert (await client.get(f"{API}/memories", headers=as_bob)).json()["items"] == []
        assert (await client.get(f"{API}/memories/search", params={"q": "sister"}, headers=as_bob)).json()["hits"] == []
        assert_error(await client.get(f"{API}/memories/{memory_id}", headers=as_bob), 404, "not_found")
        assert_error(await client.delete(f"{API}/memories/{memory_id}", headers=as_bob), 404, "not_found")

        assert (await client.get(f"{API}/memories/{memory_id}", headers=as_alice)).json()["text"].startswith("My sister")
        assert (await client.delete(f"{API}/memories/{memory_id}", headers=as_alice)).status_code == 204
        assert_error(await client.delete(f"{API}/memories/{memory_id}", headers=as_alice), 404, "not_found")
        assert len((await client.get(f"{API}/memories", headers=as_alice)).json()["items"]) == 1


def test_memory_cli(tmp_path: Any, llm_env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    cli = CLI(make_config(tmp_path), tmp_path / "data", capsys)
    added = cli.sub("memory", "add", "The staging cluster lives in eu-west-1")  # the real script
    assert added.code == 0, added.err
    memory_id = added.out.strip()
    assert len(memory_id) == 32
    other = cli.call("memory", "add", "Falcon ships in Q3", "--scope", "project", "--project", "falcon", "--json")
    assert other.code == 0 and json.loads(other.out)["namespace"] == ["local", "project", "falcon"]
    assert cli.sub("memory", "add", "  ").code == 2
    assert cli.call("memory", "add", "x", "--scope", "project").code == 2  # no --project
    assert cli.call("memory", "add", "x", "--scope", "conversation", "--conversation", "nope").code == 2

    found = cli.call("memory", "search", "which region is the staging cluster in", "--json")
    assert found.code == 0
    body = json.loads(found.out)
    assert body["mode"] == "hybrid" and body["hits"][0]["id"] == memory_id
    recent = json.loads(cli.call("memory", "search", "anything", "--mode", "recency", "--limit", "1", "--json").out)
    assert recent["mode"] == "recency" and [h["text"] for h in recent["hits"]] == ["Falcon ships in Q3"]
    listed = json.loads(cli.call("memory", "list", "--json").out)
    assert [m["text"] for m in listed] == ["Falcon ships in Q3", "The staging cluster lives in eu-west-1"]

    assert cli.call("memory", "forget", memory_id).code == 0
    assert cli.call("memory", "forget", memory_id).code == 2
    assert len(json.loads(cli.call("memory", "list", "--json").out)) == 1
    reindexed = cli.call("memory", "reindex")
    assert reindexed.code == 0 and "re-embedded 0" in reindexed.out

"""Batch import through every surface: `client.memories.add_many`, `POST
/api/v1/memories:batch` (in process) and `artifactflow memory import FILE` (the CLI); a bad
text anywhere → 422 / exit 2 naming it, with nothing stored; nothing is merged. Also the
search inputs that are refused (NUL, a limit below 1) and the warning plus `mode: "lexical"`
while memories carry another embedder's vectors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_helpers import CLI
from conftest import make_config
from test_api import API, assert_error

from artifactflow.api.app import create_app
from artifactflow.errors import MemoryTextError, UserError
from artifactflow.memory import MemoryStore
from artifactflow.settings.memory import MemorySettings


async def test_batch_over_http(make_client: Any, tmp_path: Any) -> None:
    af = await make_client(config_dir=make_config(tmp_path, yaml_text="auth:\n  enabled: true\nmemory:\n  max_chars: 200\n"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(client=af)), base_url="http://t") as client:
        _, alice = await af.admin.store.create_token("alice")
        _, bob = await af.admin.store.create_token("bob")
        as_alice, as_bob = {"Authorization": f"Bearer {alice}"}, {"Authorization": f"Bearer {bob}"}
        texts = [f"fact number {i} about the falcon project" for i in range(300)] + ["fact number 0 about the falcon project"]
        done = await client.post(f"{API}/memories:batch", json={"texts": texts, "scope": "project", "project": "falcon"}, headers=as_alice)
        assert done.status_code == 201, done.text
        ids = done.json()["ids"]
        assert len(ids) == len(set(ids)) == 301  # nothing merged, not even the repeated text
        listed = (await client.get(f"{API}/memories", params={"limit": 1000}, headers=as_alice)).json()["items"]
        assert sorted(m["text"] for m in listed) == sorted(texts)
        assert len({tuple(m["namespace"]) for m in listed}) == 1 and listed[0]["namespace"][1:] == ["project", "falcon"]
        assert (await client.get(f"{API}/memories", headers=as_bob)).json()["items"] == []
        for bad in ({"texts": ["ok", "  "]}, {"texts": ["ok", "x" * 201]}, {"texts": []}, {"texts": ["ok", "a\x00b"]},
                    {"texts": ["ok"], "scope": "project"}):
            assert_error(await client.post(f"{API}/memories:batch", json=bad, headers=as_alice), 422, "validation_error")
        assert len((await client.get(f"{API}/memories", params={"limit": 1000}, headers=as_alice)).json()["items"]) == 301
        for params in ({"q": "a\x00b"}, {"q": "falcon", "limit": -1}, {"q": "falcon", "limit": 0}):
            assert_error(await client.get(f"{API}/memories/search", params=params, headers=as_alice), 422, "validation_error")


async def test_client_add_many_checks_everything_first(make_client: Any, tmp_path: Any) -> None:
    af = await make_client(config_dir=make_config(tmp_path))
    with pytest.raises(MemoryTextError, match="memory 3 of 3"):
        await af.memories.add_many(["one", "two", " "])
    assert await af.memories.list() == []
    ids = await af.memories.add_many(["one", "two"])
    assert [h.id for h in await af.memories.list()] and len(ids) == 2
    with pytest.raises(UserError):
        await af.memories.search("x", limit=-1)
    with pytest.raises(UserError):
        await af.memories.search("a\x00b")


def test_memory_import_cli(tmp_path: Path, llm_env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    cli = CLI(make_config(tmp_path), tmp_path / "data", capsys)
    plain = tmp_path / "plain.txt"
    plain.write_text("The staging cluster lives in eu-west-1\n\nFalcon ships in Q3\n", encoding="utf-8")
    lines = tmp_path / "items.jsonl"
    lines.write_text("\n".join(json.dumps({"text": f"imported memory {i}"}) for i in range(50)), encoding="utf-8")
    first = cli.call("memory", "import", str(plain))
    assert first.code == 0 and "imported 2 memories" in first.out, first.err
    second = cli.call("memory", "import", str(lines), "--scope", "project", "--project", "falcon", "--json")
    assert second.code == 0 and len(json.loads(second.out)["ids"]) == 50
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "fine"}\n{"nope": 1}\n', encoding="utf-8")
    refused = cli.call("memory", "import", str(bad))
    assert refused.code == 2 and "line 2" in refused.err
    assert cli.call("memory", "import", str(tmp_path / "missing.txt")).code == 2
    listed = json.loads(cli.call("memory", "list", "--limit", "1000", "--json").out)
    assert len(listed) == 52 and "fine" not in {m["text"] for m in listed}


async def test_stale_vectors_search_lexically_with_a_warning(store: Any) -> None:
    old = MemoryStore(store, MemorySettings(embedder="static"))
    await old.add_memory(("alice", "global"), "The staging cluster lives in eu-west-1")
    await old.add_memory(("alice", "global"), "Falcon ships in Q3")
    new = MemoryStore(store, MemorySettings(embedder="minilm"))
    found = await new.search_memories([("alice",)], "staging cluster region", mode="hybrid")
    assert found.mode == "lexical" and found.warning and "memory reindex" in found.warning
    assert [h.text for h in found.hits] == ["The staging cluster lives in eu-west-1"]
    assert await new.reindex() == 2
    again = await new.search_memories([("alice",)], "where do the servers for testing run", mode="hybrid")
    assert again.mode == "hybrid" and again.warning is None
    assert again.hits[0].text == "The staging cluster lives in eu-west-1"

"""Embedders: `static` loads with no network and no model hub (a fresh interpreter with the
hub forced offline and no proxy); `openai` calls `/v1/embeddings` of the scripted server over
real HTTP; switching embedders leaves old vectors out of scoring until `reindex`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from waiting import ceiling

from artifactflow.errors import ConfigError
from artifactflow.memory import MemoryStore
from artifactflow.settings.memory import MemorySettings, OpenAIEmbedderSettings

OFFLINE_LOAD = """
import asyncio, json, socket, sys
def refuse(*args, **kwargs):
    raise OSError("network disabled in this test")
socket.socket.connect = refuse
socket.create_connection = refuse
from artifactflow.memory.embedders import StaticEmbedder
e = StaticEmbedder()
v = asyncio.run(e.embed(["My dog is called Biscuit", "What is my puppy's name", "Quarterly tax filing"]))
print(json.dumps({"name": e.name, "shape": list(v.shape), "near": float(v[0] @ v[1]), "far": float(v[0] @ v[2]),
                  "hub": sorted(m for m in sys.modules if m.split(".")[0] in ("wordllama", "huggingface_hub", "torch"))}))
"""


def test_static_embedder_loads_offline() -> None:
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower()}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HOME=os.environ.get("HOME", "/tmp"))
    out = subprocess.run([sys.executable, "-c", OFFLINE_LOAD], env=env, capture_output=True, text=True, timeout=ceiling(300))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["name"] == "static:wordllama-256" and result["shape"] == [3, 256]
    assert result["near"] > result["far"] + 0.2
    assert result["hub"] == []  # the wordllama package (its loader), the hub client, torch: none imported


def _openai(llm: Any, **changes: Any) -> MemorySettings:
    return MemorySettings(embedder="openai", openai=OpenAIEmbedderSettings(base_url=llm.base_url, model="emb-test", **changes))


async def test_openai_embedder_against_a_local_server(store: Any, llm: Any) -> None:
    memory = MemoryStore(store, _openai(llm, batch_size=2))
    ns = ("alice", "global")
    ids = await memory.add_many(ns, ["Invoices for Acme are due on the 5th", "My dog is called Biscuit", "The VPN certificate expires in February"])
    assert llm.embedding_requests == 2 and llm.embedded_texts == 3  # batches of two
    found = await memory.search_memories([ns], "when are Acme invoices due", mode="semantic", limit=1)
    assert found.mode == "semantic" and found.hits[0].id == ids[0]
    hybrid = await memory.search_memories([ns], "Biscuit", mode="hybrid", limit=1)
    assert hybrid.mode == "hybrid" and hybrid.hits[0].id == ids[1]
    assert memory.embedder is not None and memory.embedder.name == "openai:emb-test" and memory.embedder.dims == 384
    await memory.aclose()


async def test_openai_embedder_error_is_clear(store: Any, llm: Any) -> None:
    settings = MemorySettings(embedder="openai", openai=OpenAIEmbedderSettings(base_url=llm.base_url + "/nowhere"))
    memory = MemoryStore(store, settings)
    with pytest.raises(ConfigError, match="memory embedder 'openai'.*404"):
        await memory.add_memory(("alice", "global"), "anything")
    assert await memory.list_memories([("alice",)]) == []
    await memory.aclose()


async def test_switching_embedders_then_reindex(store: Any, llm: Any) -> None:
    static = MemoryStore(store)
    ns = ("alice", "global")
    saved = await static.add_memory(ns, "Invoices for Acme are due on the 5th")
    remote = MemoryStore(store, _openai(llm))
    before = await remote.search_memories([ns], "Acme invoices due", mode="semantic", limit=1)
    # a vector of another embedder is never compared with an openai query: words only, and it says so
    assert before.mode == "lexical" and before.warning and "reindex" in before.warning
    assert before.hits[0].id == saved.id
    assert await remote.reindex() == 1
    after = await remote.search_memories([ns], "Acme invoices due", mode="semantic", limit=1)
    assert after.hits[0].id == saved.id and after.hits[0].score > 0.5
    await remote.aclose()


def test_memory_settings_from_yaml(tmp_path: Path) -> None:
    from artifactflow import load_settings

    config = tmp_path / "config"
    config.mkdir()
    (config / "artifactflow.yaml").write_text(
        "memory:\n  embedder: none\n  max_chars: 100\n  weights: {semantic: 0.5, lexical: 0.5}\n", encoding="utf-8"
    )
    settings = load_settings(config, tmp_path / "data")
    assert settings.memory.embedder == "none" and settings.memory.max_chars == 100
    assert settings.memory.weights.lexical == 0.5 and settings.memory.weights.recency == 0.05
    (config / "artifactflow.yaml").write_text("memory:\n  embedder: bert\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="memory"):
        load_settings(config, tmp_path / "data")


async def test_minilm_matches_sentence_transformers() -> None:
    """all-MiniLM-L6-v2 in numpy gives sentence-transformers' similarity for a known pair
    (0.7553) and puts a paraphrase above an unrelated text; no torch is imported."""
    import sys

    from artifactflow.memory.embedders import make_embedder
    from artifactflow.settings.memory import MemorySettings

    embedder = make_embedder(MemorySettings(embedder="minilm"))
    assert embedder is not None and embedder.name == "minilm:all-MiniLM-L6-v2-384"
    rows = await embedder.embed(["A man is eating food.", "A man is eating a piece of bread.",
                                 "The girl is carrying a baby.", "delete a file from disk",
                                 "os.unlink(path): Remove a file (same as remove())."])
    assert rows.shape == (5, 384)
    assert abs(float(rows[0] @ rows[1]) - 0.7553) < 1e-3
    assert float(rows[3] @ rows[4]) > float(rows[3] @ rows[2])
    assert "torch" not in sys.modules


async def test_dotted_and_snake_names_match_on_both_backends(store: Any) -> None:
    """The lexical side splits `heapq.nlargest` and `capture_output` the same way on SQLite
    and PostgreSQL, in the text and in the query."""
    from artifactflow.memory import MemoryStore
    from artifactflow.settings.memory import MemorySettings

    memory = MemoryStore(store, MemorySettings(embedder="none"))
    ns = ("u", "global")
    largest = await memory.add_memory(ns, "heapq.nlargest(n, iterable) returns the n largest elements")
    run = await memory.add_memory(ns, "subprocess.run with capture_output=True keeps stdout")
    await memory.add_memory(ns, "json.dumps serialises an object to a JSON string")
    for query, wanted in (("nlargest", largest.id), ("heapq", largest.id), ("heapq.nlargest", largest.id),
                          ("capture_output", run.id), ("capture", run.id), ("subprocess.run capture_output", run.id)):
        found = await memory.search_memories([("u",)], query, mode="hybrid", limit=3)
        assert found.mode == "lexical" and found.hits and found.hits[0].id == wanted, (query, found.hits)

"""Ranking on a realistic set (tests/data): 200 memories of one user (20 targets among 180
others) and, per target, a natural question, a hard paraphrase sharing no content word, and
for some an exact name or code. On both backends through the store, and through HTTP and
the CLI on SQLite:

- natural questions and exact names: every target in hybrid's top 3;
- hard paraphrases: the static embedder's ceiling (issue 24 measured 15/20 top 3 for
  wordllama); hybrid must not do worse than vectors alone (the lexical side is weighted, not
  fused) and must keep at least 16/20.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_helpers import CLI
from conftest import make_config
from test_api import API

from artifactflow.api.app import create_app
from artifactflow.memory import MemoryStore

DATA = Path(__file__).parent / "data"
TARGETS: list[dict[str, str]] = json.loads((DATA / "memory_paraphrase_targets.json").read_text(encoding="utf-8"))
OTHERS = [line for line in (DATA / "memory_distractors.txt").read_text(encoding="utf-8").splitlines() if line.strip()]


def test_the_fixture_is_200_memories() -> None:
    assert len(TARGETS) == 20 and len(TARGETS) + len(OTHERS) == 200
    assert len({t["memory"] for t in TARGETS} | set(OTHERS)) == 200


async def _fill(memory: MemoryStore, user: str = "local") -> dict[str, str]:
    """Load the set; target text → id."""
    ids = await memory.add_many((user, "global"), [t["memory"] for t in TARGETS] + OTHERS)
    return {t["memory"]: ids[i] for i, t in enumerate(TARGETS)}


def _rank(hit_ids: list[str], target: str) -> int:
    return hit_ids.index(target) + 1 if target in hit_ids else 99


async def test_ranking_on_both_backends(store: Any) -> None:
    memory = MemoryStore(store)
    ids = await _fill(memory)
    user = [("local",)]

    async def ranks(kind: str, mode: str) -> list[int]:
        out = []
        for target in TARGETS:
            if kind in target:
                found = await memory.search_memories(user, target[kind], mode=mode, limit=10)
                assert found.mode == mode
                out.append(_rank([h.id for h in found.hits], ids[target["memory"]]))
        return out

    natural = await ranks("natural", "hybrid")
    assert max(natural) <= 3, natural
    exact = await ranks("exact", "hybrid")
    assert max(exact) <= 3, exact
    hybrid, semantic = await ranks("paraphrase", "hybrid"), await ranks("paraphrase", "semantic")
    top3 = lambda ranks: sum(r <= 3 for r in ranks)  # noqa: E731
    assert top3(hybrid) >= max(16, top3(semantic)), (hybrid, semantic)


async def test_ranking_over_http(make_client: Any, tmp_path: Path) -> None:
    af = await make_client(config_dir=make_config(tmp_path))
    ids = await _fill(af.memories.store)
    app = create_app(client=af)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        for target in TARGETS:
            response = await client.get(f"{API}/memories/search", params={"q": target["natural"], "limit": 3})
            body = response.json()
            assert body["mode"] == "hybrid"
            assert ids[target["memory"]] in [h["id"] for h in body["hits"]], (target["natural"], body["hits"])


def test_ranking_through_the_cli(tmp_path: Path, llm_env: Any, capsys: pytest.CaptureFixture[str]) -> None:
    import asyncio

    from artifactflow import Client, load_settings

    config, data = make_config(tmp_path), tmp_path / "data"

    async def fill() -> dict[str, str]:
        client = await Client.open(load_settings(config, data))
        try:
            return await _fill(client.memories.store)
        finally:
            await client.aclose()

    ids = asyncio.run(fill())
    cli = CLI(config, data, capsys)
    for target in TARGETS[:10]:  # each command opens the whole client: ten are enough here
        result = cli.call("memory", "search", target["natural"], "--limit", "3", "--json")
        assert result.code == 0, result.err
        assert ids[target["memory"]] in [h["id"] for h in json.loads(result.out)["hits"]], target["natural"]


async def test_a_query_without_code_names_keeps_the_vectors_page(store: Any) -> None:
    """Hybrid's page for a query without code names holds what the vectors' page holds (the
    lexical side re-orders it, search.semantic_first); a code name still brings in the memory
    that has it when the vectors alone miss it."""
    memory = MemoryStore(store)
    await _fill(memory)
    user = [("local",)]
    for target in TARGETS:
        for question in (target["paraphrase"], target["natural"]):
            hybrid = await memory.search_memories(user, question, mode="hybrid", limit=5)
            semantic = await memory.search_memories(user, question, mode="semantic", limit=5)
            assert {h.id for h in hybrid.hits} == {h.id for h in semantic.hits}, question
    [named] = await memory.add_many(("local", "global"), ["rotate keys with kms_rotate_v2 --force monthly"])
    hybrid = await memory.search_memories(user, "kms_rotate_v2", mode="hybrid", limit=3)
    assert hybrid.hits[0].id == named

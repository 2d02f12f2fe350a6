"""Knowledge bases (issue 24 step 6): `knowledge add` of Markdown and PDF files; a question
answered by one chunk gets that chunk in the model's request (injected with
`knowledge.inject`, or through the `knowledge_search` tool); adding a changed file replaces
its chunks; artifacts are indexed on save with `knowledge.index_artifacts`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli_helpers import CLI
from conftest import make_config
from pdf_helpers import make_pdf
from scripted_llm import Call, ScriptedLLM, Text, ToolCalls

from artifactflow.events.payloads import MemoryRecalledData

SMALL_CHUNKS = "knowledge:\n  chunk_chars: 300\n  chunk_overlap: 0\n"
GUIDE = """# Operations guide

## Backups
Backups of the orders database run every night at 02:30 UTC and are kept for 35 days in the
cold-storage bucket named glacier-orders.

## On-call
The on-call rotation changes every Wednesday at noon; the handover checklist lives in the
runbook under "weekly handover".

## Coffee
The kitchen espresso machine is descaled on the first day of each quarter.
"""
MANUAL_PAGES = [
    ["Warehouse robot manual.", "The loading robot Tortoise-7 carries at most 180 kilograms per trip."],
    ["Charging.", "Tortoise-7 charges at dock C in forty minutes and runs six hours on one charge."],
]


def write_docs(folder: Path) -> tuple[Path, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    guide = folder / "guide.md"
    guide.write_text(GUIDE, encoding="utf-8")
    manual = folder / "manual.pdf"
    manual.write_bytes(make_pdf(MANUAL_PAGES, title="Tortoise-7 manual"))
    return guide, manual


def section_of(request: dict[str, Any]) -> str:
    system = request["messages"][0]["content"]
    return system[system.find("<recalled_context"):] if "<recalled_context" in system else ""


async def test_injected_chunks_answer_from_markdown_and_pdf(
    make_client: Any, llm: ScriptedLLM, tmp_path: Path
) -> None:
    af = await make_client(yaml_text=SMALL_CHUNKS + "  inject: true\n")
    guide, manual = write_docs(tmp_path / "docs")
    added = await af.knowledge.add([guide, manual])
    assert [(a.status, a.chunks > 0) for a in added] == [("added", True), ("added", True)]
    assert added[1].title == "Tortoise-7 manual"
    llm.script(Text("180 kg"), Text("02:30"))
    robot = await af.run("How many kilograms can the Tortoise-7 robot carry per trip?")
    backup = await af.run("When do the nightly backups of the orders database run?")
    first, second = section_of(llm.requests[0]), section_of(llm.requests[1])
    assert "180 kilograms" in first and "espresso" not in first and "manual.pdf" in first
    assert "02:30 UTC" in second and "Tortoise" not in second and "guide.md" in second
    (event,) = [e.data for e in robot.events if isinstance(e.data, MemoryRecalledData)]
    assert event.knowledge_ids and event.ids == event.knowledge_ids  # no memories, only chunks
    assert backup.status == "completed"


async def test_the_knowledge_search_tool_brings_the_chunk(
    make_client: Any, llm: ScriptedLLM, tmp_path: Path
) -> None:
    af = await make_client(lead_tools=["knowledge_search"], yaml_text=SMALL_CHUNKS)
    guide, manual = write_docs(tmp_path / "docs")
    await af.knowledge.add([guide, manual])
    llm.script(
        ToolCalls([Call("knowledge_search", {"query": "Tortoise-7 charging dock minutes"}, id="k1")]),
        Text("Dock C, forty minutes."),
    )
    result = await af.run("Where and how fast does the warehouse robot charge?")
    assert result.status == "completed"
    tool_message = next(m for m in llm.requests[1]["messages"] if m["role"] == "tool")
    passages = json.loads(tool_message["content"])["passages"]
    assert "dock C in forty minutes" in passages[0]["text"]
    assert passages[0]["source"].startswith("manual.pdf, part ")


async def test_a_changed_file_replaces_its_chunks(make_client: Any, tmp_path: Path) -> None:
    af = await make_client(yaml_text=SMALL_CHUNKS)
    guide, _ = write_docs(tmp_path / "docs")
    (first,) = await af.knowledge.add([guide], base="ops")
    (again,) = await af.knowledge.add([guide], base="ops")
    assert again.status == "unchanged" and again.chunks == first.chunks
    before = await af.knowledge.search("nightly backups orders database", base="ops")  # warms the cache
    assert "02:30" in before.hits[0].text
    guide.write_text(GUIDE.replace("02:30 UTC", "04:15 UTC"), encoding="utf-8")
    (changed,) = await af.knowledge.add([guide], base="ops")
    assert changed.status == "replaced" and changed.sha256 != first.sha256
    (doc,) = await af.knowledge.list(base="ops")
    assert doc.chunks == changed.chunks and doc.sha256 == changed.sha256
    found = await af.knowledge.search("nightly backups orders database", base="ops")
    texts = " ".join(h.text for h in found.hits)
    assert "04:15" in texts and "02:30" not in texts
    assert await af.knowledge.remove([str(guide)], base="ops") == changed.chunks
    assert await af.knowledge.list() == []


async def test_artifacts_are_indexed_on_save(make_client: Any, llm: ScriptedLLM) -> None:
    af = await make_client(lead_tools=["create_artifact", "rewrite_artifact"],
                           yaml_text="knowledge:\n  index_artifacts: true\n")
    llm.script(
        ToolCalls([Call("create_artifact", {"id": "plan", "title": "Launch plan",
                                            "content": "The launch date is the ninth of March."}, id="a1")]),
        Text("written"),
    )
    result = await af.run("Write the launch plan")
    (doc,) = await af.knowledge.list(base="artifacts")
    assert doc.path == f"artifact:{result.conversation_id}/plan" and doc.title == "Launch plan"
    found = await af.knowledge.search("when is the launch", base="artifacts")
    assert "ninth of March" in found.hits[0].text


def test_cli_knowledge_add_list_remove(
    tmp_path: Path, llm_env: ScriptedLLM, capsys: pytest.CaptureFixture[str]
) -> None:
    """`main()` in this process: a process per command would load the static embedder each
    time (seconds on a loaded machine)."""
    config = make_config(tmp_path, yaml_text=SMALL_CHUNKS)
    cli = CLI(config, tmp_path / "data", capsys)
    guide, manual = write_docs(tmp_path / "docs")
    added = cli.call("knowledge", "add", str(guide), str(manual), "--base", "ops", "--json")
    assert added.code == 0, added
    assert [d["status"] for d in json.loads(added.out)["documents"]] == ["added", "added"]
    listed = json.loads(cli.call("knowledge", "list", "--json").out)["documents"]
    assert sorted(Path(d["path"]).name for d in listed) == ["guide.md", "manual.pdf"]
    assert {d["base"] for d in listed} == {"ops"}
    assert "unchanged" in cli.call("knowledge", "add", str(guide), "--base", "ops").out
    found = json.loads(cli.call("knowledge", "search", "robot payload kilograms", "--json").out)
    assert "180 kilograms" in found["hits"][0]["text"]
    assert cli.call("knowledge", "remove", str(manual)).code == 0
    assert cli.call("knowledge", "remove", str(manual)).code == 2
    bad = tmp_path / "image.png"
    bad.write_bytes(b"\x89PNG")
    refused = cli.call("knowledge", "add", str(bad))
    assert refused.code == 2 and "cannot read .png" in refused.err, refused
    assert cli.call("knowledge", "add", str(guide), "--base", "no.dots").code == 2


async def test_knowledge_rows_on_both_backends(store: Any) -> None:
    """Add, replace, list, search and remove on SQLite and PostgreSQL (one code path)."""
    from artifactflow.memory import MemoryStore
    from artifactflow.memory.knowledge import KnowledgeBases
    from artifactflow.settings.knowledge import KnowledgeSettings

    bases = KnowledgeBases(MemoryStore(store), KnowledgeSettings(chunk_chars=300, chunk_overlap=0))
    first = await bases.add_text("/docs/guide.md", GUIDE, title="Operations guide", base="ops", user_id="u1")
    again = await bases.add_text("/docs/guide.md", GUIDE.replace("35 days", "90 days"), base="ops", user_id="u1")
    assert (first.status, again.status) == ("added", "replaced") and first.chunks > 1
    await bases.add_text("/docs/other.md", "Nothing about backups here at all.", base="ops", user_id="u2")
    (doc,) = await bases.list(user_id="u1")
    assert doc.chunks == again.chunks and doc.base == "ops"
    found = await bases.search("how long are backups kept", user_id="u1")
    assert "90 days" in found.hits[0].text and all(h.namespace[0] == "u1" for h in found.hits)
    assert await bases.remove(["/docs/guide.md"], user_id="u1") == again.chunks
    assert await bases.list(user_id="u1") == [] and len(await bases.list(user_id="u2")) == 1

"""`artifactflow memory`: add, search, list, forget and re-embed long-term memories (the local
user's; docs/memory.md). Every command goes through `client.memories`; `--json` output of
`search` says which mode actually ran (`lexical` when no embedder is configured).
Empty or over-long text exits 2 with nothing stored, as an unknown id does for `forget`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

import typer

from . import views
from .app import JsonOption, app, command, execute
from .options import argument, option
from .text import console, escape, short

if TYPE_CHECKING:
    from ..client import Client
    from ..memory import MemoryHit

memory_app = typer.Typer(help="Long-term memory: add, search, list, forget, reindex.", no_args_is_help=True)
app.add_typer(memory_app, name="memory")

Scope = Literal["global", "project", "conversation"]
Mode = Literal["hybrid", "semantic", "recency"]


def _line(hit: MemoryHit, score: bool = False) -> str:
    scope = "/".join(hit.namespace[1:])
    head = f"[cyan]{hit.score:6.3f}[/cyan]  " if score else ""
    return f"{head}[bold]{hit.id}[/bold]  [dim]{escape(scope)} · {views.ago(hit.updated_at)}[/dim]  {escape(short(hit.text, 100))}"


@command("add", group=memory_app)
def add(
    text: Annotated[str, argument("The memory's text (at most memory.max_chars characters).")],
    scope: Annotated[Scope, option("--scope", help="global (default), project or conversation.")] = "global",
    project: Annotated[str | None, option("--project", help="The project of --scope project.")] = None,
    conversation: Annotated[str | None, option("--conversation", help="The conversation id of --scope conversation.")] = None,
    json_: JsonOption = False,
) -> None:
    """Save a memory; prints its id (a near-duplicate in the same scope is updated instead)."""

    async def work(client: Client) -> None:
        saved = await client.memories.add(text, scope=scope, project=project, conversation_id=conversation)
        if json_:
            views.print_json(saved.to_dict())
            return
        print(saved.id)
        if saved.deduped:
            console(stderr=True).print("[dim]deduped: updated a near-identical memory[/dim]")

    execute(work)


@command("import", group=memory_app)
def import_(
    file: Annotated[str, argument("A file of memories: one per line, or JSON lines with a \"text\" field; - reads stdin.")],
    scope: Annotated[Scope, option("--scope", help="global (default), project or conversation.")] = "global",
    project: Annotated[str | None, option("--project", help="The project of --scope project.")] = None,
    conversation: Annotated[str | None, option("--conversation", help="The conversation id of --scope conversation.")] = None,
    json_: JsonOption = False,
) -> None:
    """Import many memories at once (nothing merged; a bad line exits 2 with nothing stored)."""
    from .memory_import import read_memories

    texts = read_memories(file)

    async def work(client: Client) -> None:
        ids = await client.memories.add_many(texts, scope=scope, project=project, conversation_id=conversation)
        if json_:
            views.print_json({"ids": ids})
            return
        console().print(f"imported {len(ids)} memories")

    execute(work)


@command("search", group=memory_app)
def search(
    query: Annotated[str, argument("What to look for.")],
    mode: Annotated[Mode, option("--mode", help="hybrid (default), semantic or recency.")] = "hybrid",
    limit: Annotated[int, option("--limit", "-n", help="How many memories (default 10).", min=1, max=200)] = 10,
    json_: JsonOption = False,
) -> None:
    """Search memories; `--json` says which mode ran."""

    async def work(client: Client) -> None:
        found = await client.memories.search(query, mode=mode, limit=limit)
        if json_:
            views.print_json(found.to_dict())
            return
        out = console()
        for hit in found.hits:
            out.print(_line(hit, score=True))
        out.print(f"[dim]{len(found.hits)} memories · mode {found.mode}[/dim]")

    execute(work)


@command("list", group=memory_app)
def list_(
    limit: Annotated[int, option("--limit", "-n", help="How many, newest first (default 100).", min=1)] = 100,
    json_: JsonOption = False,
) -> None:
    """List memories, newest first."""

    async def work(client: Client) -> None:
        hits = await client.memories.list(limit=limit)
        if json_:
            views.print_json([hit.to_dict() for hit in hits])
            return
        out = console()
        for hit in hits:
            out.print(_line(hit))
        out.print(f"[dim]{len(hits)} memories[/dim]")

    execute(work)


@command("forget", group=memory_app)
def forget(memory_id: Annotated[str, argument("The id `memory add` or `memory list` printed.")]) -> None:
    """Delete a memory (exit 2 when there is no such memory)."""

    async def work(client: Client) -> None:
        await client.memories.forget(memory_id)
        console().print(f"forgot {escape(memory_id)}")

    execute(work)


@command("reindex", group=memory_app)
def reindex() -> None:
    """Re-embed memories after memory.embedder changed."""

    async def work(client: Client) -> None:
        count = await client.memories.reindex()
        embedder = client.settings.memory.embedder
        console().print(f"re-embedded {count} memories with the '{embedder}' embedder")

    execute(work)

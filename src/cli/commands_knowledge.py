"""`artifactflow knowledge add|list|remove|search`: knowledge bases (docs/memory.md)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from . import views
from .app import JsonOption, app, command, execute
from .options import option
from .text import console

if TYPE_CHECKING:
    from ..client import Client

knowledge_app = typer.Typer(
    help="Knowledge bases: documents agents search (knowledge_search) and recall.",
    no_args_is_help=True,
)
app.add_typer(knowledge_app, name="knowledge")

BaseOption = Annotated[
    str | None, option("--base", "-b", help="The knowledge base (default: knowledge.base).")
]


@command("add", group=knowledge_app)
def add(
    paths: Annotated[list[str], typer.Argument(help="Markdown, text, HTML or PDF files, or folders.", show_default=False)],
    base: BaseOption = None,
    json_: JsonOption = False,
) -> None:
    """Add documents; a file added again replaces its chunks when its text changed."""

    async def work(client: Client) -> None:
        added = await client.knowledge.add(paths, base=base)
        if json_:
            views.print_json({"documents": [a.to_dict() for a in added]})
            return
        out = console()
        for item in added:
            out.print(f"{item.status:9} {item.path}  ({item.chunks} chunks, base {item.base})")

    execute(work)


@command("list", group=knowledge_app)
def list_(base: BaseOption = None, json_: JsonOption = False) -> None:
    """List the documents of the knowledge bases."""

    async def work(client: Client) -> None:
        documents = await client.knowledge.list(base=base)
        if json_:
            views.print_json({"documents": [d.to_dict() for d in documents]})
            return
        out = console()
        if not documents:
            out.print("No documents (add some with `artifactflow knowledge add PATH`).")
        for doc in documents:
            out.print(f"{doc.base:12} {doc.path}  ({doc.chunks} chunks{', ' + doc.title if doc.title else ''})")

    execute(work)


@command("remove", group=knowledge_app)
def remove(
    paths: Annotated[list[str], typer.Argument(help="Documents to remove (paths as added).", show_default=False)],
    base: BaseOption = None,
    json_: JsonOption = False,
) -> None:
    """Remove documents; exits 2 when none of them was in a knowledge base."""

    async def work(client: Client) -> int | None:
        deleted = await client.knowledge.remove(paths, base=base)
        if json_:
            views.print_json({"chunks_deleted": deleted})
        else:
            console().print(f"removed {deleted} chunks")
        if not deleted:
            console(stderr=True).print("no such document in the knowledge bases")
            return 2
        return None

    execute(work)


@command("search", group=knowledge_app)
def search(
    query: Annotated[str, typer.Argument(help="What to look for.", show_default=False)],
    base: BaseOption = None,
    limit: Annotated[int, typer.Option("--limit", min=1, max=50, help="How many passages.")] = 5,
    json_: JsonOption = False,
) -> None:
    """Search the knowledge bases."""

    async def work(client: Client) -> None:
        found = await client.knowledge.search(query, base=base, limit=limit)
        data: dict[str, Any] = found.to_dict()
        if json_:
            views.print_json(data)
            return
        out = console()
        out.print(f"mode: {found.mode}")
        for hit in found.hits:
            out.print(f"{hit.score:6.3f}  [{hit.namespace[2]}] {' '.join(hit.text.split())[:160]}")

    execute(work)

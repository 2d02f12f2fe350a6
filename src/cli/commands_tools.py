"""`artifactflow tools`: every tool the agents can be given, with where it comes from
(builtin, plugin, langchain, mcp:SERVER), its effective permission and its JSON schema.

Opening the client starts the configured MCP servers, so their tools are listed as the
servers describe them right now; an optional server that did not start is reported on stderr.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from ..errors import NotFoundError
from . import views
from .app import JsonOption, command, execute
from .options import option
from .text import console, escape, short

if TYPE_CHECKING:
    from ..client import Client
    from ..client.records import ToolDescription


@command()
def tools(
    schema: Annotated[
        str | None,
        option("--schema", help="Print one tool's JSON schema (with --json: its whole entry)."),
    ] = None,
    json_: JsonOption = False,
) -> None:
    """List every tool with its source, permission and schema."""

    async def work(client: Client) -> None:
        rows = client.admin.tools()
        if schema is not None:
            row = next((r for r in rows if r["name"] == schema), None)
            if row is None:
                raise NotFoundError(
                    f"no tool named {schema!r}; known tools: {', '.join(r['name'] for r in rows)}"
                )
            views.print_json(row if json_ else row["schema"])
            return
        if json_:
            views.print_json(rows)
        else:
            _print_table(rows)

    execute(work)


def _print_table(rows: list[ToolDescription]) -> None:
    out = console()
    width = max((len(r["name"]) for r in rows), default=4)
    source_width = max((len(r["source"]) for r in rows), default=6)
    for row in rows:
        level = row["permission"]
        style = "yellow" if level == "confirm" else "green"
        used_by = row.get("agents")
        agents = f"  [dim](used by {', '.join(used_by)})[/dim]" if used_by else ""
        out.print(
            f"{escape(row['name']):<{width}}  {escape(row['source']):<{source_width}}  "
            f"[{style}]{level:<7}[/{style}]  {escape(short(row['description'], 80))}{agents}"
        )
    out.print(f"[dim]{len(rows)} tools. `artifactflow tools --schema NAME` prints a schema.[/dim]")


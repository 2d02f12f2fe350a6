"""The agent platform from the command line (issue 35): `crons list|delete`, `assistants`
(the saved ones), and `mcp` (the assistants as MCP tools over stdio, for desktop clients).

Crons are created over HTTP (`POST /runs/crons`, LangGraph's `client.crons.create`); a server
(`artifactflow serve`) starts their runs. Here they are listed and deleted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from .app import JsonOption, app, command, execute, present
from .options import argument
from .text import Table

if TYPE_CHECKING:
    from rich.console import Console

    from ..client import Client

crons_app = typer.Typer(help="Scheduled runs (create them with POST /runs/crons).", no_args_is_help=True)
app.add_typer(crons_app, name="crons")


def _crons_table(console: Console, rows: list[dict[str, Any]]) -> None:
    if not rows:
        console.print("no crons")
        return
    table = Table("cron", "assistant", "schedule", "zone", "thread", "next run", "enabled")
    for r in rows:
        table.add_row(
            r["cron_id"], r["assistant_id"], r["schedule"], r["timezone"] or "UTC",
            r["thread_id"] or "(new each run)", r["next_run_date"] or "-", "yes" if r["enabled"] else "no",
        )
    console.print(table)


@command("list", group=crons_app)
def crons_list(json_: JsonOption = False) -> None:
    """List the crons, with their next run."""

    async def work(client: Client) -> int | None:
        from ..protocol.crons import Crons, cron_view
        from ..protocol.service import Protocol

        rows = [cron_view(r) for r in await Crons(Protocol(client)).search(None)]
        return present(rows, _crons_table, json_)

    execute(work)


@command("delete", group=crons_app)
def crons_delete(cron_id: Annotated[str, argument("The cron to delete.")]) -> None:
    """Delete a cron: no more runs start from it (runs already started go on)."""

    async def work(client: Client) -> int | None:
        from ..protocol.crons import Crons
        from ..protocol.service import Protocol

        await Crons(Protocol(client)).delete(cron_id, None)
        print(f"deleted cron {cron_id}")
        return None

    execute(work)


def _assistants_table(console: Console, rows: list[dict[str, Any]]) -> None:
    table = Table("assistant", "graph", "name", "version", "config")
    for r in rows:
        configurable = {**(r["config"].get("configurable") or {}), **r["context"]}
        table.add_row(r["assistant_id"], r["graph_id"], r["name"], str(r["version"]), str(configurable or "-"))
    console.print(table)


@command()
def assistants(json_: JsonOption = False) -> None:
    """List the assistants: the built-in ones and those saved with POST /assistants (use one
    with `artifactflow run --assistant ID`)."""

    async def work(client: Client) -> int | None:
        from ..protocol.assistants_store import all_views
        from ..protocol.service import Protocol

        return present(await all_views(Protocol(client), None), _assistants_table, json_)

    execute(work)


@command()
def mcp() -> None:
    """Serve the assistants as MCP tools over stdin/stdout, for desktop MCP clients (Claude
    Desktop, Cursor): `{"command": "artifactflow", "args": ["mcp"]}` in their config."""

    from ..api.mcp_optional import MCP_EXTRA_HINT, mcp_installed

    if not mcp_installed():  # before any settings or database: nothing to serve without it
        from ..errors import ConfigError

        raise ConfigError(f"artifactflow mcp: {MCP_EXTRA_HINT}")

    async def work(client: Client) -> int | None:
        from ..api.mcp_server import serve_stdio

        await serve_stdio(client)
        return None

    execute(work)

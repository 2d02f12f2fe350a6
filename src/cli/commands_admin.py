"""Maintenance commands: `gc` (checkpoints no run needs), `serve` (the HTTP API, imported
when needed) and `token create`.
"""

from __future__ import annotations

import inspect
import sys
from typing import TYPE_CHECKING, Annotated

import typer

from ..errors import UserError
from . import exitcodes, views
from .app import JsonOption, command, execute, present, token_app
from .options import GLOBALS, argument, option
from .text import console

if TYPE_CHECKING:
    from ..client import Client


@command()
def gc(
    retention_hours: Annotated[
        float | None,
        option("--retention-hours", min=0, help="Abandon pauses idle longer than this."),
    ] = None,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Only show what would be removed.")
    ] = False,
    json_: JsonOption = False,
) -> None:
    """Delete checkpoints no run needs any more (finished and abandoned messages)."""

    async def work(client: Client) -> int | None:  # checkpoints: the whole engine, not a Reader
        return present(await client.admin.gc(retention_hours, dry_run=dry_run), views.gc_report, json_)

    execute(work)


# --- server and tokens ---------------------------------------------------------------------


@command()
def serve(
    host: Annotated[str, typer.Option("--host", help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port to listen on.")
    ] = 8000,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--cors-origin",
            help="Browser origin allowed to call the API from another page (CORS), e.g. "
            "http://localhost:3000; repeat for more, * for any. Replaces server.cors_origins.",
        ),
    ] = None,
) -> None:
    """Serve the HTTP/SSE API (exit 7 when the port is in use)."""
    import asyncio

    check_port_free(host, port)  # before the settings, the app and its "startup complete"
    from ..api.app import serve as serve_app
    from ..settings import cors_origin as parse_origin

    settings = GLOBALS.settings()
    if cors_origin:
        try:
            origins = [parse_origin(o) for o in cors_origin]
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--cors-origin") from None
        server = settings.server.model_copy(update={"cors_origins": origins})
        settings = settings.model_copy(update={"server": server})
    result = serve_app(settings, host=host, port=port)
    if inspect.isawaitable(result):
        asyncio.run(result)  # type: ignore[arg-type]


def check_port_free(host: str, port: int) -> None:
    """Bind `host:port` once, as uvicorn will (SO_REUSEADDR), and let it go; in use (or not
    bindable) ends the command with its own line and exit 7, before anything starts."""
    import errno
    import socket

    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise UserError(f"--host {host}: not an address this machine has ({exc.strerror})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            busy = exc.errno == errno.EADDRINUSE
            reason = "is in use (another server is listening there)" if busy else f"cannot be bound ({exc.strerror})"
            console(stderr=True).print(
                f"[red]error: {host}:{port} {reason}; choose another with --port[/red]"
            )
            raise typer.Exit(exitcodes.PORT_BUSY) from None


@command("create", group=token_app)
def token_create(
    name: Annotated[str, argument("User name.")],
) -> None:
    """Create an API token for NAME; the token alone is printed on the last line."""

    async def work(client: Client) -> None:
        user_id, token = await client.admin.create_token(name)
        console(stderr=True).print(
            f"Created a token for user {name!r} ({user_id}). Only its hash is stored: copy it now."
        )
        sys.stdout.write(token + "\n")
        sys.stdout.flush()

    execute(work)

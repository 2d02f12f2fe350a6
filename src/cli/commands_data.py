"""Commands that read stored data: paused messages, conversations and their trees, event
logs, and artifacts, all asked of a `Reader` (the app store without the run engine, so they
start quickly); only `events --follow` opens a `Client`, to follow a live run.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..events.status import EventType
from . import views
from .app import JsonOption, command, execute, read, show, store_location
from .options import argument, option
from .text import console

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from ..client import Client, Reader


@command()
def pending(json_: JsonOption = False) -> None:
    """List paused messages and the tool calls they wait for."""
    from ..client import quick

    show(lambda reader: reader.runs.pending(), views.pending, json_,
         lambda messages: [views.public_message(m) for m in messages], quick=quick.pending)


@command()
def conversations(
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many to show.")] = 20,
    offset: Annotated[int, typer.Option("--offset", min=0, help="How many to skip.")] = 0,
    project: Annotated[
        str | None, option("--project", help="Only this project's conversations.")
    ] = None,
    json_: JsonOption = False,
) -> None:
    """List conversations, newest first."""
    if project is not None:
        from ..errors import UserError
        from ..settings.projects import project_name_problem

        if problem := project_name_problem(project):
            raise UserError(problem)

    def present_page(rows: Sequence[Mapping[str, Any]], total: int) -> None:
        if json_:
            views.print_json({"items": rows, "total": total, "limit": limit, "offset": offset})
        else:
            views.conversations(console(), rows, total, offset)

    async def work(reader: Reader) -> None:
        rows = await reader.conversations.list(limit=limit, offset=offset, project=project)
        present_page(rows, await reader.conversations.count(project=project))

    from ..client import quick  # SQLite: no SQLAlchemy (see there)

    page = quick.conversation_page(store_location(), limit=limit, offset=offset, project=project)
    if page is None:
        read(work)
    else:
        present_page(*page)


@command()
def history(
    conversation_id: Annotated[str, argument("The conversation.")],
    json_: JsonOption = False,
) -> None:
    """Show a conversation as a tree of messages, branches and the active branch marked."""
    show(lambda reader: reader.conversations.tree(conversation_id), views.history, json_)


@command()
def events(
    message_id: Annotated[str, argument("The message.")],
    after: Annotated[
        int, typer.Option("--after", min=0, help="Only events after this event id.")
    ] = 0,
    json_: Annotated[bool, typer.Option("--json", help="One JSON object per event.")] = False,
    follow: Annotated[
        bool, typer.Option("--follow", "-f", help="Keep following a running message.")
    ] = False,
) -> None:
    """Replay a message's stored events (and follow it live with --follow)."""
    out = console()

    async def follow_live(client: Client) -> None:
        async for event in await client.runs.get(message_id, after_event_id=after):
            _print_event(out, event, json_)

    async def stored(reader: Reader) -> None:
        for event in await reader.runs.events(message_id, after_event_id=after):
            _print_event(out, event, json_)

    if follow:
        execute(follow_live)
    else:
        read(stored)


def _print_event(out: Any, event: Any, json_: bool) -> None:
    if json_:
        sys.stdout.write(event.model_dump_json() + "\n")
        sys.stdout.flush()
    elif event.type != EventType.LLM_CHUNK:
        out.print(views.event_line(event))


@command("artifacts")
def list_artifacts(
    conversation_id: Annotated[str, argument("The conversation.")],
    json_: JsonOption = False,
) -> None:
    """List a conversation's artifacts."""
    show(lambda reader: reader.artifacts.list(conversation_id), views.artifacts, json_)


@command("artifact")
def show_artifact(
    conversation_id: Annotated[str, argument("The conversation.")],
    artifact_id: Annotated[str, argument("The artifact.")],
    version: Annotated[
        int | None, option("--version", min=1, help="This version (default: current).")
    ] = None,
    diff: Annotated[
        int | None,
        option("--diff", min=1, help="Unified diff from version N to current (or --version)."),
    ] = None,
    export: Annotated[
        Path | None, option("--export", help="Write the artifact as Markdown to PATH.")
    ] = None,
) -> None:
    """Show an artifact, diff two of its versions, or export it as Markdown."""
    out = console()

    async def work(reader: Reader) -> None:
        artifacts = reader.artifacts
        if diff is not None:
            text = await artifacts.diff(conversation_id, artifact_id, diff, version)
            views.diff(out, text, diff, version if version is not None else "current")
        if export is not None:
            path = await artifacts.export_to(export, conversation_id, artifact_id, version)
            out.print(f"wrote {path}")
        if diff is None and export is None:
            views.artifact(out, await artifacts.get(conversation_id, artifact_id, version))

    read(work)

"""`artifactflow export`, `replay` and `eval`: golden sessions for regression evals.

`export` reads the configured data folder. `replay` and `eval` never open it: each replay
runs the current config on a temporary data folder (see `replay/`). Exit codes: 0 same,
1 diverged or failed, 2 for a file that is not a session file or bad usage.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from . import views
from .app import JsonOption, command, execute
from .options import GLOBALS, argument, option
from .text import Text, console, escape

if TYPE_CHECKING:
    from rich.console import Console

    from ..client import Client
    from ..replay.report import ReplayReport

LiveOption = Annotated[
    bool,
    typer.Option(
        "--live-model",
        help="Send the recorded requests to the model the current config names and report "
        "how its answers changed (needs its endpoint and key).",
    ),
]


@command("export")
def export_(
    message_id: Annotated[str, argument("The message whose run to export.")],
    output: Annotated[
        Path | None,
        option("--output", "-o", help="Session file to write. Default: MESSAGE_ID.jsonl"),
    ] = None,
    full_messages: Annotated[
        bool,
        typer.Option("--full-messages",
                     help="Write every request's messages in full (bigger, easier to read)."),
    ] = False,
    json_: JsonOption = False,
) -> None:
    """Write a message's run as a self-contained session file for `replay` and `eval`."""
    target = output or Path(f"{message_id}.jsonl")

    async def work(client: Client) -> None:
        session = await client.runs.export(message_id, target, full_messages=full_messages)
        summary = {
            "path": str(target),
            "message_id": message_id,
            "status": session.status,
            "model_calls": len(session.calls),
            "tool_calls": len(session.tools),
            "pauses": len(session.permissions),
        }
        if json_:
            views.print_json(summary)
        else:
            console().print(
                f"Exported message {message_id} ({session.status}) to {escape(str(target))}: "
                f"{len(session.calls)} model calls, {len(session.tools)} tool calls, "
                f"{len(session.permissions)} pauses."
            )

    execute(work)


@command()
def replay(
    path: Annotated[Path, argument("A session file from `artifactflow export`.")],
    live_model: LiveOption = False,
    json_: JsonOption = False,
) -> None:
    """Re-run a session under the current config with the recorded model answers and tool
    results (nothing runs, nothing is sent); report the first divergence with a diff.

    Exits 0 when the run is the same, 1 when it diverged or could not be replayed."""
    import asyncio

    from ..replay.replayer import replay_session

    report = asyncio.run(replay_session(path, GLOBALS.settings(), live_model=live_model))
    if json_:
        views.print_json(report.to_dict())
    else:
        print_report(console(), report)
    if not report.ok:
        raise typer.Exit(report.exit_code)


@command("eval")
def eval_(
    folder: Annotated[Path, argument("Folder of session files (*.jsonl).")],
    live_model: LiveOption = False,
    json_: JsonOption = False,
) -> None:
    """Replay every session file in a folder and print a table; exits 1 if any diverged or
    failed (for CI over golden sessions)."""
    import asyncio

    from ..replay.evaluate import eval_sessions

    result = asyncio.run(eval_sessions(folder, GLOBALS.settings(), live_model=live_model))
    if json_:
        views.print_json(result.to_dict())
    else:
        out = console()
        out.print(Text(result.table()))
        for report in result.reports:
            if report.divergence is not None and report.divergence.diff:
                out.print(Text(f"\n{Path(report.path or '?').name}: {report.line()}", style="bold"))
                print_diff(out, report.divergence.diff)
    if not result.ok:
        raise typer.Exit(result.exit_code)


def print_report(out: Console, report: ReplayReport) -> None:
    from ..replay.report import Verdict

    style = {Verdict.SAME: "green", Verdict.DIVERGED: "yellow", Verdict.FAILED: "red"}[report.verdict]
    out.print(Text(report.line(), style=style))
    for step in report.live or ():
        similarity = "" if step.similarity is None else f" (text similarity {step.similarity:.2f})"
        out.print(Text(f"  step {step.step} {step.agent or '-'}: {step.verdict}{similarity}"))
    divergence = report.divergence
    if divergence is not None:
        where = f" ({divergence.agent})" if divergence.agent else ""
        out.print(Text(f"step {divergence.step}{where}, {divergence.kind.value}", style="dim"))
        if divergence.diff:
            print_diff(out, divergence.diff)
    for note in report.notes:
        out.print(Text(f"note: {note}", style="dim"))


def print_diff(out: Console, text: str) -> None:
    if out.is_terminal:
        from rich.syntax import Syntax

        out.print(Syntax(text, "diff", theme="ansi_dark", background_color="default"))
    else:
        out.print(Text(text))

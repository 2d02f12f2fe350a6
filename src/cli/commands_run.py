"""`artifactflow run`, `resume` and `retry`: the commands that drive a message (the driving
itself is `session.Session`). Their exit codes are listed in `exitcodes`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import UserError
from . import exitcodes
from .app import JsonOption, NoInputOption, YesOption, command, drive
from .approvals import ResumeData, decisions_from_flags
from .options import argument, option
from .preflight import before_run
from .text import Text, console

if TYPE_CHECKING:
    from ..settings import Settings
    from ..shapes import AskedCall


@command(epilog=exitcodes.HELP)
def run(
    task: Annotated[str, argument("What the agents should do.")],
    conversation: Annotated[
        str | None, option("--conversation", "-c", help="Continue this conversation.")
    ] = None,
    parent: Annotated[
        str | None,
        option("--parent", help="Branch from this message (default: the active branch)."),
    ] = None,
    new_root: Annotated[
        bool, typer.Option("--new-root", help="Start a new root in the conversation.")
    ] = False,
    project: Annotated[
        str | None,
        option(
            "--project",
            help="The project a new conversation belongs to; its runs recall the project's "
            "memories (default: ARTIFACTFLOW_PROJECT).",
        ),
    ] = None,
    assistant: Annotated[
        str | None,
        option(
            "--assistant",
            help="Run with a saved assistant's configuration (model, prompt, tools, "
            "permissions): its id (`artifactflow assistants`).",
        ),
    ] = None,
    json_: JsonOption = False,
    no_input: NoInputOption = False,
    yes: YesOption = False,
) -> None:
    """Run a task and show the agents at work; stops for approval of risky tool calls.

    At a terminal you are asked about each call (approve, deny with a reason, edit its
    arguments, always allow the tool); with --yes everything is approved; with --no-input or
    without a terminal the command prints the message id and exits 3. Ctrl-C cancels (the
    partial answer is saved); a second Ctrl-C quits at once. SIGTERM does the same (exit 143).
    """
    if parent is not None and new_root:
        raise UserError("use either --parent or --new-root, not both")

    def parent_id() -> Any:  # the engine's marker, imported once the checks have passed
        from ..core.conversations import ACTIVE_BRANCH

        return None if new_root else (parent if parent is not None else ACTIVE_BRANCH)

    def check(settings: Settings) -> None:
        notice = before_run(settings, conversation=conversation, notice=True)
        if notice:
            console(stderr=True).print(Text(notice, style="yellow"))

    drive(
        lambda session: session.run(
            task, conversation, parent_id(), project=project, assistant=assistant
        ),
        json_=json_, no_input=no_input, yes=yes, check=check,
    )


@command(epilog=exitcodes.HELP)
def resume(
    message_id: Annotated[str, argument("The paused message.")],
    approve: Annotated[bool, typer.Option("--approve", help="Approve every pending call.")] = False,
    deny: Annotated[bool, typer.Option("--deny", help="Deny every pending call.")] = False,
    reason: Annotated[
        str | None, option("--reason", help="Why (sent to the model) for denied calls.")
    ] = None,
    always: Annotated[
        bool,
        typer.Option("--always", help="Approve and always allow these tools in this conversation."),
    ] = False,
    decision: Annotated[
        list[str] | None,
        option(
            "--decision",
            help="Per call: CALL_ID=approve|deny|always, the call as its full id or its "
            "number as listed (#1 or 1); repeat for each pending call.",
        ),
    ] = None,
    json_: JsonOption = False,
    yes: YesOption = False,
    no_input: NoInputOption = False,
) -> None:
    """Continue a paused message (from any process) and show the rest of the run.

    Without decision flags you are asked at a terminal, as in `run`. A message that is not
    waiting is a conflict (exit 5); bad decisions exit 2 and leave the message paused.
    """

    def decide(calls: list[AskedCall]) -> ResumeData | None:
        return decisions_from_flags(
            approve=approve,
            deny=deny,
            always=always,
            reason=reason,
            decision=decision or [],
            calls=calls,
        )

    decide([])  # reject contradictory flags before opening anything

    drive(
        lambda session: session.resume(message_id, decide),
        json_=json_, no_input=no_input, yes=yes,
        check=lambda settings: before_run(settings, message=message_id),
    )


@command(epilog=exitcodes.HELP)
def retry(
    message_id: Annotated[str, argument("The failed or cancelled message.")],
    json_: JsonOption = False,
    no_input: NoInputOption = False,
    yes: YesOption = False,
) -> None:
    """Run a failed or cancelled message again, as a sibling on the same branch.

    The new message has the same conversation, parent and content, and becomes the active
    branch; the old one keeps its error and events. It runs as with `run` (pauses, --yes,
    --no-input, Ctrl-C). A completed, paused or running message is a conflict (exit 5).
    """

    drive(
        lambda session: session.retry(message_id), json_=json_, no_input=no_input, yes=yes,
        check=lambda settings: before_run(settings, message=message_id),
    )

"""Workflow commands: `workflows` (list), `workflow validate FILE`, `workflow run NAME`,
`workflow graph NAME` (Mermaid) and `lineage MESSAGE_ID` (where each value came from).

`workflow run` drives the run like `artifactflow run`: live rendering, approvals at a terminal,
`--yes`, or exit 3 with the `resume` command to continue from anywhere.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ..errors import UserError
from . import exitcodes, views
from .app import JsonOption, NoInputOption, YesOption, app, command, drive, show
from .options import GLOBALS, argument, option
from .text import Text, console

if TYPE_CHECKING:
    from rich.console import Console

    from ..shapes import JsonObject
    from .session import Session

workflow_app = typer.Typer(help="Validate, run and draw workflows (config/workflows/*.yaml).",
                           no_args_is_help=True)
app.add_typer(workflow_app, name="workflow")


def _catalog() -> Any:
    """Agents, tools and settings without opening the stores (validation needs no database)."""
    from ..core.engine import build_registry, load_agent_specs

    settings = GLOBALS.settings()
    tools = build_registry(settings)
    return SimpleNamespace(settings=settings, tools=tools, agents=load_agent_specs(settings, tools))


@command("workflows")
def workflows(json_: JsonOption = False) -> None:
    """List the workflows in config/workflows/ and whether each is valid."""
    from ..workflows.launch import list_workflows, workflows_dir

    catalog = _catalog()
    items = list_workflows(catalog)
    if json_:
        views.print_json(items)
        return
    out = console()
    if not items:
        out.print(f"no workflows in {workflows_dir(catalog)} (add NAME.yaml files there)")
    for item in items:
        mark = Text("✓ ", style="green") if item["valid"] else Text("✗ ", style="red")
        line = mark + Text(item["name"], style="bold") + Text(f"  {item['description']}")
        if not item["valid"]:
            line += Text(f"  ({len(item['issues'])} problem(s): artifactflow workflow validate "
                         f"{item['file']})", style="red")
        out.print(line)


@command("validate", group=workflow_app)
def validate(
    file: Annotated[Path, argument("A workflow YAML file.")],
    json_: JsonOption = False,
) -> None:
    """Check a workflow file against the configured agents and tools; every problem is
    printed with its node and fix (exit 2 when there are any)."""
    from ..workflows.errors import WorkflowValidationError
    from ..workflows.launch import validate_spec
    from ..workflows.spec import load_workflow_file

    try:
        spec = load_workflow_file(file)
        issues = validate_spec(_catalog(), spec)
    except WorkflowValidationError as exc:
        spec, issues = None, exc.issues
    if json_:
        views.print_json({"file": str(file), "valid": not issues,
                          "issues": [i.to_dict() for i in issues]})
    else:
        out = console()
        if not issues and spec is not None:
            out.print(Text(f"✓ {file}: workflow '{spec.name}' is valid ({len(spec.nodes)} nodes)",
                           style="green"))
        for issue in issues:
            where = f"node '{issue.node}': " if issue.node else ""
            out.print(Text(f"✗ {issue.file}: {where}{issue.message}", style="red"))
            out.print(Text(f"  fix: {issue.fix}", style="dim"))
    if issues:
        raise typer.Exit(exitcodes.USAGE)


@command("graph", group=workflow_app)
def graph(
    name: Annotated[str, argument("A workflow name or file.")],
) -> None:
    """Print a workflow as a Mermaid flowchart."""
    from ..workflows.launch import find_workflow
    from ..workflows.mermaid import to_mermaid
    from ..workflows.spec import load_workflow_file

    path = Path(name)
    spec = load_workflow_file(path) if path.suffix in (".yaml", ".yml") and path.exists() else find_workflow(_catalog(), name)
    typer.echo(to_mermaid(spec), nl=False)


def parse_inputs(pairs: list[str], file: Path | None, schema: JsonObject | None) -> JsonObject:
    """`--input-file F` (JSON or YAML) then `--input key=value` pairs; a value is read as JSON
    (numbers, lists, true) unless the schema says the field is a string."""
    import yaml

    value: JsonObject = {}
    if file is not None:
        try:
            loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError) as exc:
            raise UserError(f"--input-file {file}: cannot read it as JSON or YAML: {exc}") from None
        if not isinstance(loaded, dict):
            raise UserError(f"--input-file {file}: expected an object at the top level")
        value.update(loaded)
    props = (schema or {}).get("properties") or {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise UserError(f"--input {pair!r}: write key=value")
        if (props.get(key) or {}).get("type") == "string":
            value[key] = raw
            continue
        try:
            value[key] = json.loads(raw)
        except json.JSONDecodeError:
            value[key] = raw
    return value


@command("run", epilog=exitcodes.HELP, group=workflow_app)
def run(
    name: Annotated[str, argument("The workflow.")],
    input_: Annotated[
        list[str] | None, option("--input", "-i", help="key=value (repeat); JSON values are parsed.")
    ] = None,
    input_file: Annotated[
        Path | None, option("--input-file", help="The input as a JSON or YAML file.")
    ] = None,
    conversation: Annotated[
        str | None, option("--conversation", "-c", help="Run inside this conversation.")
    ] = None,
    json_: JsonOption = False,
    no_input: NoInputOption = False,
    yes: YesOption = False,
) -> None:
    """Run a workflow and show its nodes at work; pauses for approval like `run`."""
    from ..client import WorkflowTask


    async def start(session: Session) -> int:
        value = parse_inputs(input_ or [], input_file, session.client.workflows.get(name).input)
        return await session.start(WorkflowTask(name, value, conversation_id=conversation))

    drive(start, json_=json_, no_input=no_input, yes=yes)


@command("lineage")
def lineage(
    message_id: Annotated[str, argument("A workflow run's message.")],
    execution: Annotated[
        str | None, option("--from", help="Trace this execution (default: the output).")
    ] = None,
    json_: JsonOption = False,
) -> None:
    """Show where a workflow run's output came from: each node execution and its parents."""

    from ..workflows import lineage as wf_lineage

    def draw(out: Console, records: Sequence[Mapping[str, Any]]) -> int:
        tree = wf_lineage.provenance(records, execution)
        if tree is None:
            out.print(f"no node execution {execution!r} in message {message_id}" if execution
                      else f"message {message_id} has no workflow lineage")
            return exitcodes.USAGE
        for line in wf_lineage.tree_lines(tree):
            out.print(Text(line))
        return exitcodes.OK

    show(lambda reader: reader.workflows.lineage(message_id), draw, json_)

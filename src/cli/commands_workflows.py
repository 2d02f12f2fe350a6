"""Workflow commands: `workflows` (list), `workflow validate FILE`, `workflow run NAME`,
`workflow graph NAME` (Mermaid) and `lineage MESSAGE_ID` (where each value came from).

`workflow run` drives the run like `artifactflow run`: live rendering, approvals at a terminal,
`--yes`, or exit 3 with the `resume` command to continue from anywhere.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Annotated, Any

import typer
import yaml
from rich.text import Text

from ..client import Client, WorkflowTask
from ..core.engine import build_registry, load_agent_specs
from ..errors import UserError
from ..shapes import JsonObject
from ..workflows import lineage as wf_lineage
from ..workflows.errors import WorkflowValidationError
from ..workflows.launch import find_workflow, list_workflows, validate_spec, workflows_dir
from ..workflows.mermaid import to_mermaid
from ..workflows.spec import load_workflow_file
from . import exitcodes, views
from .app import JsonOption, NoInputOption, YesOption, app, execute, make_session
from .options import GLOBALS, with_globals
from .render import console

workflow_app = typer.Typer(help="Validate, run and draw workflows (config/workflows/*.yaml).",
                           no_args_is_help=True)
app.add_typer(workflow_app, name="workflow")


def _catalog() -> Any:
    """Agents, tools and settings without opening the stores (validation needs no database)."""
    settings = GLOBALS.settings()
    tools = build_registry(settings)
    return SimpleNamespace(settings=settings, tools=tools, agents=load_agent_specs(settings, tools))


@app.command("workflows")
@with_globals
def workflows(json_: JsonOption = False) -> None:
    """List the workflows in config/workflows/ and whether each is valid."""
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


@workflow_app.command("validate")
@with_globals
def validate(
    file: Annotated[Path, typer.Argument(help="A workflow YAML file.", show_default=False)],
    json_: JsonOption = False,
) -> None:
    """Check a workflow file against the configured agents and tools; every problem is
    printed with its node and fix (exit 2 when there are any)."""
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


@workflow_app.command("graph")
@with_globals
def graph(
    name: Annotated[str, typer.Argument(help="A workflow name or file.", show_default=False)],
) -> None:
    """Print a workflow as a Mermaid flowchart."""
    path = Path(name)
    spec = load_workflow_file(path) if path.suffix in (".yaml", ".yml") and path.exists() else find_workflow(_catalog(), name)
    typer.echo(to_mermaid(spec), nl=False)


def parse_inputs(pairs: list[str], file: Path | None, schema: JsonObject | None) -> JsonObject:
    """`--input-file F` (JSON or YAML) then `--input key=value` pairs; a value is read as JSON
    (numbers, lists, true) unless the schema says the field is a string."""
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


@workflow_app.command("run", epilog=exitcodes.HELP)
@with_globals
def run(
    name: Annotated[str, typer.Argument(help="The workflow.", show_default=False)],
    input_: Annotated[list[str] | None, typer.Option(
        "--input", "-i", help="key=value (repeat); JSON values are parsed.", show_default=False)] = None,
    input_file: Annotated[Path | None, typer.Option(
        "--input-file", help="The input as a JSON or YAML file.", show_default=False)] = None,
    conversation: Annotated[str | None, typer.Option(
        "--conversation", "-c", help="Run inside this conversation.", show_default=False)] = None,
    json_: JsonOption = False,
    no_input: NoInputOption = False,
    yes: YesOption = False,
) -> None:
    """Run a workflow and show its nodes at work; pauses for approval like `run`."""

    async def work(client: Client) -> int:
        spec = client.workflows.get(name)
        value = parse_inputs(input_ or [], input_file, spec.input)
        session = make_session(client, json_=json_, no_input=no_input, yes=yes)
        return await session.start(WorkflowTask(name, value, conversation_id=conversation))

    execute(work)


@app.command("lineage")
@with_globals
def lineage(
    message_id: Annotated[str, typer.Argument(help="A workflow run's message.", show_default=False)],
    execution: Annotated[str | None, typer.Option(
        "--from", help="Trace this execution (default: the output).", show_default=False)] = None,
    json_: JsonOption = False,
) -> None:
    """Show where a workflow run's output came from: each node execution and its parents."""

    async def work(client: Client) -> int:
        records = await client.workflows.lineage(message_id)
        if json_:
            views.print_json(records)
            return exitcodes.OK
        tree = wf_lineage.provenance(records, execution)
        out = console()
        if tree is None:
            out.print(f"no node execution {execution!r} in message {message_id}" if execution
                      else f"message {message_id} has no workflow lineage")
            return exitcodes.USAGE
        for line in wf_lineage.tree_lines(tree):
            out.print(Text(line))
        return exitcodes.OK

    execute(work)

"""Launching workflows on the core run engine (`core/run/`), and handing it their graphs.

A workflow run is a message like any other: it gets a conversation, a message id, a thread,
an event log, a lease and a run token, and it is driven by `core.run.segment.Segment` — only
the compiled graph differs. `af_workflow_runs` remembers which workflow (and which exact file
text) a message runs; `WorkflowGraphs` (a `GraphProvider` the client registers on the engine)
hands `Runtime.graph_for` that graph, so a pause is resumed, from any process, on the graph
it paused in, with the ordinary resume (`Resume(...)`, `artifactflow resume`,
`POST …/resume`).

Compiled graphs are cached on the `WorkflowGraphs` of an engine by the digest of the
workflow text.
"""

from __future__ import annotations

import json
import logging
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

from ..core.conversations import ACTIVE_BRANCH
from ..core.run.launch import launch
from ..errors import NotFoundError, WorkflowInputError
from ..events.envelope import Emitted
from ..events.payloads import MetadataData
from ..hooks.runs import run_info
from ..shapes import JsonObject
from .compile import compile_workflow
from .errors import WorkflowIssue, WorkflowValidationError
from .schemas import problems
from .spec import WorkflowSpec, load_workflow_file, parse_workflow, workflow_files
from .validate import check_workflow, validate_workflow

_log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from langgraph.pregel import Pregel

    from ..agents.spec import AgentSpec
    from ..core.context import Services
    from ..core.conversations import ConversationManager
    from ..core.run.runtime import Runtime
    from ..core.store.rows import MessageRow


def workflows_dir(services: Services) -> Path:
    return Path(services.settings.config_dir) / "workflows"


class StartedWorkflow(TypedDict):
    """The ids of a workflow run `start_workflow` started."""

    conversation_id: str
    message_id: str
    thread_id: str
    workflow: str


def known(services: Services) -> tuple[dict[str, AgentSpec], dict[str, JsonObject]]:
    """Agents and tool argument schemas a workflow may use."""
    tools = {name: tool.json_schema() for name in services.tools.names()
             if (tool := services.tools.get(name)) is not None}
    return dict(services.agents), tools


def validate_spec(services: Services, spec: WorkflowSpec) -> list[WorkflowIssue]:
    agents, tools = known(services)
    return validate_workflow(spec, agents=agents, tools=tools)[0]


def list_workflows(services: Services) -> list[dict[str, Any]]:
    """Every workflow file with its name, description and problems (valid ones have none)."""
    out = []
    for path in workflow_files(workflows_dir(services)):
        try:
            spec = load_workflow_file(path)
            issues = validate_spec(services, spec)
            out.append({"name": spec.name, "description": spec.description, "file": str(path),
                        "input": spec.input, "nodes": len(spec.nodes),
                        "valid": not issues, "issues": [i.to_dict() for i in issues]})
        except WorkflowValidationError as exc:
            out.append(_bad_entry(path, exc.issues))
        except Exception as exc:  # a validation bug: report it on this file, list the others
            _log.exception("validating %s failed", path)
            out.append(_bad_entry(path, [WorkflowIssue(
                str(path), None, f"validation failed unexpectedly ({type(exc).__name__}: {exc})",
                "report this as a bug, with the file")]))
    return out


def _bad_entry(path: Path, issues: list[WorkflowIssue]) -> dict[str, Any]:
    return {"name": path.stem, "description": "", "file": str(path), "input": None,
            "nodes": 0, "valid": False, "issues": [i.to_dict() for i in issues]}


def find_workflow(services: Services, name: str) -> WorkflowSpec:
    """The workflow called `name` (its `name:` or file name), validated."""
    for path in workflow_files(workflows_dir(services)):
        try:
            spec = load_workflow_file(path)
        except WorkflowValidationError:
            if path.stem == name:
                raise
            continue  # another file's problem: `list_workflows` reports it
        if spec.name == name or path.stem == name:
            agents, tools = known(services)
            check_workflow(spec, agents=agents, tools=tools)
            return spec
    names = [p.stem for p in workflow_files(workflows_dir(services))]
    raise NotFoundError(
        f"workflow '{name}' not found in {workflows_dir(services)}; "
        f"available: {', '.join(names) or 'none (add a .yaml file there)'}"
    )


class WorkflowGraphs:
    """The `GraphProvider` of workflow runs: the compiled graph of a stored workflow run (its
    own file text, not today's file), compiled once per engine, and the calls it waits on."""

    def __init__(self) -> None:
        self.compiled: dict[str, Pregel] = {}  # by file digest

    def compile(self, rt: Runtime, spec: WorkflowSpec) -> Pregel:
        graph = self.compiled.get(spec.digest)
        if graph is None:
            agents, tools = known(rt.services)
            topo = check_workflow(spec, agents=agents, tools=tools)
            graph = compile_workflow(spec, topo, rt.checkpoints.saver)
            self.compiled[spec.digest] = graph
        return graph

    async def graph_for(self, rt: Runtime, message: MessageRow) -> Any | None:
        row = await rt.store.get_workflow_run(message["id"])
        if row is None:
            return None
        source = f"workflow '{row['workflow']}' of message {row['message_id']}"
        return self.compile(rt, parse_workflow(row["definition"], source=source))

    async def pending_calls(self, rt: Runtime, message: MessageRow, graph: Any) -> list[dict[str, Any]] | None:
        """The calls a paused workflow waits on. They sit in its nested steps' state (one
        checkpoint namespace per step execution), which the parent graph's state does not
        show: read the newest checkpoint of each namespace, newest first, one entry per call
        id."""
        if not any(graph is g for g in self.compiled.values()):
            return None
        seen_ns: set[str] = set()
        calls: dict[str, dict[str, Any]] = {}
        config = {"configurable": {"thread_id": message["thread_id"]}}
        async for item in rt.checkpoints.saver.alist(config):  # type: ignore[arg-type]
            ns = item.config.get("configurable", {}).get("checkpoint_ns") or ""
            if not ns or ns in seen_ns:
                continue
            seen_ns.add(ns)
            for call in item.checkpoint["channel_values"].get("pending_tool_calls") or []:
                calls.setdefault(call["id"], call)
        return list(calls.values())


def workflow_graphs(rt: Runtime) -> WorkflowGraphs:
    """The engine's registered `WorkflowGraphs` (registered now if missing)."""
    for provider in rt.graph_providers:
        if isinstance(provider, WorkflowGraphs):
            return provider
    provider = WorkflowGraphs()
    rt.register(provider)
    return provider


def check_input(spec: WorkflowSpec, value: Any) -> JsonObject:
    """`value` as the workflow's input (a JSON object matching its input schema), or
    `WorkflowInputError`."""
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise WorkflowInputError(f"workflow '{spec.name}' takes a JSON object as input, got {type(value).__name__}")
    found = problems(spec.input, value)
    if found:
        raise WorkflowInputError(
            f"input of workflow '{spec.name}' does not match its schema: {'; '.join(found)}. "
            f"Schema: {json.dumps(spec.input, ensure_ascii=False)}"
        )
    return value


async def start_workflow(
    rt: Runtime,
    conversations: ConversationManager,
    name: str,
    input: JsonObject | None = None,
    *,
    conversation_id: str | None = None,
    user_id: str | None = None,
) -> StartedWorkflow:
    """Validate, create the message and start the run in the background; return its ids."""
    services = rt.services
    spec = find_workflow(services, name)
    value = check_input(spec, input)
    workflow_graphs(rt).compile(rt, spec)
    for node in spec.nodes:  # missing credentials fail now, not halfway through the run
        if node.agent:
            services.models.resolve(services.agents[node.agent].model)
    if conversation_id is None:
        conversation = await conversations.start_conversation(user_id=user_id, title=f"workflow {spec.name}")
    else:
        conversation = await conversations.get(conversation_id, user_id=user_id)
    content = f"workflow {spec.name}: {json.dumps(value, ensure_ascii=False)}"
    run_token = uuid.uuid4().hex
    message = await conversations.add_message(
        conversation["id"], content, parent_id=ACTIVE_BRANCH, run_token=run_token,
        lease_expires_at=rt.lease(),
    )
    await rt.store.add_workflow_run({
        "message_id": message["id"], "conversation_id": conversation["id"], "workflow": spec.name,
        "digest": spec.digest, "definition": spec.text or "", "input": value,
    })
    metadata = MetadataData(workflow=spec.name, input=value, content=content,
                            parent_message_id=message["parent_id"])
    info = run_info(message, services.lead.name, user_id=user_id)  # the segment as hooks see it
    launch(rt, message, run_token, {"wf_input": value}, first_events=[Emitted(metadata)],
                  info=info)
    return {"conversation_id": conversation["id"], "message_id": message["id"],
            "thread_id": message["thread_id"], "workflow": spec.name}

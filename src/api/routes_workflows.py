"""Workflows over HTTP: list them, start a run, list runs, read a run's lineage.

A workflow run is a message like a chat run: `POST /workflows/{name}/runs` answers 202 with
the same `stream_url` (`GET /stream/{message_id}`, SSE, `Last-Event-ID`), pauses are answered
with `POST /chat/{message_id}/resume`, and `GET /messages/{message_id}/lineage` says where each
value came from.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import APIRouter, Depends, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from ..client import Client, WorkflowTask
from ..protocol.wire import JSONObject
from ..workflows.lineage import provenance
from ..workflows.mermaid import to_mermaid
from .auth import current_user, owned_conversation, owned_message
from .deps import MAX_INT, api_url, error_docs, get_client
from .models import StorableText

router = APIRouter(tags=["workflows"])
User = Depends(current_user)
ClientDep = Depends(get_client)


class WorkflowIssueInfo(BaseModel):
    file: str
    node: str | None
    message: str
    fix: str


class WorkflowInfo(BaseModel):
    name: str
    description: str
    file: str
    valid: bool
    nodes: int = Field(description="How many nodes the workflow has")
    input: dict[str, Any] | None = Field(description="JSON Schema of the run input")
    issues: list[WorkflowIssueInfo] = Field(description="Every problem found; empty when valid")


class WorkflowList(BaseModel):
    items: list[WorkflowInfo]


class WorkflowDetail(WorkflowInfo):
    mermaid: str = Field(description="The graph as a Mermaid flowchart")


class RunRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # bounded depth, clean text: a 300-deep input was accepted, failed the run, and then broke
    # the listing of the workflow's runs (500) for good
    input: JSONObject = Field(default_factory=dict, description="Checked against the input schema")
    conversation_id: StorableText | None = Field(
        None, description="Run inside this conversation; omitted: a new one"
    )


class RunAccepted(BaseModel):
    conversation_id: str
    message_id: str
    thread_id: str
    workflow: str
    stream_url: str = Field(description="GET this for the run's server-sent events")


class RunInfo(BaseModel):
    message_id: str
    conversation_id: str
    workflow: str
    input: dict[str, Any]
    status: str
    outcome: str | None
    created_at: float


class RunList(BaseModel):
    items: list[RunInfo]
    limit: int
    offset: int


class LineageRecord(BaseModel):
    model_config = ConfigDict(extra="allow")

    execution_id: str = Field(description="node#iteration, with [index] inside a split or branch")
    node_id: str
    role: str
    kind: str | None
    iteration: int
    group_id: str | None = Field(description="The split/branch execution it ran in (a merge: the one it joins)")
    item_index: int | None
    parents: list[str] = Field(description="Executions whose output led here")
    status: str = Field(description="running, ok, failed, skipped or cancelled")
    input: Any
    output: Any
    error: str | None
    started_at: float
    finished_at: float | None


class Lineage(BaseModel):
    message_id: str
    records: list[LineageRecord]
    tree: dict[str, Any] | None = Field(description="Provenance of the output: execution ids and their parents")


@router.get("/workflows", response_model=WorkflowList, responses=error_docs(),
            summary="The workflows in config/workflows/, with their problems")
async def workflows(user: str | None = User, client: Client = ClientDep) -> WorkflowList:
    return WorkflowList(items=[WorkflowInfo(**w) for w in client.workflows.list()])


@router.get("/workflows/{name}", response_model=WorkflowDetail, responses=error_docs(404),
            summary="One workflow and its graph as Mermaid")
async def workflow(name: str, user: str | None = User, client: Client = ClientDep) -> WorkflowDetail:
    spec = client.workflows.get(name)
    return WorkflowDetail(name=spec.name, description=spec.description, file=spec.source or "",
                          valid=True, nodes=len(spec.nodes), input=spec.input, issues=[],
                          mermaid=to_mermaid(spec))


@router.post("/workflows/{name}/runs", status_code=202, response_model=RunAccepted,
             responses=error_docs(400, 404, 413, 429),
             summary="Start a workflow run; it continues in the background")
async def start_run(
    name: str, body: RunRequest, request: Request, user: str | None = User,
    client: Client = ClientDep,
) -> RunAccepted:
    """`input` must match the workflow's input schema (422 otherwise); each workflow's own
    operation in the published schema (`POST /workflows/<its name>/runs`) carries it."""
    if body.conversation_id is not None:
        await owned_conversation(client, body.conversation_id, user)
    async with request.app.state.limiter.slot(client):
        run = await client.runs.start(WorkflowTask(name, body.input, conversation_id=body.conversation_id),
                                      user_id=user)
    return RunAccepted(conversation_id=run.conversation_id, message_id=run.message_id,
                       thread_id=run.thread_id, workflow=run.workflow or name,
                       stream_url=api_url(request, f"/stream/{run.message_id}"))


def publish_inputs(schema: dict[str, Any], workflows: list[dict[str, Any]]) -> dict[str, Any]:
    """Give every valid workflow its own `POST /workflows/<name>/runs` operation whose body
    declares that workflow's input schema (in place; returns `schema`). A concrete path is
    matched before the templated one (OpenAPI 3.1, "Paths"), so clients and fuzzers see the
    exact body each workflow takes; the templated operation stays for names not known yet."""
    paths = schema.get("paths", {})
    generic_path = next((p for p in paths if p.endswith("/workflows/{name}/runs")), None)
    if generic_path is None:
        return schema
    generic = paths[generic_path]["post"]
    conversation_id = schema["components"]["schemas"]["RunRequest"]["properties"]["conversation_id"]
    for workflow in workflows:
        name = str(workflow["name"])
        if not workflow.get("valid") or not name or any(c in name for c in "/{}?#"):
            continue
        declared = workflow.get("input") or {"type": "object"}
        body: dict[str, Any] = {
            "type": "object",
            "additionalProperties": False,
            "properties": {"input": declared, "conversation_id": conversation_id},
        }
        if declared.get("required"):
            body["required"] = ["input"]
        operation = copy.deepcopy(generic)
        operation.pop("parameters", None)
        operation["operationId"] = f"start_workflow_run_{name}"
        operation["summary"] = f"Start a run of workflow '{name}'; it continues in the background"
        operation["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
        paths[generic_path.replace("{name}", name)] = {"post": operation}
    return schema


@router.get("/workflows/{name}/runs", response_model=RunList, responses=error_docs(),
            summary="A workflow's runs, newest first")
async def runs(
    name: StorableText,
    limit: int = Query(20, ge=1, le=200),
    offset: int = Query(0, ge=0, le=MAX_INT),
    user: str | None = User,
    client: Client = ClientDep,
) -> RunList:
    rows = await client.workflows.runs(name, user_id=user, limit=limit, offset=offset)
    return RunList(items=[RunInfo(**r) for r in rows], limit=limit, offset=offset)


@router.get("/messages/{message_id}/lineage", response_model=Lineage, responses=error_docs(404),
            summary="Where a workflow run's values came from: every node execution and its parents")
async def lineage(message_id: str, user: str | None = User, client: Client = ClientDep) -> Lineage:
    await owned_message(client, message_id, user)
    records = await client.workflows.lineage(message_id)
    return Lineage(
        message_id=message_id,
        records=[LineageRecord.model_validate(r) for r in records],
        tree=_strip(provenance(records)),
    )


def _strip(tree: dict[str, Any] | None) -> dict[str, Any] | None:
    """The provenance tree by execution id (the records are listed beside it)."""
    if tree is None:
        return None
    return {"execution_id": tree["execution_id"], "repeated": tree["repeated"],
            "parents": [_strip(p) for p in tree["parents"]]}
